// gemm_mma_sync.cu: rung 2 of the ladder, C = A @ B^T on the tensor cores through warp-level mma.sync.
//
// A 256-thread block owns a 128x128 tile of C; its 8 warps (2 along M x 4 along N) own 64x32 each,
// as 4 x 4 fragments of mma.sync.m16n8k16 (bf16 in, fp32 accumulators in 64 registers per thread).
// Tiles of 128x32 (A) and 128x32 (B) move global -> shared with cp.async (LDGSTS: no registers,
// no waiting at the load) through a 4-stage ring, so the loads of the next three K slices are in
// flight while the tensor cores work on this one; ldmatrix.x4 reads the fragments. Shared rows are
// padded from 64 to 80 bytes so the 8 row addresses of an ldmatrix fall in 8 distinct bank groups.
// Each warp still issues every mma and every ldmatrix itself, and the operands pass through its
// registers: on Hopper that caps mma.sync well below the warpgroup-MMA peak (the next rung).
#include "ch10_gemm.cuh"

namespace {
constexpr int kBM = 128, kBN = 128, kBK = 32, kStages = 4, kThreads = 256;
constexpr int kPitch = kBK + 8;                    // bf16 per shared row: 80 bytes, conflict-free ldmatrix
constexpr int kStageElems = (kBM + kBN) * kPitch;  // A then B
constexpr int kSmemBytes = kStages * kStageElems * 2;

// Issue the cp.async copies of K slice kt (A rows then B rows, 16 bytes each) into stage `st`.
__device__ __forceinline__ void load_slice(bf16* st, const bf16* a, const bf16* b, int k, int kt) {
#pragma unroll
  for (int i = 0; i < (kBM + kBN) * kBK / 8 / kThreads; ++i) {
    const int q = threadIdx.x + i * kThreads, row = q / (kBK / 8), chunk = q % (kBK / 8);
    const bf16* src = row < kBM ? a + (size_t)row * k : b + (size_t)(row - kBM) * k;
    cp_async_16(smem_u32(st + row * kPitch + chunk * 8), src + kt * kBK + chunk * 8);
  }
}

// acc += this warp's 64x32 share of the stage's 128x32 A times 32x128 B^T.
__device__ __forceinline__ void mma_slice(const bf16* st, float (&acc)[4][4][4], int warp_m, int warp_n) {
  const int lane = threadIdx.x % 32;
  const bf16* as = st + (warp_m * 64 + lane % 16) * kPitch + (lane / 16) * 8;
  const bf16* bs = st + (kBM + warp_n * 32 + (lane / 16) * 8 + lane % 8) * kPitch + ((lane / 8) % 2) * 8;
#pragma unroll
  for (int ks = 0; ks < kBK; ks += 16) {
    uint32_t af[4][4], bfr[2][4];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) ldmatrix_x4(af[mi], smem_u32(as + mi * 16 * kPitch + ks));
#pragma unroll
    for (int np = 0; np < 2; ++np) ldmatrix_x4(bfr[np], smem_u32(bs + np * 16 * kPitch + ks));
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) mma_bf16_16816(acc[mi][ni], af[mi], bfr[ni / 2][(ni % 2) * 2], bfr[ni / 2][(ni % 2) * 2 + 1]);
  }
}

__global__ __launch_bounds__(kThreads) void gemm_mma_sync(const bf16* __restrict__ a, const bf16* __restrict__ b,
                                                          bf16* __restrict__ c, int m, int n, int k) {
  extern __shared__ __align__(128) bf16 smem[];
  const Tile tile = grouped_tile(m / kBM, n / kBN);
  a += (size_t)tile.m * kBM * k;
  b += (size_t)tile.n * kBN * k;
  const int warp = threadIdx.x / 32, warp_m = warp / 4, warp_n = warp % 4, slices = k / kBK;
  float acc[4][4][4] = {};
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < slices) load_slice(smem + s * kStageElems, a, b, k, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < slices; ++kt) {
    cp_async_wait<kStages - 2>();  // this thread's copies of slice kt have landed...
    __syncthreads();               // ...and everyone's; everyone is also done with slice kt - 1
    const int next = kt + kStages - 1;
    if (next < slices) load_slice(smem + (next % kStages) * kStageElems, a, b, k, next);
    cp_async_commit();
    mma_slice(smem + (kt % kStages) * kStageElems, acc, warp_m, warp_n);
  }
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
      const int row = tile.m * kBM + warp_m * 64 + mi * 16 + g;
      const int col = tile.n * kBN + warp_n * 32 + ni * 8 + 2 * t;
      store_bf16x2(c + (size_t)row * n + col, acc[mi][ni][0], acc[mi][ni][1]);
      store_bf16x2(c + (size_t)(row + 8) * n + col, acc[mi][ni][2], acc[mi][ni][3]);
    }
}
}  // namespace

extern "C" int gemm_bf16(const bf16* a, const bf16* b, bf16* c, int m, int n, int k, cudaStream_t s) {
  if (!tiles_fit(m, n, k, kBM, kBN, kBK)) return kBadShape;
  if (const int err = opt_in_smem(gemm_mma_sync, kSmemBytes)) return err;
  gemm_mma_sync<<<(m / kBM) * (n / kBN), kThreads, kSmemBytes, s>>>(a, b, c, m, n, k);
  return static_cast<int>(cudaGetLastError());
}

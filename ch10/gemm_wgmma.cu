// gemm_wgmma.cu: rung 3 of the ladder, C = A @ B^T with Hopper's warpgroup MMA (wgmma.mma_async).
//
// A 256-thread block (2 warpgroups) owns a 128x256 tile of C; each warpgroup owns 64x256, held as
// 128 fp32 registers per thread. Per 64-wide K slice the block stages A (128x64) and B (256x64) in
// shared memory, 48 KB per stage, 4 stages; every thread issues 12 cp.async copies of 16 bytes per
// slice and writes them in the 128B swizzle (ch10_wgmma.cuh) that wgmma reads through descriptors.
// Then each warpgroup issues four m64n256k16 wgmmas straight from shared memory: no ldmatrix, no
// operand registers, 64x256x16 multiply-adds per instruction instead of mma.sync's 16x8x16, and
// asynchronous, so the warps go on while the tensor cores work (one slice's group stays in flight).
// The copies still cost every thread address arithmetic and issue slots, and cp.async writes are
// generic-proxy stores: each slice needs a proxy fence and two block barriers. Rung 4 (TMA) removes both.
#include "ch10_wgmma.cuh"

namespace {
constexpr int kBM = 128, kBN = 256, kStages = 4, kThreads = 256;
constexpr int kATileBytes = kBM * kRowBytes, kStageBytes = (kBM + kBN) * kRowBytes;  // 16 KB + 32 KB
constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + slack to align the ring to 1024 bytes

// Issue this thread's cp.async copies of K slice kt (A rows 0..127, then B rows) into the stage at `st`.
__device__ __forceinline__ void load_slice(uint32_t st, const bf16* a, const bf16* b, int k, int kt) {
#pragma unroll
  for (int i = 0; i < (kBM + kBN) * (kRowBytes / 16) / kThreads; ++i) {
    const int q = threadIdx.x + i * kThreads, row = q / 8, chunk = q % 8;
    const bf16* src = row < kBM ? a + (size_t)row * k : b + (size_t)(row - kBM) * k;
    cp_async_16(st + swizzled_offset(row, chunk), src + kt * kTileK + chunk * 8);
  }
}

__global__ __launch_bounds__(kThreads, 1) void gemm_wgmma(const bf16* __restrict__ a, const bf16* __restrict__ b,
                                                          bf16* __restrict__ c, int m, int n, int k) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t ring = (smem_u32(smem) + 1023) & ~1023u;
  const Tile tile = grouped_tile(m / kBM, n / kBN);
  a += (size_t)tile.m * kBM * k;
  b += (size_t)tile.n * kBN * k;
  const int wg = threadIdx.x / 128, slices = k / kTileK;
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < slices) load_slice(ring + s * kStageBytes, a, b, k, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < slices; ++kt) {
    cp_async_wait<kStages - 2>();  // this thread's copies of slice kt have landed
    fence_proxy_async();           // its generic-proxy writes become visible to wgmma (async proxy)
    __syncthreads();               // and so have everyone's
    const uint32_t st = ring + (kt % kStages) * kStageBytes;
    wgmma_tile(d, st + wg * 64 * kRowBytes, st + kATileBytes);
    wgmma_wait<1>();  // this warpgroup's wgmmas of slice kt - 1 are done
    __syncthreads();  // both warpgroups': the stage of slice kt - 1 may be overwritten
    const int next = kt + kStages - 1;
    if (next < slices) load_slice(ring + (next % kStages) * kStageBytes, a, b, k, next);
    cp_async_commit();
  }
  wgmma_wait<0>();
  fence_accumulators(d);
  store_accumulators(c, n, tile.m * kBM + wg * 64, tile.n * kBN, d);
}
}  // namespace

extern "C" int gemm_bf16(const bf16* a, const bf16* b, bf16* c, int m, int n, int k, cudaStream_t s) {
  if (!tiles_fit(m, n, k, kBM, kBN, kTileK)) return kBadShape;
  if (const int err = opt_in_smem(gemm_wgmma, kSmemBytes)) return err;
  gemm_wgmma<<<(m / kBM) * (n / kBN), kThreads, kSmemBytes, s>>>(a, b, c, m, n, k);
  return static_cast<int>(cudaGetLastError());
}

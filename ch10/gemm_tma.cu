// gemm_tma.cu: rung 4 of the ladder, rung 3's wgmma GEMM fed by the Tensor Memory Accelerator.
//
// Same block (2 warpgroups, 128x256 tile of C, 4 stages of 64-wide K slices, same wgmmas). What
// changes is how a slice gets into shared memory: instead of 256 threads issuing 12 cp.async each
// and swizzling addresses by hand, one thread hands the copy engine two tensor maps (encoded on the
// host by cuTensorMapEncodeTiled: A with a 128x64 box, B with a 256x64 box, both in the 128B
// swizzle that wgmma reads) and the slice's coordinates; TMA moves the 48 KB (UTMALDG) and counts
// its bytes on the stage's mbarrier ("full"); the warpgroups wait on that barrier, with the phase
// parity alternating each time the ring comes round. No address math, no proxy fence, no cp.async
// wait and one block barrier per slice fewer. Every warpgroup still does both jobs, though: thread 0
// loads between its own wgmmas, and the block barrier that frees a stage stalls everyone (rung 5).
#include "ch10_wgmma.cuh"

namespace {
constexpr int kBM = 128, kBN = 256, kStages = 4, kThreads = 256;
constexpr int kATileBytes = kBM * kRowBytes, kStageBytes = (kBM + kBN) * kRowBytes;  // 16 KB + 32 KB
constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + slack to align the ring to 1024 bytes

struct Maps {
  CUtensorMap a, b;
};

// One thread: expect the stage's 48 KB on its barrier, then let TMA copy A's and B's boxes of slice kt.
// Not inlined: with the TMA instructions inside the wgmma loop, ptxas 13.0 serializes the wgmmas
// (warning C7515, a wait after every HGMMA); behind a call it keeps them pipelined.
__device__ __noinline__ void load_slice(uint32_t ring, uint64_t* full, const Maps& maps, Tile tile, int kt) {
  const int s = kt % kStages;
  const uint32_t st = ring + s * kStageBytes;
  mbar_arrive_expect_tx(&full[s], kStageBytes);
  tma_load_2d(st, &maps.a, &full[s], kt * kTileK, tile.m * kBM);
  tma_load_2d(st + kATileBytes, &maps.b, &full[s], kt * kTileK, tile.n * kBN);
}

__global__ __launch_bounds__(kThreads, 1) void gemm_tma(const __grid_constant__ Maps maps, bf16* __restrict__ c,
                                                        int m, int n, int k) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ uint64_t full[kStages];
  const uint32_t ring = (smem_u32(smem) + 1023) & ~1023u;
  const Tile tile = grouped_tile(m / kBM, n / kBN);
  const int wg = threadIdx.x / 128, slices = k / kTileK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) mbar_init(&full[s], 1);
    fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int s = 0; s < kStages - 1 && s < slices; ++s) load_slice(ring, full, maps, tile, s);
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;
  for (int kt = 0; kt < slices; ++kt) {
    mbar_wait(&full[kt % kStages], (kt / kStages) % 2);  // slice kt has landed
    const uint32_t st = ring + (kt % kStages) * kStageBytes;
    wgmma_tile(d, st + wg * 64 * kRowBytes, st + kATileBytes);
    wgmma_wait<1>();  // this warpgroup's wgmmas of slice kt - 1 are done
    __syncthreads();  // both warpgroups': the stage of slice kt - 1 may be overwritten
    if (threadIdx.x == 0 && kt + kStages - 1 < slices) load_slice(ring, full, maps, tile, kt + kStages - 1);
  }
  wgmma_wait<0>();
  fence_accumulators(d);
  store_accumulators(c, n, tile.m * kBM + wg * 64, tile.n * kBN, d);
}
}  // namespace

extern "C" int gemm_bf16(const bf16* a, const bf16* b, bf16* c, int m, int n, int k, cudaStream_t s) {
  if (!tiles_fit(m, n, k, kBM, kBN, kTileK) || ((size_t)a | (size_t)b) % 16) return kBadShape;
  Maps maps;
  if (const int err = encode_tile_map(&maps.a, a, m, k, kBM)) return err;
  if (const int err = encode_tile_map(&maps.b, b, n, k, kBN)) return err;
  if (const int err = opt_in_smem(gemm_tma, kSmemBytes)) return err;
  gemm_tma<<<(m / kBM) * (n / kBN), kThreads, kSmemBytes, s>>>(maps, c, m, n, k);
  return static_cast<int>(cudaGetLastError());
}

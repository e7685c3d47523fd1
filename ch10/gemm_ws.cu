// gemm_ws.cu: rung 5 of the ladder, rung 4's TMA + wgmma GEMM with warp specialization.
//
// A 384-thread block: warpgroup 0 is the producer, warpgroups 1 and 2 the consumers (64x256 of the
// 128x256 tile each, as in rungs 3 and 4). Two mbarriers per stage replace the block barrier:
//   full[s]   the producer arrives with the stage's byte count, TMA completes the bytes;
//   empty[s]  each of the 8 consumer warps arrives once its wgmmas on the stage have completed.
// The producer's single thread runs ahead through the ring, waiting only for a stage to be empty;
// each consumer waits only for its next stage to be full. Nobody waits for the slowest warp of the
// block at every slice, and loads never sit between a warpgroup's wgmmas.
// setmaxnreg moves registers to where they are needed: the block starts with 168 per thread
// (65,536 / 384, rounded down to a multiple of 8); the producer gives back to 40, the consumers
// take 232 (128 x 40 + 256 x 232 = 384 x 168 = 64,512). The kernel must be compiled at exactly 168
// registers, or the consumers' setmaxnreg.inc would wait forever for registers the pool lacks
// (a CPU test checks the count).
#include "ch10_wgmma.cuh"

namespace {
constexpr int kBM = 128, kBN = 256, kStages = 4, kThreads = 384, kConsumerWarps = 8;
constexpr int kATileBytes = kBM * kRowBytes, kStageBytes = (kBM + kBN) * kRowBytes;  // 16 KB + 32 KB
constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + slack to align the ring to 1024 bytes
constexpr int kProducerRegs = 40, kConsumerRegs = 232;
static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= kThreads * 168, "setmaxnreg exceeds the block's registers");

struct Maps {
  CUtensorMap a, b;
};

struct Ring {
  uint32_t base;  // shared address of stage 0 (1024-byte aligned)
  uint64_t* full;
  uint64_t* empty;
};

// The producer's one thread: for each slice, wait until its stage is empty, then TMA both boxes into it.
__device__ void produce(const Ring& ring, const Maps& maps, Tile tile, int slices) {
  for (int kt = 0; kt < slices; ++kt) {
    const int s = kt % kStages;
    if (kt >= kStages) mbar_wait(&ring.empty[s], (kt / kStages - 1) % 2);  // slice kt - kStages released
    const uint32_t st = ring.base + s * kStageBytes;
    mbar_arrive_expect_tx(&ring.full[s], kStageBytes);
    tma_load_2d(st, &maps.a, &ring.full[s], kt * kTileK, tile.m * kBM);
    tma_load_2d(st + kATileBytes, &maps.b, &ring.full[s], kt * kTileK, tile.n * kBN);
  }
}

// A consumer warpgroup: rows half * 64 .. + 63 of the tile; releases each stage one slice later.
__device__ void consume(const Ring& ring, bf16* c, int n, Tile tile, int slices, int half) {
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;
  for (int kt = 0; kt < slices; ++kt) {
    mbar_wait(&ring.full[kt % kStages], (kt / kStages) % 2);  // slice kt has landed
    const uint32_t st = ring.base + (kt % kStages) * kStageBytes;
    wgmma_tile(d, st + half * 64 * kRowBytes, st + kATileBytes);
    wgmma_wait<1>();  // this warpgroup's wgmmas of slice kt - 1 are done: release its stage
    if (kt > 0 && threadIdx.x % 32 == 0) mbar_arrive(&ring.empty[(kt - 1) % kStages]);
  }
  wgmma_wait<0>();
  fence_accumulators(d);
  store_accumulators(c, n, tile.m * kBM + half * 64, tile.n * kBN, d);
}

__global__ __launch_bounds__(kThreads, 1) void gemm_ws(const __grid_constant__ Maps maps, bf16* __restrict__ c,
                                                       int m, int n, int k) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ uint64_t full[kStages], empty[kStages];
  const Ring ring{(smem_u32(smem) + 1023) & ~1023u, full, empty};
  const Tile tile = grouped_tile(m / kBM, n / kBN);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], kConsumerWarps);
    fence_barrier_init();
  }
  __syncthreads();  // the last block-wide barrier: from here on, only mbarriers
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    release_registers<kProducerRegs>();
    if (threadIdx.x == 0) produce(ring, maps, tile, k / kTileK);
  } else {
    claim_registers<kConsumerRegs>();
    consume(ring, c, n, tile, k / kTileK, wg - 1);
  }
}
}  // namespace

extern "C" int gemm_bf16(const bf16* a, const bf16* b, bf16* c, int m, int n, int k, cudaStream_t s) {
  if (!tiles_fit(m, n, k, kBM, kBN, kTileK) || ((size_t)a | (size_t)b) % 16) return kBadShape;
  Maps maps;
  if (const int err = encode_tile_map(&maps.a, a, m, k, kBM)) return err;
  if (const int err = encode_tile_map(&maps.b, b, n, k, kBN)) return err;
  if (const int err = opt_in_smem(gemm_ws, kSmemBytes)) return err;
  gemm_ws<<<(m / kBM) * (n / kBN), kThreads, kSmemBytes, s>>>(maps, c, m, n, k);
  return static_cast<int>(cudaGetLastError());
}

// cluster_multicast.cu: gemm_ws.cu's warp-specialized TMA + wgmma GEMM (C = A @ B^T, bf16, fp32
// accumulation, A M x K and B N x K row-major), with and without TMA multicast. A 384-thread block
// computes a 128 x 256 C tile: warpgroup 0 the producer (one TMA thread), warpgroups 1-2 the
// consumers (wgmma m64n256k16, 64 rows each), a 4-stage ring of 48 KB stages (A 128 x 64, B 256 x
// 64, 128B-swizzled) with full[s] (expect-tx, completed by the copy engine) and empty[s] (consumer
// warps, once their wgmmas on the stage are done). Blocks 2j and 2j+1 compute the vertically
// adjacent tiles (2i, n) and (2i+1, n), so they read the same B tile every K step.
//   kCluster = 1  each block loads its A tile and its whole B tile (two 128-row boxes): 96 KB per
//                 pair of blocks and K step cross from L2 to the SMs.
//   kCluster = 2  the pair is a (2, 1, 1) cluster; each block loads its A tile and one 128-row half
//                 of B with .multicast::cluster (mask 0b11), written at the same offset of both
//                 blocks' shared memory and completed on both full[s] (each still expects 48 KB):
//                 64 KB per pair and K step, the shared operand's L2 bytes per FLOP halved. Every
//                 consumer warp arrives on empty[s] of both blocks (mapa + remote arrive; 16 warps
//                 per empty[s]): a stage is refilled only when both are done. Bit for bit as kCluster 1.
#include "ch10_wgmma.cuh"

namespace {
constexpr int kBM = 128, kBN = 256, kHalfRows = kBN / 2, kStages = 4, kThreads = 384, kConsumerWarps = 8;
constexpr int kATileBytes = kBM * kRowBytes, kHalfBytes = kHalfRows * kRowBytes;  // 16 KB each
constexpr int kStageBytes = kATileBytes + 2 * kHalfBytes, kSmemBytes = kStages * kStageBytes + 1024;
constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // as gemm_ws.cu: compiled at exactly 168

struct Maps {
  CUtensorMap a, b;  // boxes of 128 x 64: an A tile, a half of a B tile
};
struct Ring {
  uint32_t base;  // shared address of stage 0 (1024-byte aligned)
  uint64_t *full, *empty;
};

__device__ __forceinline__ void cluster_sync() {  // every thread of both blocks
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// Arrive on the barrier at bar's offset in cluster block `rank`'s shared memory (itself included), at
// the default CTA-scope release as CUTLASS's ClusterBarrier::arrive(cta_id): spelled .release.cluster,
// ptxas puts a GPU-wide MEMBAR before each arrive (what made the first version 0.64x; a test counts).
__device__ __forceinline__ void arrive_on(uint64_t* bar, uint32_t rank) {
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_u32(bar)), "r"(rank) : "memory");
}
// TMA multicast: the box at (x, y) into dst of every block in `mask`, completing bytes on each one's bar.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const CUtensorMap* map, uint64_t* bar, int x,
                                                      int y, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y),
      "r"(smem_u32(bar)), "h"(mask) : "memory");
}

// Tile (2i + rank, n) of pair blockIdx.x / 2, 8 pair rows at a time (grouped_tile's order, rank = x % 2).
__device__ __forceinline__ Tile pair_tile(int m_tiles, int n_tiles, uint32_t rank) {
  constexpr int kGroup = 8;
  const int p = blockIdx.x / 2, per_group = kGroup * n_tiles, first = p / per_group * kGroup;
  const int rows = min(m_tiles / 2 - first, kGroup), q = p % per_group;
  return {2 * (first + q % rows) + (int)rank, q / rows};
}

// The producer's one thread: wait until stage s is empty (in both blocks), expect its 48 KB, load.
template <int kCluster>
__device__ void produce(const Ring& ring, const Maps& maps, Tile tile, int slices, uint32_t rank) {
  for (int kt = 0; kt < slices; ++kt) {
    const int s = kt % kStages, x = kt * kTileK, b_row = tile.n * kBN;
    if (kt >= kStages) mbar_wait(&ring.empty[s], (kt / kStages - 1) % 2);  // slice kt - kStages released
    const uint32_t st = ring.base + s * kStageBytes, b_tile = st + kATileBytes;
    mbar_arrive_expect_tx(&ring.full[s], kStageBytes);  // own A, own half of B, the peer's half of B
    tma_load_2d(st, &maps.a, &ring.full[s], x, tile.m * kBM);
    if constexpr (kCluster == 2) {
      tma_load_2d_multicast(b_tile + rank * kHalfBytes, &maps.b, &ring.full[s], x, b_row + rank * kHalfRows, 0b11);
    } else {
      tma_load_2d(b_tile, &maps.b, &ring.full[s], x, b_row);
      tma_load_2d(b_tile + kHalfBytes, &maps.b, &ring.full[s], x, b_row + kHalfRows);
    }
  }
}

// A consumer warpgroup: rows half * 64 .. + 63 of the tile; releases each stage one slice later.
template <int kCluster>
__device__ void consume(const Ring& ring, bf16* c, int n, Tile tile, int slices, int half) {
  const uint32_t lane = threadIdx.x % 32;  // lane r of a warp releases the stage in cluster block r
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;
  for (int kt = 0; kt < slices; ++kt) {
    mbar_wait(&ring.full[kt % kStages], (kt / kStages) % 2);  // slice kt has landed (all 48 KB)
    const uint32_t st = ring.base + (kt % kStages) * kStageBytes;
    wgmma_tile(d, st + half * 64 * kRowBytes, st + kATileBytes);
    wgmma_wait<1>();  // this warpgroup's wgmmas of slice kt - 1 are done: release its stage
    if (kt > 0 && lane < kCluster) {
      if constexpr (kCluster == 2) arrive_on(&ring.empty[(kt - 1) % kStages], lane);
      else mbar_arrive(&ring.empty[(kt - 1) % kStages]);
    }
  }
  wgmma_wait<0>();
  fence_accumulators(d);
  store_accumulators(c, n, tile.m * kBM + half * 64, tile.n * kBN, d);
}

template <int kCluster>
__global__ __launch_bounds__(kThreads, 1) void gemm_mc(const __grid_constant__ Maps maps, bf16* __restrict__ c,
                                                       int m, int n, int k) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ uint64_t full[kStages], empty[kStages];
  const Ring ring{(smem_u32(smem) + 1023) & ~1023u, full, empty};
  const uint32_t rank = kCluster == 2 ? __clusterRelativeBlockRank() : blockIdx.x % 2;
  const Tile tile = pair_tile(m / kBM, n / kBN, rank);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], kCluster * kConsumerWarps);
    fence_barrier_init();  // .release.cluster: the peer may arrive on these barriers or multicast into them
  }
  if constexpr (kCluster == 2) cluster_sync();  // both blocks' barriers exist before anything signals them
  else __syncthreads();
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    release_registers<kProducerRegs>();
    if (threadIdx.x == 0) produce<kCluster>(ring, maps, tile, k / kTileK, rank);
  } else {
    claim_registers<kConsumerRegs>();
    consume<kCluster>(ring, c, n, tile, k / kTileK, wg - 1);
  }
  __syncwarp();  // the peer arrives on our empty[s] to its last slice: no block exits before both are done
  if constexpr (kCluster == 2) cluster_sync();
}

template <int kCluster>
int launch(const Maps& maps, bf16* c, int m, int n, int k, cudaStream_t s) {
  if (const int err = opt_in_smem(gemm_mc<kCluster>, kSmemBytes)) return err;
  cudaLaunchAttribute cluster = {cudaLaunchAttributeClusterDimension};
  cluster.val.clusterDim = {kCluster, 1, 1};  // no attribute for kCluster = 1: a plain launch
  const cudaLaunchConfig_t config = {dim3((m / kBM) * (n / kBN)), dim3(kThreads), kSmemBytes, s, &cluster,
                                     kCluster > 1 ? 1u : 0u};
  return static_cast<int>(cudaLaunchKernelEx(&config, gemm_mc<kCluster>, maps, c, m, n, k));
}
}  // namespace

// a: m x k, b: n x k, c: m x n, bf16 row-major, 16-byte aligned; m % 256, n % 256, k % 64 == 0.
// cluster: 1 every block loads its own tiles, 2 pairs of blocks share the B tile through TMA multicast.
extern "C" int mc_gemm_run(int cluster, const void* a, const void* b, void* c, int m, int n, int k, cudaStream_t s) {
  if ((cluster != 1 && cluster != 2) || !tiles_fit(m, n, k, 2 * kBM, kBN, kTileK) || ((size_t)a | (size_t)b) % 16)
    return kBadShape;
  Maps maps;
  if (const int err = encode_tile_map(&maps.a, static_cast<const bf16*>(a), m, k, kBM)) return err;
  if (const int err = encode_tile_map(&maps.b, static_cast<const bf16*>(b), n, k, kHalfRows)) return err;
  bf16* out = static_cast<bf16*>(c);  // 4-byte aligned suffices: the epilogue stores bf16 pairs
  return cluster == 2 ? launch<2>(maps, out, m, n, k, s) : launch<1>(maps, out, m, n, k, s);
}

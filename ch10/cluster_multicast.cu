// cluster_multicast.cu: C = A @ W^T in bf16 (fp32 accumulation), A (M x K) and W (N x K) row-major,
// as a linear layer computes it. A block computes a 128 x 128 tile of C with 8 consumer warps of
// mma.sync (each warp 64 x 32), its operand tiles brought by TMA (128-byte swizzle) through a
// 6-stage ring of mbarriers: full[s] (the copy engine's bytes landed) and empty[s] (every consumer
// warp is done with stage s, so the producer may refill it). A ninth warp is the producer: its lane
// 0 issues the loads and is the only thread that ever waits on empty[s]; the consumers only wait on
// full[s], so no warp that computes is held while a stage drains.
//
//   kCluster = 1  every block loads its whole A tile (two 64-row boxes) and its W tile. The two
//                 blocks that compute C tiles side by side along N read the same A tile: A crosses
//                 L2 -> SM twice.
//   kCluster = 2  the two blocks form a cluster; each loads one 64-row half of the shared A tile
//                 with .multicast::cluster (mask 0b11): the copy engine writes it into both blocks'
//                 shared memory and signals both blocks' full[s]. A crosses L2 -> SM once per
//                 cluster: a quarter less operand traffic. Stage s may be refilled only when both
//                 blocks are done with it, so every consumer warp arrives on empty[s] of both
//                 blocks (a remote arrive through mapa), and empty[s] counts 16 warps.
// Both walk the C tiles in the same grouped order (pairs of N tiles, 8 M tiles at a time), so that
// the blocks resident at once share their A and W tiles in L2. Same tiles, same mma.sync order: the
// results should agree bit for bit.
#include <cuda_bf16.h>

#include "ch10b_sm90.cuh"

constexpr int kBM = 128, kBN = 128, kBK = 64, kStages = 6, kHalf = kBM / 2, kGroup = 8;
constexpr int kConsumers = 8, kThreads = (kConsumers + 1) * 32;  // 8 consumer warps, then the producer warp
constexpr int kTileBytes = kBM * kBK * 2;                        // 16 KB: one A tile or one W tile
constexpr int kStageBytes = 2 * kTileBytes, kSmemBytes = kStages * kStageBytes + 1024;  // + alignment slack
static_assert(kSmemBytes <= 227 * 1024, "more than an H100/H200 block may opt in to");

// One 64-wide K step of the warp's 64 x 32 tile (warp_m, warp_n) from stage tiles sa (A) and sw (W).
__device__ __forceinline__ void warp_mma(float (&acc)[4][4][4], uint32_t sa, uint32_t sw, int warp_m, int warp_n,
                                         int lane) {
#pragma unroll
  for (int kk = 0; kk < kBK; kk += 16) {
    uint32_t a[4][4], b[2][4];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)  // rows 0-15 of the fragment, k 0-7 then 8-15
      ldmatrix_x4(a[mi], swizzled(sa, warp_m * 64 + mi * 16 + lane % 16, kk + 8 * (lane / 16)));
#pragma unroll
    for (int nj = 0; nj < 2; ++nj)  // (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15)
      ldmatrix_x4(b[nj], swizzled(sw, warp_n * 32 + nj * 16 + lane % 8 + 8 * (lane / 16), kk + 8 * ((lane / 8) % 2)));
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) mma_bf16(acc[mi][ni], a[mi], b[ni / 2][2 * (ni % 2)], b[ni / 2][2 * (ni % 2) + 1]);
  }
}

// The producer's loads of K step kt into stage s (the producer warp's lane 0 only).
template <int kCluster>
__device__ __forceinline__ void load_stage(uint8_t* stage, const CUtensorMap* a_map, const CUtensorMap* w_map,
                                           uint64_t* full, int kt, int m0, int n0, uint32_t rank) {
  bar_expect_bytes(full, kStageBytes);  // the whole A tile (both halves) and the W tile land here
  if constexpr (kCluster == 2) {
    tma_load_multicast(stage + rank * (kTileBytes / 2), a_map, kt * kBK, m0 + rank * kHalf, full, 0b11);
  } else {
    tma_load(stage, a_map, kt * kBK, m0, full);
    tma_load(stage + kTileBytes / 2, a_map, kt * kBK, m0 + kHalf, full);
  }
  tma_load(stage + kTileBytes, w_map, kt * kBK, n0, full);
}

// The C tile of this block: (M tile, pair of N tiles) in grouped order, kGroup M tiles at a time,
// the pair's member `rank` (its cluster rank; blockIdx.x % 2 without a cluster) taking N tile
// 2 * pair + rank. Blocks (2j, y) and (2j + 1, y) are a pair (a cluster when kCluster = 2).
__device__ __forceinline__ void tile_of(uint32_t rank, int& m0, int& n0) {
  const int pairs = gridDim.x / 2, rows = gridDim.y, per_group = kGroup * pairs;
  const int p = blockIdx.y * pairs + blockIdx.x / 2, first = p / per_group * kGroup;
  const int size = min(rows - first, kGroup), q = p % per_group;
  m0 = (first + q % size) * kBM;
  n0 = (2 * (q / size) + (int)rank) * kBN;
}

template <int kCluster>
__global__ __launch_bounds__(kThreads) void linear_tma(const __grid_constant__ CUtensorMap a_map,
                                                     const __grid_constant__ CUtensorMap w_map,
                                                     __nv_bfloat16* __restrict__ c, int n, int k) {
  extern __shared__ uint8_t raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  __shared__ alignas(8) uint64_t full[kStages], empty[kStages];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, steps = k / kBK;
  const uint32_t rank = kCluster == 2 ? cluster_rank() : blockIdx.x % 2;
  int m0, n0;
  tile_of(rank, m0, n0);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      bar_init(&full[s], 1);                       // the local producer's arrive (+ the stage's bytes)
      bar_init(&empty[s], kCluster * kConsumers);  // every consumer warp of every block of the cluster
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if constexpr (kCluster == 2) cluster_sync();  // the peer's barriers exist before anything signals them
  else __syncthreads();
  if (warp == kConsumers) {  // the producer warp
    if (lane == 0)
      for (int kt = 0; kt < steps; ++kt) {
        const int s = kt % kStages;
        // The first kStages loads go into empty stages. Load kt reuses the stage of load kt - kStages:
        // wait for phase kt / kStages - 1 of empty[s], completed when every consumer warp (of both
        // blocks) has finished K step kt - kStages.
        if (kt >= kStages) bar_wait(&empty[s], (kt / kStages - 1) & 1);
        load_stage<kCluster>(smem + s * kStageBytes, &a_map, &w_map, &full[s], kt, m0, n0, rank);
      }
    __syncwarp();
  } else {  // a consumer warp: a 64 x 32 piece of the tile
    const int warp_m = warp % 2, warp_n = warp / 2;
    float acc[4][4][4] = {};
    for (int kt = 0; kt < steps; ++kt) {
      const int s = kt % kStages;
      bar_wait(&full[s], (kt / kStages) & 1);
      const uint32_t sa = smem_u32(smem + s * kStageBytes);
      warp_mma(acc, sa, sa + kTileBytes, warp_m, warp_n, lane);
      __syncwarp();  // every lane's ldmatrix of stage s is done
      if (lane == 0) {
        if constexpr (kCluster == 2) {
          bar_arrive_cluster(&empty[s], 0);
          bar_arrive_cluster(&empty[s], 1);
        } else {
          bar_arrive_local(&empty[s]);
        }
      }
      __syncwarp();
    }
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int row = m0 + warp_m * 64 + mi * 16 + lane / 4, col = n0 + warp_n * 32 + ni * 8 + (lane % 4) * 2;
        *reinterpret_cast<__nv_bfloat162*>(&c[(size_t)row * n + col]) =
            __floats2bfloat162_rn(acc[mi][ni][0], acc[mi][ni][1]);
        *reinterpret_cast<__nv_bfloat162*>(&c[(size_t)(row + 8) * n + col]) =
            __floats2bfloat162_rn(acc[mi][ni][2], acc[mi][ni][3]);
      }
  }
  // Every thread of both blocks, producer warps included: the peer's consumers arrive on our
  // empty[s] until their last step, so neither block exits (its shared memory freed) before both are done.
  if constexpr (kCluster == 2) cluster_sync();
}

template <int kCluster>
static int launch(const CUtensorMap& a_map, const CUtensorMap& w_map, __nv_bfloat16* c, int m, int n, int k,
                  cudaStream_t s) {
  if (cudaFuncSetAttribute(linear_tma<kCluster>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes)) return -4;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(n / kBN, m / kBM);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSmemBytes;
  config.stream = s;
  cudaLaunchAttribute cluster[1];
  cluster[0].id = cudaLaunchAttributeClusterDimension;
  cluster[0].val.clusterDim.x = kCluster;
  cluster[0].val.clusterDim.y = cluster[0].val.clusterDim.z = 1;
  config.attrs = cluster;
  config.numAttrs = kCluster > 1 ? 1 : 0;  // kCluster = 1: a plain launch
  return (int)cudaLaunchKernelEx(&config, linear_tma<kCluster>, a_map, w_map, c, n, k);
}

// a: m x k, w: n x k, c: m x n, bf16 row-major, 16-byte aligned; m % 128, n % 256, k % 64 == 0.
// cluster: 1 each block loads its own A tile, 2 pairs of blocks share it through TMA multicast.
extern "C" int mc_gemm_run(int cluster, const void* a, const void* w, void* c, int m, int n, int k, cudaStream_t s) {
  if (m <= 0 || n <= 0 || k <= 0 || m % kBM || n % (2 * kBN) || k % kBK || m / kBM > 65535) return -1;
  if (((size_t)a | (size_t)w | (size_t)c) % 16) return -1;
  CUtensorMap a_map, w_map;
  if (const int err = make_bf16_map(&a_map, a, m, k, kBK, kHalf)) return err;
  if (const int err = make_bf16_map(&w_map, w, n, k, kBK, kBN)) return err;
  auto* out = static_cast<__nv_bfloat16*>(c);
  return cluster == 2 ? launch<2>(a_map, w_map, out, m, n, k, s) : launch<1>(a_map, w_map, out, m, n, k, s);
}

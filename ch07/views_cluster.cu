// views_cluster.cu: row_features(x.t()) (softmax, log_softmax and layer_norm of each row of the
// transposed view, combined as normed + p * logp) with x read from HBM once, no contiguous copy.
//
// A row of v = x.t() is a column of x, 8,192 floats 32 KiB apart. To read each element once, all of
// a column must stay on chip until its statistics are known; one block cannot hold enough columns
// and still overlap its load with its stores, so a column is split across a thread-block cluster:
//
//   grid       (cols / 16) clusters of 8 blocks; cluster b owns columns 16b..16b+15 of x, block
//              rank r of it rows r*R/8 .. (r+1)*R/8 - 1 of them (1,024 rows x 64 contiguous bytes a
//              row: 64 KiB, two whole 32-byte sectors a row).
//   load       each thread issues its 16 cp.async (16 bytes each) at once: the block's 64 KiB are
//              all in flight, no registers held; the tile sits in shared memory, each row's four
//              16-byte chunks XOR-swizzled by (row >> 1) & 3 so that a warp reading 32 rows of one
//              chunk hits every bank once.
//   stats      from shared memory, per column: the block's max and mean, then its sum of
//              exp(v - max) and of (v - mean)^2 (exact two-pass partials); one cluster barrier,
//              then 128 threads read the 8 blocks' partials through distributed shared memory and
//              merge them (softmax: rescale by exp(m_k - M); variance: Chan's merge, equal counts).
//   store      y = (v - mean) * rstd + exp(v - M) / S * (v - M - log S) from the tile; lane l of a
//              warp writes row l of a column: 128 contiguous bytes a store, out read nowhere.
//
// 64 KiB of tile a block, at most 80 registers a thread: three blocks an SM, so while one waits on
// its loads or the cluster barrier, the others load or store.
#include <cooperative_groups.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include "ch07_tma.cuh"
#include <cuda_pipeline.h>

#include <cmath>

namespace cg = cooperative_groups;

constexpr int kCluster = 8, kThreads = 256, kCols = 16, kGroups = kCols / 4, kHalves = kThreads / 32 / kGroups;
constexpr int kMaxRows = 1024;  // rows a block holds: 1,024 x 64 bytes = 64 KiB of shared memory

// The 16-byte chunk g of tile row `row`, swizzled: 8 consecutive rows of one chunk land in 8 banks groups.
__device__ __forceinline__ int slot(int row, int g) { return row * kGroups + (g ^ ((row >> 1) & 3)); }

// e^x as one MUFU.EX2 (flushing results below 2^-126 to zero, far below what the sums and outputs keep).
__device__ __forceinline__ float fast_exp(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
}

__device__ __forceinline__ void unpack(float4 a, float (&v)[4]) { v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w; }

// f(row, v) for each tile row this warp reads (lane l: rows half*32 + l, +64, ...), v its chunk g.
template <class F>
__device__ __forceinline__ void each_row(const float4* tile, int rows, int half, int g, int lane, F f) {
  float v[4];
#pragma unroll 4
  for (int row = half * 32 + lane; row < rows; row += 32 * kHalves) {
    unpack(tile[slot(row, g)], v);
    f(row, v);
  }
}

// Reduce 4 values over the warp's 32 lanes (every lane ends with the result).
template <bool kMax>
__device__ __forceinline__ void warp_reduce(float (&v)[4]) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float o = __shfl_xor_sync(0xffffffffu, v[e], d);
      v[e] = kMax ? fmaxf(v[e], o) : v[e] + o;
    }
  }
}

// Reduce over the warp, then combine the kHalves (2) warps that hold chunk g through `red`.
template <bool kMax>
__device__ __forceinline__ void block_reduce(float (&v)[4], float4 (*red)[kGroups], int half, int g, int lane) {
  warp_reduce<kMax>(v);
  if (lane == 0) red[half][g] = make_float4(v[0], v[1], v[2], v[3]);
  __syncthreads();
  float o[4];
  unpack(red[1 - half][g], o);
#pragma unroll
  for (int e = 0; e < 4; ++e) v[e] = kMax ? fmaxf(v[e], o[e]) : v[e] + o[e];
}

// Merge rank k's partials p = {max, sum exp(v - max), mean, M2} of column c (threads 8c..8c+7 of
// warps 0-3 hold ranks 0-7 of one column): fin[c] = {M, 1/S, log S, mean}, rstd[c].
__device__ __forceinline__ void merge(float4 p, int c, int k, int rows, int R, float eps, float4* fin, float* rstd) {
  float M = p.x;
#pragma unroll
  for (int d = 1; d < kCluster; d <<= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, d));
  float S = p.y * expf(p.x - M), mu = p.z;
#pragma unroll
  for (int d = 1; d < kCluster; d <<= 1) S += __shfl_xor_sync(0xffffffffu, S, d), mu += __shfl_xor_sync(0xffffffffu, mu, d);
  mu /= kCluster;
  float m2 = p.w + (float)rows * (p.z - mu) * (p.z - mu);
#pragma unroll
  for (int d = 1; d < kCluster; d <<= 1) m2 += __shfl_xor_sync(0xffffffffu, m2, d);
  if (k == 0) fin[c] = make_float4(M, 1.f / S, logf(S), mu), rstd[c] = rsqrtf(m2 / R + eps);
}

// The cluster's statistics of chunk g's 4 columns (from fin and rstd), and the output of one value:
// y = (v - mean) * rstd + exp(v - M) / S * (v - M - log S).
struct Final {
  float m[4], inv_s[4], log_s[4], mean[4], rs[4];
  __device__ __forceinline__ Final(const float4* fin, const float* rstd, int g) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float4 f = fin[4 * g + e];
      m[e] = f.x, inv_s[e] = f.y, log_s[e] = f.z, mean[e] = f.w, rs[e] = rstd[4 * g + e];
    }
  }
  __device__ __forceinline__ float operator()(float v, int e) const {
    const float s = v - m[e];
    return (v - mean[e]) * rs[e] + fast_exp(s) * inv_s[e] * (s - log_s[e]);
  }
};

// The block's partials of chunk g from its tile, given each thread's running max m and sum `mean`
// over its rows: both reduced over the block, mean divided by rows, then the second pass's sums of
// exp(v - max) (se) and of squared deviations (sq), reduced over the block too.
__device__ __forceinline__ void block_partials(const float4* tile, int rows, int half, int g, int lane,
                                               float4 (*red)[kHalves][kGroups], float (&m)[4], float (&mean)[4],
                                               float (&se)[4], float (&sq)[4]) {
  block_reduce<true>(m, red[0], half, g, lane);
  block_reduce<false>(mean, red[1], half, g, lane);
#pragma unroll
  for (int e = 0; e < 4; ++e) se[e] = 0.f, sq[e] = 0.f;
#pragma unroll
  for (int e = 0; e < 4; ++e) mean[e] /= rows;
  each_row(tile, rows, half, g, lane, [&](int, const float (&v)[4]) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float d = v[e] - mean[e];
      se[e] += fast_exp(v[e] - m[e]), sq[e] += d * d;
    }
  });
  block_reduce<false>(se, red[0], half, g, lane);
  block_reduce<false>(sq, red[1], half, g, lane);
}

// y = f(v) of chunk g's 4 columns for every tile row this warp reads, into dst (column 4g's output
// row at the block's first row; the next column R floats on): a warp store is 128 contiguous bytes.
__device__ __forceinline__ void store_rows(const float4* tile, int rows, int half, int g, int lane, const Final& f,
                                           float* dst, int R) {
  each_row(tile, rows, half, g, lane, [&](int row, const float (&v)[4]) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dst[(long)e * R + row] = f(v[e], e);
  });
}

__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads, 3)
    views_rows_cluster(const float* __restrict__ x, float* __restrict__ out, long ld, int R, float eps) {
  extern __shared__ float4 tile[];                    // rows x 4 chunks, swizzled
  __shared__ float4 red[2][kHalves][kGroups];          // reductions alternate halves: one barrier each is enough
  __shared__ float4 part[kCols];                       // this block's {max, sum exp, mean, M2} per column
  __shared__ float4 fin[kCols];                        // the cluster's {M, 1/S, log S, mean} per column
  __shared__ float rstd[kCols];
  cg::cluster_group cluster = cg::this_cluster();
  const int rows = R / kCluster, r0 = (int)cluster.block_rank() * rows, j0 = (blockIdx.x / kCluster) * kCols;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = warp % kGroups, half = warp / kGroups;

  for (int q = threadIdx.x; q < rows * kGroups; q += kThreads) {  // 8 rows x 64 bytes a warp
    const int row = q / kGroups, c = q % kGroups;
    __pipeline_memcpy_async(&tile[slot(row, c)], x + (long)(r0 + row) * ld + j0 + 4 * c, sizeof(float4));
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();

  float m[4], mean[4];  // this thread's chunk g: columns j0 + 4g .. j0 + 4g + 3
#pragma unroll
  for (int e = 0; e < 4; ++e) m[e] = -INFINITY, mean[e] = 0.f;
  each_row(tile, rows, half, g, lane, [&](int, const float (&v)[4]) {
#pragma unroll
    for (int e = 0; e < 4; ++e) m[e] = fmaxf(m[e], v[e]), mean[e] += v[e];
  });
  float se[4], sq[4];
  block_partials(tile, rows, half, g, lane, red, m, mean, se, sq);
  if (half == 0 && lane == 0) {
#pragma unroll
    for (int e = 0; e < 4; ++e) part[4 * g + e] = make_float4(m[e], se[e], mean[e], sq[e]);
  }
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");

  if (threadIdx.x < kCols * kCluster) {  // warps 0-3 whole: thread (column c, rank k) merges in groups of 8 lanes
    const int c = threadIdx.x / kCluster, k = threadIdx.x % kCluster;
    merge(*cluster.map_shared_rank(&part[c], k), c, k, rows, R, eps, fin, rstd);  // a DSMEM load
  }
  // done reading the others' part[] (their values are in registers): relaxed, no memory fence needed
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  __syncthreads();

  const Final f(fin, rstd, g);
  float* dst = out + (long)(j0 + 4 * g) * R + r0;
  store_rows(tile, rows, half, g, lane, f, dst, R);
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");  // no block frees part[] while it is read
}

// What the kernel cannot index: R a multiple of 512 up to 8,192 (R / 8 rows a block, a multiple of
// 64, at most 1,024), C a multiple of 16, the row stride at least C and a multiple of 4 floats, both
// pointers 16-byte aligned.
static bool refused(const float* x, const float* out, long ld, int R, int C) {
  return R <= 0 || C <= 0 || R % (kCluster * 64) || R / kCluster > kMaxRows || C % kCols || ld < C || ld % 4 ||
         ((size_t)x | (size_t)out) % 16;
}

// x: (R x C) fp32 with row stride ld (unit column stride); out: (C x R) contiguous. R a multiple of
// 512 up to 8,192 (R / 8 rows a block, a multiple of 64, at most 1,024), C a multiple of 16, both
// pointers and the row stride 16-byte aligned. Hopper (sm_90) and later: thread-block clusters.
extern "C" int views_rows_run(const float* x, float* out, long ld, int R, int C, cudaStream_t s) {
  if (refused(x, out, ld, R, C)) return -1;
  static bool configured[64] = {};  // per device, once: not repeated in timed (or graph-captured) calls
  int dev = 0;
  if (cudaGetDevice(&dev) || dev < 0 || dev >= 64) return -2;
  if (!configured[dev]) {
    if (cudaFuncSetAttribute(views_rows_cluster, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxRows * kGroups * 16) ||
        cudaFuncSetAttribute(views_rows_cluster, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared)) {
      return -2;
    }
    configured[dev] = true;
  }
  const int smem = R / kCluster * kGroups * (int)sizeof(float4);
  views_rows_cluster<<<(C / kCols) * kCluster, kThreads, smem, s>>>(x, out, ld, R, 1e-5f);
  return (int)cudaGetLastError();
}

// ---- views_rows_tma: the same work and math, the tile loaded by TMA, the partials pushed ----
// views_rows_cluster's profile (H200): stalls long_scoreboard 2.94, barrier 2.48 and membar 1.51 a
// warp per issue; the MEMBAR.ALL.GPU is the release of the cluster barrier that publishes the
// partials (every block waits there for all 8 to have stored them and fenced). Here:
//   load       thread 0 hands the Tensor Memory Accelerator 16 boxes of 64 rows x 16 columns (4 KiB,
//              UTMALDG), each completing its own mbarrier; the map's 64-byte swizzle is slot()'s
//              XOR, so the tile's layout is views_rows_cluster's. The first pass reads box i as its
//              i-th row step (a warp's rows half*32 + lane + 64 i), so it starts on the first 4 KiB
//              and adds the same values in the same order.
//   partials   lanes 0-7 of warps 0-3 push chunk g's 4 columns to rank `lane` with st.async onto
//              that rank's inbox mbarrier (2 KiB expected: 8 ranks x 16 columns x 16 bytes): no
//              cluster barrier and no memory fence after the stats. Two split cluster barriers,
//              both arrived at relaxed (no MEMBAR): one around the load (arrive once the mbarriers
//              are initialised, wait before the first push), one around the stores (arrive once
//              the inbox is full, wait before leaving, so no block leaves with a push in flight;
//              views_rows_cluster closes the same way).
// The merge, Final and the stores are views_rows_cluster's (same functions, same order of
// operations), so the output is bitwise the same.
constexpr int kBoxRows = 64, kBoxes = kMaxRows / kBoxRows, kInbox = kCluster * kCols * 16;
constexpr int kTmaSmem = kMaxRows * kGroups * 16 + 1024;  // the tile, 1,024-byte aligned by hand
static_assert(kBoxRows == 32 * kHalves, "box i is each warp's i-th row step of each_row");

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// This block's shared address a as the same variable's address in the block of cluster rank `rank`.
__device__ __forceinline__ unsigned peer(unsigned a, int rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  return r;
}

__device__ __forceinline__ void expect_bytes(unsigned bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// Wait for phase 0 of a one-use mbarrier; kClusterScope: bytes from peers (acquire at cluster scope).
template <bool kClusterScope>
__device__ __forceinline__ void wait_done(unsigned bar) {
  unsigned done = 0;
  while (!done) {
    if (kClusterScope) {
      asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0;\n"
                   " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(bar) : "memory");
    } else {
      asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n"
                   " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(bar) : "memory");
    }
  }
}

__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads, 3)
    views_rows_tma(const __grid_constant__ CUtensorMap map, float* __restrict__ out, int R, float eps) {
  extern __shared__ unsigned char raw[];
  __shared__ float4 red[2][kHalves][kGroups];
  __shared__ float4 inbox[kCluster][kCols];  // rank k's {max, sum exp, mean, M2} of column c: inbox[k][c]
  __shared__ float4 fin[kCols];
  __shared__ float rstd[kCols];
  __shared__ alignas(8) unsigned long long bars[kBoxes + 1];  // one a box, then the inbox's
  // TMA's 64-byte swizzle XORs address bits 4-5 with bits 7-8: slot() holds on a 512-byte aligned base.
  float4* tile = reinterpret_cast<float4*>(raw + ((1024 - smem_u32(raw) % 1024) % 1024));
  const int rows = R / kCluster, rank = (int)cg::this_cluster().block_rank(), r0 = rank * rows;
  const int j0 = (blockIdx.x / kCluster) * kCols, boxes = rows / kBoxRows;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = warp % kGroups, half = warp / kGroups;
  const unsigned inbox_bar = smem_u32(&bars[kBoxes]);

  if (threadIdx.x == 0) {
    for (int b = 0; b <= kBoxes; ++b) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&bars[b])) : "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the inits, seen by the copy engine
    for (int b = 0; b < boxes; ++b) {
      expect_bytes(smem_u32(&bars[b]), kBoxRows * kCols * 4);
      asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                   ::"r"(smem_u32(tile + b * kBoxRows * kGroups)), "l"(&map), "r"(j0), "r"(r0 + b * kBoxRows),
                   "r"(smem_u32(&bars[b])) : "memory");
    }
    expect_bytes(inbox_bar, kInbox);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // the inbox's init, seen by the peers
  }
  __syncthreads();
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");  // waited for before the first push

  float m[4], mean[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) m[e] = -INFINITY, mean[e] = 0.f;
  float v[4];
  for (int b = 0; b < boxes; ++b) {  // each_row's first pass, box by box as they land
    wait_done<false>(smem_u32(&bars[b]));
    unpack(tile[slot(b * kBoxRows + half * 32 + lane, g)], v);
#pragma unroll
    for (int e = 0; e < 4; ++e) m[e] = fmaxf(m[e], v[e]), mean[e] += v[e];
  }
  float se[4], sq[4];
  block_partials(tile, rows, half, g, lane, red, m, mean, se, sq);

  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");  // every peer's inbox mbarrier initialised
  if (half == 0 && lane < kCluster) {  // every lane holds the block's values; lane k sends them to rank k
    const unsigned to = peer(smem_u32(&inbox[rank][4 * g]), lane), to_bar = peer(inbox_bar, lane);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];"
                   ::"r"(to + 16 * e), "f"(m[e]), "f"(se[e]), "f"(mean[e]), "f"(sq[e]), "r"(to_bar) : "memory");
    }
  }
  if (threadIdx.x < kCols * kCluster) {  // views_rows_cluster's merge, the partials read locally
    const int c = threadIdx.x / kCluster, k = threadIdx.x % kCluster;
    wait_done<true>(inbox_bar);
    merge(inbox[k][c], c, k, rows, R, eps, fin, rstd);
  }
  // this block's inbox is full: relaxed (no fence), it only says so; waited for after the stores
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  __syncthreads();

  const Final f(fin, rstd, g);
  store_rows(tile, rows, half, g, lane, f, out + (long)(j0 + 4 * g) * R + r0, R);
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");  // every push landed before any block leaves
}

// x as (R x C) fp32, row stride ld, read in 64 x 16 boxes with the 64-byte swizzle.
static int make_map(CUtensorMap* map, const float* x, long ld, int R, int C) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled();
  if (!encode) return -3;
  const cuuint64_t dims[2] = {(cuuint64_t)C, (cuuint64_t)R};     // innermost first
  const cuuint64_t strides[1] = {(cuuint64_t)ld * sizeof(float)};  // bytes between rows
  const cuuint32_t box[2] = {kCols, kBoxRows}, step[2] = {1, 1};
  const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float*>(x), dims, strides, box, step,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_64B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_64B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : 1000 + (int)r;
}

// views_rows_run's contract (the same shapes refused with -1), the tile loaded by TMA: the map is
// encoded on the host for each call (a few hundred nanoseconds).
extern "C" int views_rows_tma_run(const float* x, float* out, long ld, int R, int C, cudaStream_t s) {
  if (refused(x, out, ld, R, C)) return -1;
  static bool configured[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) || dev < 0 || dev >= 64) return -2;
  if (!configured[dev]) {
    if (cudaFuncSetAttribute(views_rows_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, kTmaSmem) ||
        cudaFuncSetAttribute(views_rows_tma, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared)) {
      return -2;
    }
    configured[dev] = true;
  }
  CUtensorMap map;
  if (const int err = make_map(&map, x, ld, R, C)) return err;
  views_rows_tma<<<(C / kCols) * kCluster, kThreads, R / kCluster * kGroups * 16 + 1024, s>>>(map, out, R, 1e-5f);
  return (int)cudaGetLastError();
}

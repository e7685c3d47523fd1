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
  block_reduce<true>(m, red[0], half, g, lane);
  block_reduce<false>(mean, red[1], half, g, lane);
  float se[4] = {0.f, 0.f, 0.f, 0.f}, sq[4] = {0.f, 0.f, 0.f, 0.f};
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
  each_row(tile, rows, half, g, lane, [&](int row, const float (&v)[4]) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dst[(long)e * R + row] = f(v[e], e);
  });
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

// dsmem_reduction.cu: y = x / sqrt(mean(x^2) + eps) per row (RMS normalization without a weight) of
// a (rows x 65,536) fp32 matrix. A row is 256 KB: more than one SM's shared memory or registers, so
// eight blocks share it, each holding a 8,192-float chunk (32 floats per thread, in registers).
// The eight blocks need the row's total sum of squares before any of them can write.
//
//   two_pass  partial_sumsq writes each block's partial sum of squares to global memory; a second
//             kernel, normalize_rows, sums the row's 8 partials and re-reads the chunk from HBM to
//             scale it: x is read twice (512 MB), y written once (256 MB), two launches.
//   cluster   rms_cluster: the row's 8 blocks form a thread-block cluster (__cluster_dims__(8,1,1)).
//             Each block leaves its partial in its own shared memory; after cluster.sync() every
//             block reads the 8 partials through distributed shared memory (map_shared_rank: a
//             load from another SM's shared memory over the SM-to-SM network) and scales the chunk
//             it still holds in registers: x read once, one launch. A second cluster.sync() keeps
//             each block's shared memory alive until every block has read it.
// Both sum the partials in the same order (rank 0..7), so the results should agree bit for bit.
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

constexpr int kCluster = 8, kThreads = 256, kVec = 8;              // 8 float4 = 32 floats per thread
constexpr int kChunk = kThreads * kVec * 4, kCols = kCluster * kChunk;  // 8,192 and 65,536 floats

// The chunk (row, c) of x into registers: float4 j of thread t is chunk float4 j * 256 + t (coalesced).
__device__ __forceinline__ void load_chunk(const float* x, int row, int c, float4 (&v)[kVec]) {
  const float4* src = reinterpret_cast<const float4*>(x + (size_t)row * kCols + (size_t)c * kChunk);
#pragma unroll
  for (int j = 0; j < kVec; ++j) v[j] = src[j * kThreads + threadIdx.x];
}

// The block's sum of squares of v, in a fixed order; valid on thread 0 only.
__device__ __forceinline__ float block_sumsq(const float4 (&v)[kVec]) {
  __shared__ float warp_sums[kThreads / 32];
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < kVec; ++j) s += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  float total = 0.f;
  if (threadIdx.x == 0)
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
  return total;
}

__device__ __forceinline__ void store_scaled(float* y, int row, int c, const float4 (&v)[kVec], float scale) {
  float4* dst = reinterpret_cast<float4*>(y + (size_t)row * kCols + (size_t)c * kChunk);
#pragma unroll
  for (int j = 0; j < kVec; ++j)
    dst[j * kThreads + threadIdx.x] = make_float4(v[j].x * scale, v[j].y * scale, v[j].z * scale, v[j].w * scale);
}

__device__ __forceinline__ float rms_scale(float sumsq, float eps) { return rsqrtf(sumsq / kCols + eps); }

// Grid (8, rows): block (c, row) writes the partial sum of squares of chunk c of the row.
__global__ __launch_bounds__(kThreads) void partial_sumsq(const float* __restrict__ x, float* __restrict__ partials) {
  float4 v[kVec];
  load_chunk(x, blockIdx.y, blockIdx.x, v);
  const float s = block_sumsq(v);
  if (threadIdx.x == 0) partials[blockIdx.y * kCluster + blockIdx.x] = s;
}

// Grid (8, rows): block (c, row) sums the row's partials and scales chunk c, read again from x.
__global__ __launch_bounds__(kThreads) void normalize_rows(const float* __restrict__ x, const float* __restrict__ partials,
                                                          float* __restrict__ y, float eps) {
  __shared__ float scale;
  if (threadIdx.x == 0) {
    float total = 0.f;
    for (int r = 0; r < kCluster; ++r) total += partials[blockIdx.y * kCluster + r];
    scale = rms_scale(total, eps);
  }
  float4 v[kVec];
  load_chunk(x, blockIdx.y, blockIdx.x, v);
  __syncthreads();
  store_scaled(y, blockIdx.y, blockIdx.x, v, scale);
}

// Grid (8, rows), clusters of 8 along x: the cluster is the row.
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads)
    rms_cluster(const float* __restrict__ x, float* __restrict__ y, float eps) {
  __shared__ float partial, scale;
  cg::cluster_group cluster = cg::this_cluster();
  float4 v[kVec];
  load_chunk(x, blockIdx.y, blockIdx.x, v);
  const float s = block_sumsq(v);
  if (threadIdx.x == 0) partial = s;
  cluster.sync();  // every block's partial is written and visible cluster-wide
  if (threadIdx.x == 0) {
    float total = 0.f;
    for (int r = 0; r < kCluster; ++r) total += *cluster.map_shared_rank(&partial, r);  // DSMEM load
    scale = rms_scale(total, eps);
  }
  cluster.sync();  // no block leaves (freeing its shared memory) while another still reads it
  store_scaled(y, blockIdx.y, blockIdx.x, v, scale);
}

// x, y: (rows x 65,536) fp32, 16-byte aligned; partials: rows * 8 floats (two_pass only).
extern "C" int rms_rows_run(int use_cluster, const float* x, float* y, float* partials, int rows, int cols, float eps,
                            cudaStream_t s) {
  if (cols != kCols || rows <= 0 || rows > 65535 || ((size_t)x | (size_t)y) % 16) return -1;
  const dim3 grid(kCluster, rows);
  if (use_cluster) {
    rms_cluster<<<grid, kThreads, 0, s>>>(x, y, eps);
  } else {
    partial_sumsq<<<grid, kThreads, 0, s>>>(x, partials);
    normalize_rows<<<grid, kThreads, 0, s>>>(x, partials, y, eps);
  }
  return (int)cudaGetLastError();
}

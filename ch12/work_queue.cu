// work_queue.cu: sums of rows of skewed lengths (CSR-like: row r is x[offsets[r] .. offsets[r+1])),
// one block per row at a time, on a persistent grid (as many blocks as fit on the GPU at once).
//   wq_static:  block b takes rows b, b + G, b + 2G, ... (round-robin, fixed before the launch);
//   wq_dynamic: each block takes the next row from an atomic counter when it finishes one.
// With skewed lengths a fixed assignment leaves some blocks several times the mean load, and the
// kernel lasts as long as its busiest block; pulling from a queue evens the loads out.
// Built as a shared library by aisp.kits.native (ch12/baseline_work_queue.py).
#include "ch12_common.cuh"

// Block-wide sum of row r (float4 loads: offsets are multiples of 4); thread 0 writes out[r].
__device__ void row_sum(const float* x, const long long* offsets, float* out, int r) {
  __shared__ float warp_sums[kThreads / 32];
  const float4* row = reinterpret_cast<const float4*>(x + offsets[r]);
  int quads = static_cast<int>((offsets[r + 1] - offsets[r]) / 4);
  // Four independent loads in flight per thread: a row is short, so its latency, not HBM, is the
  // limit unless each thread keeps several requests outstanding.
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  int i = threadIdx.x;
  for (; i + 3 * kThreads < quads; i += 4 * kThreads) {
    float4 a = row[i], b = row[i + kThreads], c = row[i + 2 * kThreads], d = row[i + 3 * kThreads];
    s0 += (a.x + a.y) + (a.z + a.w);
    s1 += (b.x + b.y) + (b.z + b.w);
    s2 += (c.x + c.y) + (c.z + c.w);
    s3 += (d.x + d.y) + (d.z + d.w);
  }
  for (; i < quads; i += kThreads) {
    float4 v = row[i];
    s0 += (v.x + v.y) + (v.z + v.w);
  }
  float s = (s0 + s1) + (s2 + s3);
  for (int d = 16; d > 0; d /= 2) s += __shfl_xor_sync(0xffffffffu, s, d);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < kThreads / 32 ? warp_sums[threadIdx.x] : 0.0f;
    for (int d = 16; d > 0; d /= 2) s += __shfl_xor_sync(0xffffffffu, s, d);
    if (threadIdx.x == 0) out[r] = s;
  }
  __syncthreads();  // warp_sums is reused by the next row
}

__global__ void __launch_bounds__(kThreads) wq_static_kernel(const float* x, const long long* offsets, float* out,
                                                             int rows) {
  for (int r = blockIdx.x; r < rows; r += gridDim.x) row_sum(x, offsets, out, r);
}

__global__ void __launch_bounds__(kThreads) wq_dynamic_kernel(const float* x, const long long* offsets, float* out,
                                                              int rows, int* next) {
  __shared__ int row;
  while (true) {
    if (threadIdx.x == 0) row = atomicAdd(next, 1);
    __syncthreads();
    int r = row;
    __syncthreads();  // everyone has read row before thread 0 overwrites it
    if (r >= rows) return;
    row_sum(x, offsets, out, r);
  }
}

// Blocks of the persistent grid: as many as fit on all SMs at once (the same for both kernels).
extern "C" int wq_grid(int* blocks_out) {
  int device, sms, per_sm_static, per_sm_dynamic;
  CH12_TRY(cudaGetDevice(&device));
  CH12_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CH12_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_static, wq_static_kernel, kThreads, 0));
  CH12_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_dynamic, wq_dynamic_kernel, kThreads, 0));
  *blocks_out = sms * (per_sm_static < per_sm_dynamic ? per_sm_static : per_sm_dynamic);
  return 0;
}

extern "C" int wq_static(const float* x, const long long* offsets, float* out, int rows, int blocks,
                         cudaStream_t stream) {
  wq_static_kernel<<<blocks, kThreads, 0, stream>>>(x, offsets, out, rows);
  return static_cast<int>(cudaGetLastError());
}

// next: one device int, reset here before the launch.
extern "C" int wq_dynamic(const float* x, const long long* offsets, float* out, int rows, int blocks, int* next,
                          cudaStream_t stream) {
  CH12_TRY(cudaMemsetAsync(next, 0, sizeof(int), stream));
  wq_dynamic_kernel<<<blocks, kThreads, 0, stream>>>(x, offsets, out, rows, next);
  return static_cast<int>(cudaGetLastError());
}

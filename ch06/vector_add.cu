// vector_add.cu: c = a + b over n floats, three ways of mapping threads to elements.
//
//   one_block     <<<1, 1024>>>: one block (the largest there is) loops over all n elements.
//                 Correct, but it runs on one of the GPU's 132 SMs, with 32 warps to hide DRAM
//                 latency and one SM's share of the memory system.
//   grid_stride   <<<SMs x blocks-per-SM, 256>>>: enough blocks to fill every SM (the count comes
//                 from the occupancy API), each thread stepping by the whole grid's width.
//   per_element   <<<ceil(n / block), block>>>: one element per thread with a chosen block size
//                 (the block_size pair: 32 vs 256 threads).
//
// All read 8 bytes and write 4 per element; the answer is bitwise the same.
// Python: ch06/baseline_vector_add.py, ch06/baseline_block_size.py
#include "ch06_check.cuh"

constexpr int kThreads = 256;
constexpr int kOneBlockThreads = 1024;

__global__ void add_one_block(const float* __restrict__ a, const float* __restrict__ b,
                              float* __restrict__ c, long n) {
  for (long i = threadIdx.x; i < n; i += blockDim.x) c[i] = a[i] + b[i];
}

__global__ void add_grid_stride(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, long n) {
  const long stride = (long)gridDim.x * blockDim.x;
#pragma unroll 4
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) c[i] = a[i] + b[i];
}

__global__ void add_per_element(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, long n) {
  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

extern "C" int add_one_block_run(const float* a, const float* b, float* c, long n, cudaStream_t s) {
  add_one_block<<<1, kOneBlockThreads, 0, s>>>(a, b, c, n);
  return launch_status();
}

// Blocks of kThreads that fill every SM once: resident blocks per SM (occupancy API) x SMs.
extern "C" int grid_stride_blocks() {
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, add_grid_stride, kThreads, 0)) return -1;
  return per_sm * sm_count();
}

extern "C" int add_grid_stride_run(const float* a, const float* b, float* c, long n, int blocks,
                                   cudaStream_t s) {
  add_grid_stride<<<blocks, kThreads, 0, s>>>(a, b, c, n);
  return launch_status();
}

extern "C" int add_per_element_run(const float* a, const float* b, float* c, long n, int block,
                                   cudaStream_t s) {
  if (block <= 0 || block > 1024) return -1;
  add_per_element<<<(unsigned)((n + block - 1) / block), block, 0, s>>>(a, b, c, n);
  return launch_status();
}

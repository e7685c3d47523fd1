// vector_add.cu: c = a + b over n floats, three ways of mapping threads to elements.
//
//   one_block     <<<1, 1024>>>: one block (the largest there is) loops over all n elements.
//                 Correct, but it runs on one of the GPU's 132 SMs, with 32 warps to hide DRAM
//                 latency and one SM's share of the memory system.
//   grid_stride   <<<SMs x blocks-per-SM, 256>>>: enough blocks to fill every SM (the count comes
//                 from the occupancy API), each thread stepping by the whole grid's width.
//   per_element   <<<ceil(n / block), block>>>: one element per thread with a chosen block size
//                 (the block_size pair: 32 vs 256 threads).
//   blocked4      <<<ceil(n / 2048), 256>>>: the block_size pair's 256-thread blocks, each thread
//                 2 float4s (8 elements) of a and of b, all 4 loads issued before the first store
//                 (ch06/optimized_block_size_float4.py).
//
// All read 8 bytes and write 4 per element; the answer is bitwise the same. one_block and
// grid_stride move float4s (128-bit LDG.E.128 / STG.E.128, n % 4 == 0 and 16-byte-aligned
// pointers, else -1): their pair differs only in the grid. Scalar loads held the grid-stride kernel
// to 77% of the HBM copy ceiling on the H200 (changed after that measurement, not yet re-measured).
// per_element stays scalar: one 4-byte element per thread is what the block_size pair is about;
// blocked4 (float4 too, same -1 rule) is that pair's variant with 8 elements per thread.
// Python: ch06/baseline_vector_add.py, ch06/baseline_block_size.py, ch06/optimized_block_size_float4.py
#include "ch06_check.cuh"

constexpr int kThreads = 256;
constexpr int kOneBlockThreads = 1024;

__device__ __forceinline__ float4 add4(float4 x, float4 y) {
  return make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
}

// n4 = n / 4 float4s; one loop for both grids (one block, or every SM's share).
__device__ __forceinline__ void add_strided(const float4* __restrict__ a, const float4* __restrict__ b,
                                            float4* __restrict__ c, long n4, long first, long stride) {
#pragma unroll 4
  for (long i = first; i < n4; i += stride) c[i] = add4(a[i], b[i]);
}

__global__ void add_one_block(const float4* __restrict__ a, const float4* __restrict__ b,
                              float4* __restrict__ c, long n4) {
  add_strided(a, b, c, n4, threadIdx.x, blockDim.x);
}

// 8 blocks of 256 per SM: without the bound, ptxas takes 36 registers for the 4x-unrolled float4
// loop and 7 blocks fit; with it, 31 and no spill (tests/test_ch06_sass.py).
__global__ void __launch_bounds__(kThreads, 8)
    add_grid_stride(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, long n4) {
  add_strided(a, b, c, n4, (long)blockIdx.x * blockDim.x + threadIdx.x, (long)gridDim.x * blockDim.x);
}

__global__ void add_per_element(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, long n) {
  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

constexpr int kBlocked4 = 2;  // float4s of each input per thread in add_blocked4

// Block j owns float4s [j * 512, j * 512 + 512): thread t the ones at t and t + 256, so each warp
// load is 512 contiguous bytes. Both float4s of a and of b are loaded before any store (4
// LDG.E.128 in a row): 64 B in flight per thread, 128 KiB per SM at 8 blocks of 256, against
// add_per_element's 8 B and 16 KiB; and 8x fewer blocks (16,384 for 32M elements, not 131,072).
// Every access is guarded by i < n4, so a partial last block reads and writes nothing past n4.
__global__ void __launch_bounds__(kThreads, 8)
    add_blocked4(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, long n4) {
  const long first = (long)blockIdx.x * (kThreads * kBlocked4) + threadIdx.x;
  float4 x[kBlocked4], y[kBlocked4];
#pragma unroll
  for (int k = 0; k < kBlocked4; ++k) {
    const long i = first + (long)k * kThreads;
    if (i < n4) {
      x[k] = a[i];
      y[k] = b[i];
    }
  }
#pragma unroll
  for (int k = 0; k < kBlocked4; ++k) {
    const long i = first + (long)k * kThreads;
    if (i < n4) c[i] = add4(x[k], y[k]);
  }
}

// float4 views of a, b, c, or false when n or an address does not allow them.
static bool as_float4(const float* a, const float* b, const float* c, long n) {
  return n % 4 == 0 && ((size_t)a | (size_t)b | (size_t)c) % 16 == 0;
}

#define F4(p) reinterpret_cast<const float4*>(p)

extern "C" int add_one_block_run(const float* a, const float* b, float* c, long n, cudaStream_t s) {
  if (!as_float4(a, b, c, n)) return -1;
  add_one_block<<<1, kOneBlockThreads, 0, s>>>(F4(a), F4(b), reinterpret_cast<float4*>(c), n / 4);
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
  if (!as_float4(a, b, c, n)) return -1;
  add_grid_stride<<<blocks, kThreads, 0, s>>>(F4(a), F4(b), reinterpret_cast<float4*>(c), n / 4);
  return launch_status();
}

extern "C" int add_per_element_run(const float* a, const float* b, float* c, long n, int block,
                                   cudaStream_t s) {
  if (block <= 0 || block > 1024) return -1;
  add_per_element<<<(unsigned)((n + block - 1) / block), block, 0, s>>>(a, b, c, n);
  return launch_status();
}

// Blocks of kThreads x kBlocked4 float4s that cover n / 4; -1 unless float4 access is possible
// (n % 4 == 0, 16-byte-aligned pointers), n > 0 and the grid fits gridDim.x.
extern "C" int add_blocked4_run(const float* a, const float* b, float* c, long n, cudaStream_t s) {
  const long per_block = (long)kThreads * kBlocked4, blocks = (n / 4 + per_block - 1) / per_block;
  if (n <= 0 || !as_float4(a, b, c, n) || blocks > 0x7fffffffL) return -1;
  add_blocked4<<<(unsigned)blocks, kThreads, 0, s>>>(F4(a), F4(b), reinterpret_cast<float4*>(c), n / 4);
  return launch_status();
}

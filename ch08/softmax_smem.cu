// softmax_smem.cu: row softmax of a rows x 4,096 fp32 matrix, one 256-thread block per row, the
// row cached in dynamic shared memory between its three passes (max, sum of exp, scale).
//
// The kernel is the same in both variants; only the shared memory the launch asks for differs:
//   oversized   room for the longest row the kernel supports (24,576 floats, 96 KB per block):
//               two blocks fit in an SM's 228 KB, so 16 warps per SM (25% occupancy);
//   right-sized room for the row it is given (4,096 floats, 16 KB): the 2,048-thread limit binds
//               first, eight blocks (64 warps) per SM, four times the loads in flight.
// HBM traffic is the same (each row read once, written once); more resident blocks hide DRAM
// latency and overlap one block's reductions with another's loads.
#include <cmath>

#include "ch08_check.cuh"

constexpr int kCols = 4096, kMaxCols = 24576, kThreads = 256, kWarps = kThreads / 32;
constexpr int kVecPerThread = kCols / 4 / kThreads;

template <bool kMax>
__device__ __forceinline__ float combine(float a, float b) { return kMax ? fmaxf(a, b) : a + b; }

// The block-wide max or sum, the same value in every thread.
template <bool kMax>
__device__ float block_reduce(float v, float* partial) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = combine<kMax>(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  v = partial[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) v = combine<kMax>(v, partial[w]);
  __syncthreads();
  return v;
}

__global__ void __launch_bounds__(kThreads) row_softmax(const float4* __restrict__ x, float4* __restrict__ y) {
  extern __shared__ float4 row[];
  __shared__ float partial[kWarps];
  const size_t offset = (size_t)blockIdx.x * (kCols / 4);
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < kVecPerThread; ++k) {
    const float4 v = x[offset + k * kThreads + threadIdx.x];
    row[k * kThreads + threadIdx.x] = v;
    m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
  }
  m = block_reduce<true>(m, partial);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecPerThread; ++k) {
    float4 v = row[k * kThreads + threadIdx.x];
    v = make_float4(__expf(v.x - m), __expf(v.y - m), __expf(v.z - m), __expf(v.w - m));
    row[k * kThreads + threadIdx.x] = v;
    s += (v.x + v.y) + (v.z + v.w);
  }
  const float inv = 1.0f / block_reduce<false>(s, partial);
#pragma unroll
  for (int k = 0; k < kVecPerThread; ++k) {
    const float4 v = row[k * kThreads + threadIdx.x];
    y[offset + k * kThreads + threadIdx.x] = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
  }
}

// Lets row_softmax ask for more than the default 48 KB of dynamic shared memory.
extern "C" int softmax_init() {
  return (int)cudaFuncSetAttribute(row_softmax, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   kMaxCols * (int)sizeof(float));
}

// mode 0: shared memory for kMaxCols floats per block; 1: for the kCols the row has.
extern "C" int softmax_run(int mode, const float* x, float* y, long rows, long cols, cudaStream_t s) {
  if (cols != kCols || rows <= 0 || rows > (1L << 31) - 1 || ((size_t)x | (size_t)y) % 16) return -1;
  const size_t smem = (mode == 0 ? kMaxCols : kCols) * sizeof(float);
  row_softmax<<<(unsigned)rows, kThreads, smem, s>>>(reinterpret_cast<const float4*>(x),
                                                     reinterpret_cast<float4*>(y));
  return (int)cudaGetLastError();
}

// Resident blocks per SM of each mode (the occupancy the lesson is about).
extern "C" int softmax_blocks_per_sm(int mode, int* blocks) {
  const size_t smem = (mode == 0 ? kMaxCols : kCols) * sizeof(float);
  return (int)cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, row_softmax, kThreads, smem);
}

// saxpy_ilp.cu: z = a * x + y in fp32 (two streams read, one written; memory-bound), two ways to
// keep enough bytes in flight to cover DRAM latency.
//
//   one       one element per thread, a grid covering the array, 256-thread blocks: the textbook
//             kernel at 100% occupancy (64 warps per SM). Each thread has 8 bytes of loads in
//             flight, then waits: occupancy alone has to hide the latency.
//   ilp<K>    each thread loads K elements of x and K of y (coalesced: element k of a thread is
//             K-strided by the block) before using any, then strides over the array with a grid
//             sized by `blocks_per_sm`: K x 8 bytes in flight per thread, so fewer threads
//             (lower occupancy) move as many bytes.
// `smem` asks for dynamic shared memory the kernel does not use: the occupancy sweep's way to cap
// resident blocks per SM as a shared-memory-hungry kernel would.
#include "ch08_check.cuh"

__global__ void saxpy_one(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ z,
                          float a, long n) {
  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = fmaf(a, x[i], y[i]);
}

template <int K>
__global__ void saxpy_ilp(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ z,
                          float a, long n) {
  const long stride = (long)gridDim.x * blockDim.x * K;
  for (long base = (long)blockIdx.x * blockDim.x * K + threadIdx.x; base < n; base += stride) {
    float xv[K], yv[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const long i = base + (long)k * blockDim.x;
      xv[k] = i < n ? x[i] : 0.0f;
      yv[k] = i < n ? y[i] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const long i = base + (long)k * blockDim.x;
      if (i < n) z[i] = fmaf(a, xv[k], yv[k]);
    }
  }
}

using Kernel = void (*)(const float*, const float*, float*, float, long);

// ilp 0: saxpy_one; 1, 2, 4, 8: saxpy_ilp<ilp>; anything else: nullptr.
static Kernel kernel_for(int ilp) {
  switch (ilp) {
    case 0: return saxpy_one;
    case 1: return saxpy_ilp<1>;
    case 2: return saxpy_ilp<2>;
    case 4: return saxpy_ilp<4>;
    case 8: return saxpy_ilp<8>;
    default: return nullptr;
  }
}

// Registers per thread of the kernel, and its resident blocks per SM at this block size and smem.
extern "C" int saxpy_info(int ilp, int block, int smem, int* regs, int* blocks_per_sm) {
  const Kernel k = kernel_for(ilp);
  if (!k) return -1;
  cudaFuncAttributes attr{};
  cudaError_t err = smem > 48 * 1024 ? cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)
                                     : cudaSuccess;
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attr, k);
  if (err == cudaSuccess) err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, k, block, smem);
  *regs = attr.numRegs;
  return (int)err;
}

// ilp 0: one element per thread over the whole array (blocks_per_sm ignored); ilp > 0: a grid of
// SMs x blocks_per_sm blocks (fewer if the array needs fewer) striding over it.
extern "C" int saxpy_run(int ilp, int block, int blocks_per_sm, int smem, const float* x, const float* y,
                         float* z, float a, long n, cudaStream_t s) {
  const Kernel k = kernel_for(ilp);
  if (!k || block <= 0 || n <= 0 || (ilp > 0 && blocks_per_sm <= 0)) return -1;
  const long per_block = (long)block * (ilp > 0 ? ilp : 1);
  long blocks = (n + per_block - 1) / per_block;
  if (ilp > 0 && blocks > (long)sm_count() * blocks_per_sm) blocks = (long)sm_count() * blocks_per_sm;
  if (smem > 48 * 1024) {
    const cudaError_t err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return (int)err;
  }
  k<<<(unsigned)blocks, block, smem, s>>>(x, y, z, a, n);
  return (int)cudaGetLastError();
}

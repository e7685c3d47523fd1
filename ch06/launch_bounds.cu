// launch_bounds.cu: y = p(x) for a degree-47 polynomial (48 coefficients), Horner's rule per
// element, in a grid-stride loop; the same source compiled twice, and a third kernel that fits.
//
//   horner_free      no bounds: ptxas keeps all 48 coefficients in registers and uses 64 per
//                    thread, so an SM holds 4 blocks of 256 (1,024 threads, 50% occupancy).
//   horner_bounded   __launch_bounds__(256, 8): "at most 256 threads per block, and I want 8
//                    blocks per SM", so ptxas caps registers at 65,536 / (256 x 8) = 32 (a few
//                    coefficients then live in L1-resident local memory): 2,048 threads per SM,
//                    twice the warps to cover DRAM and FMA latency.
//   horner_fitted    __launch_bounds__(256, 8) with a working set that fits 32 registers: the 48
//                    coefficients, the same for every thread, staged once per block in shared
//                    memory and read in the loop as 12 broadcast 16-byte loads (LDS.128, one
//                    wavefront each); 4 elements per thread (one 16-byte load and store). ptxas:
//                    30 registers, no spill, 8 blocks per SM. (Plain shared reads get hoisted out
//                    of the loop into 48 live values that spill at 32: the reads are volatile.)
// The arithmetic is identical (same FMAs in the same order); only the register budget differs.
// `cuobjdump -res-usage` shows REG:64 vs REG:32 (tests/test_ch06_sass.py checks it).
// Python: ch06/baseline_launch_bounds.py
#include <cstdint>

#include "ch06_check.cuh"

constexpr int kCoefficients = 48;
constexpr int kBoundThreads = 256;

template <int kTerms>
__device__ __forceinline__ void horner(const float* __restrict__ x, const float* __restrict__ coef,
                                       float* __restrict__ y, long n) {
  float c[kTerms];
#pragma unroll
  for (int k = 0; k < kTerms; ++k) c[k] = coef[k];
  const long stride = (long)gridDim.x * blockDim.x;
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = x[i];
    float acc = c[0];
#pragma unroll
    for (int k = 1; k < kTerms; ++k) acc = fmaf(acc, v, c[k]);
    y[i] = acc;
  }
}

__global__ void horner_free(const float* __restrict__ x, const float* __restrict__ coef,
                            float* __restrict__ y, long n) {
  horner<kCoefficients>(x, coef, y, n);
}

__global__ void __launch_bounds__(kBoundThreads, 8)
    horner_bounded(const float* __restrict__ x, const float* __restrict__ coef, float* __restrict__ y,
                   long n) {
  horner<kCoefficients>(x, coef, y, n);
}

__device__ __forceinline__ float4 horner_step(float4 acc, float4 v, float c) {
  return make_float4(fmaf(acc.x, v.x, c), fmaf(acc.y, v.y, c), fmaf(acc.z, v.z, c), fmaf(acc.w, v.w, c));
}

// A 16-byte shared-memory load the compiler keeps where it is written (volatile).
__device__ __forceinline__ float4 shared_load4(const float4* p) {
  float4 v;
  asm volatile("ld.volatile.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p))));
  return v;
}

// p(v) for 4 elements, the coefficients read from shared memory 4 at a time: the same FMAs as horner().
__device__ __forceinline__ float4 horner4(const float4* cs, float4 v) {
  float4 acc = {};
#pragma unroll
  for (int q = 0; q < kCoefficients / 4; ++q) {
    const float4 c = shared_load4(&cs[q]);
    acc = q == 0 ? make_float4(c.x, c.x, c.x, c.x) : horner_step(acc, v, c.x);
    acc = horner_step(acc, v, c.y);
    acc = horner_step(acc, v, c.z);
    acc = horner_step(acc, v, c.w);
  }
  return acc;
}

__global__ void __launch_bounds__(kBoundThreads, 8)
    horner_fitted(const float* __restrict__ x, const float* __restrict__ coef, float* __restrict__ y, long n) {
  __shared__ float4 cs[kCoefficients / 4];
  if (threadIdx.x < kCoefficients) reinterpret_cast<float*>(cs)[threadIdx.x] = coef[threadIdx.x];
  __syncthreads();
  const long n4 = n / 4, stride = (long)gridDim.x * blockDim.x, first = (long)blockIdx.x * blockDim.x + threadIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  for (long i = first; i < n4; i += stride) y4[i] = horner4(cs, x4[i]);
  for (long i = 4 * n4 + first; i < n; i += stride) y[i] = horner4(cs, make_float4(x[i], 0.f, 0.f, 0.f)).x;  // n % 4
}

extern "C" int horner_terms() { return kCoefficients; }

enum Kernel { kFree = 0, kBounded, kFitted };

static const void* horner_kernel(int kernel) {
  if (kernel == kFree) return (const void*)horner_free;
  if (kernel == kBounded) return (const void*)horner_bounded;
  return kernel == kFitted ? (const void*)horner_fitted : nullptr;
}

// Blocks that fill every SM once: resident blocks per SM (occupancy API) x SMs; -1 on error.
// kernel = 0: horner_free, 1: horner_bounded, 2: horner_fitted.
extern "C" int horner_grid(int kernel) {
  int per_sm = 0;
  const void* fn = horner_kernel(kernel);
  if (!fn || cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kBoundThreads, 0) || per_sm < 1) {
    return -1;
  }
  return per_sm * sm_count();
}

// horner_fitted needs x and y 16-byte aligned (else -1).
extern "C" int horner_run(int kernel, int grid, const float* x, const float* coef, float* y, long n,
                          cudaStream_t s) {
  if (kernel == kFitted) {
    if (((uintptr_t)x | (uintptr_t)y) % sizeof(float4)) return -1;
    horner_fitted<<<grid, kBoundThreads, 0, s>>>(x, coef, y, n);
  } else if (kernel == kFree || kernel == kBounded) {
    (kernel == kBounded ? horner_bounded : horner_free)<<<grid, kBoundThreads, 0, s>>>(x, coef, y, n);
  } else {
    return -1;
  }
  return launch_status();
}

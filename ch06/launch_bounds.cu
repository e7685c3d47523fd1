// launch_bounds.cu: y = p(x) for a degree-47 polynomial (48 coefficients), Horner's rule per
// element, in a grid-stride loop; the same source compiled twice, and two kernels that fit.
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
//   horner_pipelined horner_fitted with the next float4's load issued before this one's FMAs
//                    (software pipelining): 32 registers, no spill, 8 blocks per SM.
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

// A 16-byte global load that ptxas keeps where it is written: volatile, like shared_load4's reads,
// and volatile accesses keep their order. (A plain or .nc load ptxas sinks under the 32-register cap
// to the middle of the FMA block, behind 7 of its 12 LDS.128.) LDG.E.128.STRONG.SYS: from L2, as any miss.
__device__ __forceinline__ float4 global_load4(const float4* p) {
  float4 v;
  asm volatile("ld.volatile.global.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
}

// One pipelined step: issue the load of the group after i (a predicated LDG: none past the end), then
// group i's 188 FMAs and its store; false when group i was this thread's last.
__device__ __forceinline__ bool horner_step_ahead(const float4* cs, const float4* x4, float4* y4, long& i,
                                                  long stride, long n4, const float4& v, float4& ahead) {
  const long next = i + stride;
  if (next < n4) ahead = global_load4(&x4[next]);
  y4[i] = horner4(cs, v);
  i = next;
  return next < n4;
}

// The shared-coefficient kernels' body: the block stages the coefficients in shared memory, each
// thread evaluates float4 groups in a grid-stride loop, then the n % 4 tail one element at a time.
// kPipelined (horner_pipelined): the next group's LDG.128 goes out before this group's FMAs, so
// while a warp computes, its next 16 bytes a thread are in flight (32 KiB an SM) and the load has
// the whole FMA block (~3,500 cycles with 16 warps a scheduler) to land; unrolled by 2 so the two
// float4s swap roles instead of being copied. Same FMAs in the same order either way.
template <bool kPipelined>
__device__ __forceinline__ void horner_shared(const float* __restrict__ x, const float* __restrict__ coef,
                                              float* __restrict__ y, long n) {
  __shared__ float4 cs[kCoefficients / 4];
  if (threadIdx.x < kCoefficients) reinterpret_cast<float*>(cs)[threadIdx.x] = coef[threadIdx.x];
  __syncthreads();
  const long n4 = n / 4, stride = (long)gridDim.x * blockDim.x, first = (long)blockIdx.x * blockDim.x + threadIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  if constexpr (kPipelined) {
    if (first < n4) {
      float4 a = x4[first], b;
      for (long i = first; horner_step_ahead(cs, x4, y4, i, stride, n4, a, b) &&
                           horner_step_ahead(cs, x4, y4, i, stride, n4, b, a);) {
      }
    }
  } else {
    for (long i = first; i < n4; i += stride) y4[i] = horner4(cs, x4[i]);
  }
  for (long i = 4 * n4 + first; i < n; i += stride) y[i] = horner4(cs, make_float4(x[i], 0.f, 0.f, 0.f)).x;  // n % 4
}

__global__ void __launch_bounds__(kBoundThreads, 8)
    horner_fitted(const float* __restrict__ x, const float* __restrict__ coef, float* __restrict__ y, long n) {
  horner_shared<false>(x, coef, y, n);
}

__global__ void __launch_bounds__(kBoundThreads, 8)
    horner_pipelined(const float* __restrict__ x, const float* __restrict__ coef, float* __restrict__ y, long n) {
  horner_shared<true>(x, coef, y, n);
}

extern "C" int horner_terms() { return kCoefficients; }

enum Kernel { kFree = 0, kBounded, kFitted, kPipelined };

static const void* horner_kernel(int kernel) {
  if (kernel == kFree) return (const void*)horner_free;
  if (kernel == kBounded) return (const void*)horner_bounded;
  if (kernel == kFitted) return (const void*)horner_fitted;
  return kernel == kPipelined ? (const void*)horner_pipelined : nullptr;
}

// Blocks that fill every SM once: resident blocks per SM (occupancy API) x SMs; -1 on error.
// kernel = 0: horner_free, 1: horner_bounded, 2: horner_fitted, 3: horner_pipelined.
extern "C" int horner_grid(int kernel) {
  int per_sm = 0;
  const void* fn = horner_kernel(kernel);
  if (!fn || cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kBoundThreads, 0) || per_sm < 1) {
    return -1;
  }
  return per_sm * sm_count();
}

// horner_fitted and horner_pipelined need x and y 16-byte aligned (else -1).
extern "C" int horner_run(int kernel, int grid, const float* x, const float* coef, float* y, long n,
                          cudaStream_t s) {
  if (kernel == kFitted || kernel == kPipelined) {
    if (((uintptr_t)x | (uintptr_t)y) % sizeof(float4)) return -1;
    (kernel == kFitted ? horner_fitted : horner_pipelined)<<<grid, kBoundThreads, 0, s>>>(x, coef, y, n);
  } else if (kernel == kFree || kernel == kBounded) {
    (kernel == kBounded ? horner_bounded : horner_free)<<<grid, kBoundThreads, 0, s>>>(x, coef, y, n);
  } else {
    return -1;
  }
  return launch_status();
}

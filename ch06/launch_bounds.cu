// launch_bounds.cu: y = p(x) for a degree-47 polynomial (48 coefficients), Horner's rule per
// element, in a grid-stride loop; the same source compiled twice.
//
//   horner_free      no bounds: ptxas keeps all 48 coefficients in registers and uses 64 per
//                    thread, so an SM holds 4 blocks of 256 (1,024 threads, 50% occupancy).
//   horner_bounded   __launch_bounds__(256, 8): "at most 256 threads per block, and I want 8
//                    blocks per SM", so ptxas caps registers at 65,536 / (256 x 8) = 32 (a few
//                    coefficients then live in L1-resident local memory): 2,048 threads per SM,
//                    twice the warps to cover DRAM and FMA latency.
// The arithmetic is identical (same FMAs in the same order); only the register budget differs.
// `cuobjdump -res-usage` shows REG:64 vs REG:32 (tests/test_ch06_sass.py checks it).
// Python: ch06/baseline_launch_bounds.py
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

extern "C" int horner_terms() { return kCoefficients; }

// Blocks that fill every SM once: resident blocks per SM (occupancy API) x SMs; -1 on error.
// bounded = 0: horner_free, 1: horner_bounded.
extern "C" int horner_grid(int bounded) {
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, bounded ? horner_bounded : horner_free,
                                                    kBoundThreads, 0) || per_sm < 1) {
    return -1;
  }
  return per_sm * sm_count();
}

extern "C" int horner_run(int bounded, int grid, const float* x, const float* coef, float* y, long n,
                          cudaStream_t s) {
  (bounded ? horner_bounded : horner_free)<<<grid, kBoundThreads, 0, s>>>(x, coef, y, n);
  return launch_status();
}

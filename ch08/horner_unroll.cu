// horner_unroll.cu: y = P(clamp(x, -1, 1)) for every element, P the 256-term series of ch08_poly.cuh
// by Horner's rule: 256 dependent FMAs per element. Compute-bound: 512 FLOPs per 8 bytes moved.
//
//   runtime  the term count is a kernel argument, so the loop cannot be unrolled fully: each FMA
//            comes with a load of its coefficient from the table (LDG, an L1 hit, but the
//            load/store unit issues far fewer instructions per clock than the FMA units), and
//            every 16 FMAs a counter update, a compare and a branch.
//   fixed    the term count is a template argument and the loop is fully unrolled: every index is
//            a constant, each coefficient folds into its FFMA as an immediate, the loop
//            bookkeeping disappears: one instruction per FMA.
// Same table, same FMAs in the same order: bitwise-equal results.
#include "ch08_check.cuh"
#include "ch08_poly.cuh"

constexpr int kTerms = 256, kThreads = 256;

__global__ void __launch_bounds__(kThreads) horner_runtime(const float* __restrict__ x, float* __restrict__ y,
                                                          int terms, long n) {
  const long i = (long)blockIdx.x * kThreads + threadIdx.x;
  if (i >= n) return;
  const float v = clamp_unit(x[i]);
  float acc = 0.0f;
  for (int k = terms - 1; k >= 0; --k) acc = fmaf(acc, v, kCoef.v[k]);
  y[i] = acc;
}

__global__ void __launch_bounds__(kThreads) horner_fixed(const float* __restrict__ x, float* __restrict__ y,
                                                        long n) {
  const long i = (long)blockIdx.x * kThreads + threadIdx.x;
  if (i >= n) return;
  y[i] = horner<kTerms>(clamp_unit(x[i]));
}

// mode 0: runtime term count, 1: compile-time term count (only kTerms terms are compiled).
extern "C" int horner_run(int mode, const float* x, float* y, int terms, long n, cudaStream_t s) {
  if (terms != kTerms || n <= 0) return -1;
  const unsigned blocks = (unsigned)((n + kThreads - 1) / kThreads);
  if (mode == 0) {
    horner_runtime<<<blocks, kThreads, 0, s>>>(x, y, terms, n);
  } else {
    horner_fixed<<<blocks, kThreads, 0, s>>>(x, y, n);
  }
  return (int)cudaGetLastError();
}

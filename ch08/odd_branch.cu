// odd_branch.cu: an odd function y = sign(x) * P(|x|), x clamped to [-1, 1], P the series of
// ch08_poly.cuh with 128 terms (Horner's rule, fully unrolled): 128 FMAs per element, compute-bound.
//
//   branchy  the definition written as a branch: if (x < 0) y = -P(-x); else y = P(x). The sign
//            of random data differs between the lanes of almost every warp, so the warp runs both
//            sides one after the other, each with about half its lanes masked off: 256 FMAs
//            issued per element, half of them wasted.
//   select   one path for every lane: r = P(|x|), then y = x < 0 ? -r : r, a select with no
//            branch: 128 FMAs issued per element, every lane busy.
// The same FMAs on the same values: bitwise-equal results.
#include "ch08_check.cuh"
#include "ch08_poly.cuh"

constexpr int kTerms = 128, kThreads = 256;

__global__ void __launch_bounds__(kThreads) odd_branchy(const float* __restrict__ x, float* __restrict__ y,
                                                       long n) {
  const long i = (long)blockIdx.x * kThreads + threadIdx.x;
  if (i >= n) return;
  const float v = clamp_unit(x[i]);
  float r;
  if (v < 0.0f) {
    r = -horner<kTerms>(-v);
  } else {
    r = horner<kTerms>(v);
  }
  y[i] = r;
}

__global__ void __launch_bounds__(kThreads) odd_select(const float* __restrict__ x, float* __restrict__ y,
                                                      long n) {
  const long i = (long)blockIdx.x * kThreads + threadIdx.x;
  if (i >= n) return;
  const float v = clamp_unit(x[i]);
  const float r = horner<kTerms>(fabsf(v));
  y[i] = v < 0.0f ? -r : r;
}

// mode 0: branch on the sign, 1: one path and a select.
extern "C" int odd_run(int mode, const float* x, float* y, long n, cudaStream_t s) {
  if (n <= 0) return -1;
  const unsigned blocks = (unsigned)((n + kThreads - 1) / kThreads);
  if (mode == 0) {
    odd_branchy<<<blocks, kThreads, 0, s>>>(x, y, n);
  } else {
    odd_select<<<blocks, kThreads, 0, s>>>(x, y, n);
  }
  return (int)cudaGetLastError();
}

// half2_poly.cu: y = P(clamp(x, -1, 1)) on fp16 data, P the series of ch08_poly.cuh with 128 terms
// (Horner's rule). Each thread handles two neighbouring elements (one 32-bit __half2 load and store).
//
//   fp32   converts both halves to float and runs two chains of 128 FFMAs (fp32 math, rounded to
//          fp16 once at the end): 256 FMA instructions per thread.
//   half2  keeps the pair packed and runs one chain of 128 HFMA2, each instruction two fp16 FMAs:
//          half the instructions; Hopper issues HFMA2 at the FFMA rate, so twice the FLOP/s.
// fp16 math rounds at every step: the results differ from the fp32 path by a few fp16 ulps.
#include "ch08_check.cuh"
#include "ch08_poly.cuh"

constexpr int kTerms = 128, kThreads = 256;

__global__ void __launch_bounds__(kThreads) poly_fp32(const __half2* __restrict__ x, __half2* __restrict__ y,
                                                     long n2) {
  const long i = (long)blockIdx.x * kThreads + threadIdx.x;
  if (i >= n2) return;
  const float2 v = __half22float2(x[i]);
  y[i] = __floats2half2_rn(horner<kTerms>(clamp_unit(v.x)), horner<kTerms>(clamp_unit(v.y)));
}

__global__ void __launch_bounds__(kThreads) poly_half2(const __half2* __restrict__ x, __half2* __restrict__ y,
                                                      long n2) {
  const long i = (long)blockIdx.x * kThreads + threadIdx.x;
  if (i >= n2) return;
  const __half2 one = __float2half2_rn(1.0f);
  y[i] = horner2<kTerms>(__hmin2(__hmax2(x[i], __hneg2(one)), one));
}

// mode 0: fp32 math, 1: packed __half2 math. x, y: n fp16 values (n even, 4-byte aligned).
extern "C" int half2_run(int mode, const void* x, void* y, long n, cudaStream_t s) {
  if (n <= 0 || n % 2 || ((size_t)x | (size_t)y) % 4) return -1;
  const long n2 = n / 2;
  const unsigned blocks = (unsigned)((n2 + kThreads - 1) / kThreads);
  const __half2* in = static_cast<const __half2*>(x);
  __half2* out = static_cast<__half2*>(y);
  if (mode == 0) {
    poly_fp32<<<blocks, kThreads, 0, s>>>(in, out, n2);
  } else {
    poly_half2<<<blocks, kThreads, 0, s>>>(in, out, n2);
  }
  return (int)cudaGetLastError();
}

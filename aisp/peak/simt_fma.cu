// SIMT FMA throughput probes of `aisp peak` (aisp/peak/simt.py): fp32 FFMA and packed fp16 HFMA2.
//
// Each thread runs CHAINS independent FMA chains (x = x * a + b), so every warp scheduler always has
// an FMA whose operands are ready: enough ILP to keep the FMA pipes busy without relying on
// occupancy alone. a and b are kernel arguments (the compiler cannot fold the chains), nothing is
// loaded inside the loop, and each thread writes the sum of its chains (the work cannot be dropped).
#include <cuda_fp16.h>

constexpr int CHAINS = 16;
constexpr int THREADS = 256;

__global__ void __launch_bounds__(THREADS) ffma_chains(float* out, float a, float b, int iters) {
  float x[CHAINS];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) x[c] = threadIdx.x + c;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) x[c] = fmaf(x[c], a, b);
  }
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) sum += x[c];
  out[blockIdx.x * THREADS + threadIdx.x] = sum;
}

// The two halves of a2 and b2 differ on purpose. With (a, a) and (b, b), ptxas reads each operand as
// one half broadcast to both lanes (R.H0_H0), a form only the FMA pipe executes: every HFMA2 of the
// loop went there, and the probe read 66.2 TFLOP/s on an H200 (half the fp32 FFMA instruction rate).
// With distinct halves it splits the loop between HFMA2 (FMA pipe) and HFMA2.MMA (the MMA pipe), 40
// and 40 of the unrolled chains in sm_90 SASS (cuobjdump -sass), as ch08's half2 Horner kernel does.
__global__ void __launch_bounds__(THREADS) hfma2_chains(__half2* out, float a, float b, int iters) {
  const __half2 a2 = __floats2half2_rn(a, 0.5f * a), b2 = __floats2half2_rn(b, 0.5f * b);
  __half2 x[CHAINS];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) x[c] = __floats2half2_rn(threadIdx.x * 1e-3f, c * 1e-3f);
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) x[c] = __hfma2(x[c], a2, b2);
  }
  __half2 sum = x[0];
#pragma unroll
  for (int c = 1; c < CHAINS; ++c) sum = __hadd2(sum, x[c]);
  out[blockIdx.x * THREADS + threadIdx.x] = sum;
}

// FMA instructions one launch executes: blocks x THREADS x CHAINS x iters (an HFMA2 is two fp16 FMAs).
extern "C" long long simt_fma_instructions(int blocks, int iters) {
  return (long long)blocks * THREADS * CHAINS * iters;
}

extern "C" int simt_threads() { return THREADS; }

// kind 0: fp32 FFMA chains into `out` (blocks x THREADS floats); kind 1: fp16 HFMA2 chains (as many __half2).
extern "C" int simt_fma_run(int kind, void* out, int blocks, int iters, float a, float b, cudaStream_t s) {
  if (kind == 0) {
    ffma_chains<<<blocks, THREADS, 0, s>>>(static_cast<float*>(out), a, b, iters);
  } else {
    hfma2_chains<<<blocks, THREADS, 0, s>>>(static_cast<__half2*>(out), a, b, iters);
  }
  return (int)cudaGetLastError();
}

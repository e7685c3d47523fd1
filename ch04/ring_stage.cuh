// One pipeline stage of the device_initiated_put_multigpu pair, shared by both variants so they
// compute it with the same code and reduction order: out = in / rms(in) * gain (RMSNorm with a per-stage gain), over one
// activation of `width` fp32 values, by one block. The norm needs every value of the message, so
// a stage cannot start on part of it: the whole message must have arrived.
#pragma once
#include <cuda_runtime.h>

namespace ring {

constexpr int kThreads = 1024;
constexpr float kEps = 1e-6f;

// Called by all kThreads threads of the block; `partial` is kThreads / 32 floats of shared memory.
// `in` is read through L2 (__ldcg): in the optimized variant a peer GPU wrote it over NVLink.
// Ends with a barrier, so `out` is complete (and may be sent) when it returns.
__device__ inline void rms_stage(const float* in, const float* __restrict__ gain, float* out, int width,
                                 float* partial) {
  float sum = 0.f;
  for (int i = threadIdx.x; i < width; i += kThreads) {
    const float v = __ldcg(in + i);
    sum += v * v;
  }
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = sum;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];  // same order in every thread
  const float scale = rsqrtf(total / width + kEps);
  for (int i = threadIdx.x; i < width; i += kThreads) out[i] = __ldcg(in + i) * scale * __ldg(gain + i);
  __syncthreads();
}

}  // namespace ring

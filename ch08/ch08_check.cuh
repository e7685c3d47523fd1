// Shared by chapter 8's CUDA C++: every entry point returns 0 or a CUDA error code, and launches on
// the stream it is given (the caller's current PyTorch stream).
#pragma once
#include <cuda_runtime.h>

// The number of SMs of the current device, read once.
inline int sm_count() {
  static int sms = 0;
  if (sms == 0) {
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  }
  return sms;
}

// Clamp to [-1, 1], where the chapter's polynomials are defined (NaN becomes -1).
__device__ __forceinline__ float clamp_unit(float v) { return fminf(fmaxf(v, -1.0f), 1.0f); }

// Shared by chapter 6's CUDA sources: the error code of the last launch, for the C entry points
// that Python calls (0 = success, the cudaError_t otherwise).
#pragma once
#include <cuda_runtime.h>

static inline int launch_status() { return (int)cudaGetLastError(); }

// Streaming multiprocessors of the current device (132 on an H100/H200 SXM).
static inline int sm_count() {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return sms;
}

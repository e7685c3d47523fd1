// cutlass_run.cuh: what ch09's CUTLASS 3.x entry points share once their kernel's Arguments are built:
// the SM count for the persistent scheduler, and the checked can_implement / workspace / initialize /
// run sequence on the caller's stream. Included only where the CUTLASS headers are found.
// Used by cutlass_sm90.cu and cutlass_gelu.cu.
#pragma once
#include <cuda_runtime.h>
#include <cutlass/kernel_hardware_info.h>

static int sm_count() {
  static int count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
  return count;
}

// 0 once launched; 1 cannot implement, 2 workspace too small, 3 initialize failed, 4 run failed, or a CUDA error.
template <class Gemm>
int run_gemm(typename Gemm::Arguments& args, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  args.hw_info.sm_count = sm_count();
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return 1;
  if (Gemm::get_workspace_size(args) > workspace_bytes) return 2;
  if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return 3;
  return gemm.run(stream) == cutlass::Status::kSuccess ? int(cudaGetLastError()) : 4;
}

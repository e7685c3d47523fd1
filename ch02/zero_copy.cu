// Zero-copy gather: a kernel reads selected rows of a pinned host buffer over PCIe directly.
// out[r, :] = host[idx[r], :] for r < n_rows; rows of row_floats floats (a multiple of 4).
// The host buffer must be page-locked (cudaHostAlloc / torch pin_memory): its device address comes
// from cudaHostGetDevicePointer (the same address under UVA). One block per output row, each thread
// moving 16-byte float4 words, so a row crosses PCIe as a few large read requests.
// gather_rows_mapped_warp: the same copy by one 32-thread block (one warp) per row, each lane issuing
// all its 16-byte loads of a 4 KiB row segment (8 of them) before its first store.
#include <cuda_runtime.h>
#include <cstdint>

namespace {

constexpr int kThreads = 256;

__global__ void gather_rows_kernel(const float4* __restrict__ host, const int64_t* __restrict__ idx,
                                   int64_t n_src_rows, int row_vec, float4* __restrict__ out) {
  const int64_t r = blockIdx.x;
  const int64_t src = idx[r];
  if (src < 0 || src >= n_src_rows) return;  // the wrapper checks; never read outside the buffer
  const float4* from = host + src * row_vec;
  float4* to = out + r * row_vec;
  for (int j = threadIdx.x; j < row_vec; j += blockDim.x) to[j] = from[j];
}

constexpr int kWarp = 32;
constexpr int kLoadsPerLane = 8;  // 32 lanes x 8 x 16 B = 4 KiB: a whole row requested by a warp at once
constexpr int kSegment = kWarp * kLoadsPerLane;  // float4 words a warp moves per pass

// __launch_bounds__(32) lets ptxas hold all 8 float4 in registers (52, nvcc 13.0, sm_90): without it,
// it kept to 31 and issued 5 loads before the first store, the other 3 a PCIe round trip later.
__global__ void __launch_bounds__(kWarp)
gather_rows_warp_kernel(const float4* __restrict__ host, const int64_t* __restrict__ idx, int64_t n_src_rows,
                        int row_vec, float4* __restrict__ out) {
  const int64_t r = blockIdx.x;
  const int64_t src = idx[r];
  if (src < 0 || src >= n_src_rows) return;  // the wrapper checks; never read outside the buffer
  const float4* from = host + src * row_vec + threadIdx.x;
  float4* to = out + r * row_vec + threadIdx.x;
  int base = 0;
#pragma unroll 1
  for (; base + kSegment <= row_vec; base += kSegment) {
    float4 v[kLoadsPerLane];  // unpredicated loads at fixed offsets, all issued before the first store
#pragma unroll
    for (int k = 0; k < kLoadsPerLane; ++k) v[k] = __ldg(from + base + k * kWarp);  // 512 B a warp each
#pragma unroll
    for (int k = 0; k < kLoadsPerLane; ++k) to[base + k * kWarp] = v[k];
  }
  for (int j = base; j + static_cast<int>(threadIdx.x) < row_vec; j += kWarp) to[j] = __ldg(from + j);  // tail
}

}  // namespace

extern "C" int gather_rows_mapped(const float* host, int64_t n_src_rows, const int64_t* idx, int n_rows,
                                  int row_floats, float* out, cudaStream_t stream) {
  if (row_floats % 4 != 0 || n_rows <= 0) return static_cast<int>(cudaErrorInvalidValue);
  void* mapped = nullptr;
  cudaError_t err = cudaHostGetDevicePointer(&mapped, const_cast<float*>(host), 0);
  if (err != cudaSuccess) return static_cast<int>(err);
  const int row_vec = row_floats / 4;
  gather_rows_kernel<<<n_rows, kThreads, 0, stream>>>(static_cast<const float4*>(mapped), idx, n_src_rows,
                                                       row_vec, reinterpret_cast<float4*>(out));
  return static_cast<int>(cudaGetLastError());
}

extern "C" int gather_rows_mapped_warp(const float* host, int64_t n_src_rows, const int64_t* idx, int n_rows,
                                       int row_floats, float* out, cudaStream_t stream) {
  if (row_floats % 4 != 0 || n_rows <= 0) return static_cast<int>(cudaErrorInvalidValue);
  void* mapped = nullptr;
  cudaError_t err = cudaHostGetDevicePointer(&mapped, const_cast<float*>(host), 0);
  if (err != cudaSuccess) return static_cast<int>(err);
  gather_rows_warp_kernel<<<n_rows, kWarp, 0, stream>>>(static_cast<const float4*>(mapped), idx, n_src_rows,
                                                        row_floats / 4, reinterpret_cast<float4*>(out));
  return static_cast<int>(cudaGetLastError());
}

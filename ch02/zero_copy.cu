// Zero-copy gather: a kernel reads selected rows of a pinned host buffer over PCIe directly.
// out[r, :] = host[idx[r], :] for r < n_rows; rows of row_floats floats (a multiple of 4).
// The host buffer must be page-locked (cudaHostAlloc / torch pin_memory): its device address comes
// from cudaHostGetDevicePointer (the same address under UVA). One block per output row, each thread
// moving 16-byte float4 words, so a row crosses PCIe as a few large read requests.
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

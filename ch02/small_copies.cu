// Small copies as one kernel: the GPU reads every small pinned host tensor straight over PCIe.
// out[p, :] = piece p (p < n_pieces), each piece piece_floats floats (a multiple of 4) of page-locked
// host memory. The pieces' device addresses (cudaHostGetDevicePointer; the host address itself under
// UVA) sit in a device table of n_pieces entries, one block per piece. Each thread issues all its
// 16-byte loads before its first store, so the whole 8 MiB is requested from the host in the
// kernel's first microseconds: no host memcpy into staging, one launch instead of 2,048 copies.
#include <cuda_runtime.h>
#include <cstdint>

namespace {

constexpr int kThreads = 128;
constexpr int kVecPerThread = 2;  // 128 threads x 2 float4 = one 4 KiB piece per block, in one pass

__global__ void __launch_bounds__(kThreads) gather_pieces_kernel(const float4* const* __restrict__ pieces,
                                                                 int piece_vec, float4* __restrict__ out) {
  const float4* from = pieces[blockIdx.x];
  float4* to = out + static_cast<int64_t>(blockIdx.x) * piece_vec;
  for (int base = threadIdx.x; base < piece_vec; base += kThreads * kVecPerThread) {
    float4 v[kVecPerThread];
#pragma unroll
    for (int k = 0; k < kVecPerThread; ++k) {
      const int j = base + k * kThreads;
      if (j < piece_vec) v[k] = from[j];
    }
#pragma unroll
    for (int k = 0; k < kVecPerThread; ++k) {
      const int j = base + k * kThreads;
      if (j < piece_vec) to[j] = v[k];
    }
  }
}

}  // namespace

// Host addresses -> device addresses, in place (n entries); fails on memory that is not page-locked.
extern "C" int map_pieces(uint64_t* addresses, int n) {
  if (n <= 0) return static_cast<int>(cudaErrorInvalidValue);
  for (int i = 0; i < n; ++i) {
    void* mapped = nullptr;
    cudaError_t err = cudaHostGetDevicePointer(&mapped, reinterpret_cast<void*>(addresses[i]), 0);
    if (err != cudaSuccess) return static_cast<int>(err);
    if (reinterpret_cast<uint64_t>(mapped) % 16 != 0) return static_cast<int>(cudaErrorMisalignedAddress);
    addresses[i] = reinterpret_cast<uint64_t>(mapped);
  }
  return 0;
}

// table: n_pieces device addresses in device memory (from map_pieces); out: n_pieces x piece_floats.
extern "C" int gather_pieces_mapped(const uint64_t* table, int n_pieces, int piece_floats, float* out,
                                    cudaStream_t stream) {
  if (n_pieces <= 0 || piece_floats <= 0 || piece_floats % 4 != 0) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  gather_pieces_kernel<<<n_pieces, kThreads, 0, stream>>>(reinterpret_cast<const float4* const*>(table),
                                                          piece_floats / 4, reinterpret_cast<float4*>(out));
  return static_cast<int>(cudaGetLastError());
}

// Direct peer access: a kernel on this GPU loads another GPU's memory over NVLink.
// out[i] = peer_x[i] * w[i]: peer_x lives on the peer GPU, w and out on this one. After
// cudaDeviceEnablePeerAccess the peer's allocations are addressable here (UVA): a load from them
// becomes an NVLink read request, so no local copy of peer_x is made. float4 loads keep 16 bytes per
// thread in flight; a grid of 8 blocks per SM strides over the array.
#include <cuda_runtime.h>
#include <cstdint>

namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8;

__global__ void multiply_peer_kernel(const float4* __restrict__ peer_x, const float4* __restrict__ w,
                                     float4* __restrict__ out, int64_t n_vec) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_vec; i += stride) {
    const float4 x = peer_x[i];
    const float4 s = w[i];
    out[i] = make_float4(x.x * s.x, x.y * s.y, x.z * s.z, x.w * s.w);
  }
}

}  // namespace

// Lets `device` load and store `peer`'s memory; already enabled counts as success.
extern "C" int enable_peer_access(int device, int peer) {
  int can = 0;
  cudaError_t err = cudaDeviceCanAccessPeer(&can, device, peer);
  if (err != cudaSuccess) return static_cast<int>(err);
  if (!can) return static_cast<int>(cudaErrorPeerAccessUnsupported);
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(device);
  err = cudaDeviceEnablePeerAccess(peer, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();  // clear the (non-sticky) error this call recorded
    err = cudaSuccess;
  }
  cudaSetDevice(previous);
  return static_cast<int>(err);
}

extern "C" int multiply_peer(const float* peer_x, const float* w, float* out, int64_t n, cudaStream_t stream) {
  if (n <= 0 || n % 4 != 0) return static_cast<int>(cudaErrorInvalidValue);
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaError_t err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return static_cast<int>(err);
  const int64_t n_vec = n / 4;
  const int64_t wanted = (n_vec + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < sms * kBlocksPerSm ? wanted : sms * kBlocksPerSm);
  multiply_peer_kernel<<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const float4*>(peer_x),
                                                        reinterpret_cast<const float4*>(w),
                                                        reinterpret_cast<float4*>(out), n_vec);
  return static_cast<int>(cudaGetLastError());
}

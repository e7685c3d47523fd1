// misaligned_copy.cu: copy n floats whose first element sits 4 bytes past a 16-byte boundary
// (a payload after a 4-byte header, a slice x[1:]), into a buffer with the same offset.
//
//   scalar  one float per thread: the only safe width for a pointer that is not 16-byte aligned;
//           4 bytes in flight per thread, each warp's access spans 5 sectors instead of 4.
//   peeled  source and destination share their misalignment, so after `head` (0-3) scalar
//           elements both are 16-byte aligned: the body moves as float4 (16 bytes per thread),
//           and a scalar tail (0-3 elements) finishes. One launch does all three parts.
#include <cstdint>

constexpr int kThreads = 256;

__global__ void copy_scalar(const float* __restrict__ src, float* __restrict__ dst, long n) {
  const long i = (long)blockIdx.x * kThreads + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

__global__ void copy_peeled(const float* __restrict__ src, float* __restrict__ dst, long n, long head, long body4) {
  const long t = (long)blockIdx.x * kThreads + threadIdx.x;
  if (t < body4) reinterpret_cast<float4*>(dst + head)[t] = reinterpret_cast<const float4*>(src + head)[t];
  const long tail = head + 4 * body4;
  if (t < head) dst[t] = src[t];
  if (t < n - tail) dst[tail + t] = src[tail + t];
}

static unsigned blocks(long work) { return (unsigned)((work + kThreads - 1) / kThreads); }

extern "C" int copy_scalar_run(const float* src, float* dst, long n, cudaStream_t s) {
  if (n <= 0) return n ? -1 : 0;
  copy_scalar<<<blocks(n), kThreads, 0, s>>>(src, dst, n);
  return (int)cudaGetLastError();
}

// src and dst must be equally misaligned (same address modulo 16) and 4-byte aligned.
extern "C" int copy_peeled_run(const float* src, float* dst, long n, cudaStream_t s) {
  const uintptr_t a = (uintptr_t)src, b = (uintptr_t)dst;
  if (((a ^ b) & 15) || (a & 3) || n < 0) return -1;
  if (n == 0) return 0;
  long head = (long)((16 - (a & 15)) & 15) / 4;
  head = head < n ? head : n;
  const long body4 = (n - head) / 4;
  const long edges = head > 3 ? head : 3;
  copy_peeled<<<blocks(body4 > edges ? body4 : edges), kThreads, 0, s>>>(src, dst, n, head, body4);
  return (int)cudaGetLastError();
}

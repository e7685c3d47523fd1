// coalescing.cu: out = a * in + b over a rows x cols fp32 matrix, one element per thread, with two
// mappings of threads to elements.
//
//   strided    thread t -> row t % rows, column t / rows: the 32 threads of a warp touch 32 rows,
//              32 separate 32-byte sectors per load (4 useful bytes each): 8x the DRAM traffic
//              unless L2 happens to keep the sector until the neighbouring column's warp asks.
//   coalesced  thread t -> element t: a warp's 32 loads are 128 contiguous bytes, 4 sectors.
//   float4     thread t -> elements 4t..4t+3 as one 128-bit access: still coalesced (512
//              contiguous bytes per warp), and 4x the bytes in flight per thread, which an
//              H100/H200 needs to cover DRAM latency at full bandwidth.
//
// Same arithmetic, same result, same bytes requested; only the access pattern differs.
// Build and run: make && ./bin/coalescing_sm$(arch)   (Python: ch01/baseline_coalescing.py)
#include <cmath>
#include <vector>

#include "ch01_check.cuh"

constexpr int kThreads = 256;

__global__ void scale_coalesced(const float* __restrict__ in, float* __restrict__ out, float a, float b,
                                long n) {
  const long t = (long)blockIdx.x * kThreads + threadIdx.x;
  if (t < n) out[t] = fmaf(a, in[t], b);
}

__global__ void scale_float4(const float4* __restrict__ in, float4* __restrict__ out, float a, float b,
                             long n4) {
  const long t = (long)blockIdx.x * kThreads + threadIdx.x;
  if (t < n4) {
    const float4 v = in[t];
    out[t] = make_float4(fmaf(a, v.x, b), fmaf(a, v.y, b), fmaf(a, v.z, b), fmaf(a, v.w, b));
  }
}

__global__ void scale_strided(const float* __restrict__ in, float* __restrict__ out, float a, float b,
                              int rows, int cols) {
  const long t = (long)blockIdx.x * kThreads + threadIdx.x;
  if (t < (long)rows * cols) {
    const long i = (t % rows) * cols + t / rows;
    out[i] = fmaf(a, in[i], b);
  }
}

enum Mode { kStrided = 0, kCoalesced, kFloat4, kModes };

// mode: 0 strided, 1 coalesced, 2 coalesced float4 (needs rows * cols % 4 == 0 and 16-byte alignment).
extern "C" int coalescing_run(int mode, const float* in, float* out, int rows, int cols, float a, float b,
                              cudaStream_t s) {
  const long n = (long)rows * cols;
  const unsigned blocks = (unsigned)((n + kThreads - 1) / kThreads);
  if (mode == kStrided) {
    scale_strided<<<blocks, kThreads, 0, s>>>(in, out, a, b, rows, cols);
  } else if (mode == kCoalesced) {
    scale_coalesced<<<blocks, kThreads, 0, s>>>(in, out, a, b, n);
  } else if (mode == kFloat4 && n % 4 == 0 && ((size_t)in | (size_t)out) % 16 == 0) {
    scale_float4<<<(unsigned)((n / 4 + kThreads - 1) / kThreads), kThreads, 0, s>>>(
        reinterpret_cast<const float4*>(in), reinterpret_cast<float4*>(out), a, b, n / 4);
  } else {
    return -1;
  }
  return (int)cudaGetLastError();
}

#ifndef CH01_LIBRARY
int main() {
  const int rows = 8192, cols = 8192;
  const long n = (long)rows * cols;
  const float a = 1.5f, b = -0.25f;
  std::vector<float> hin(n), hout(n);
  for (long i = 0; i < n; ++i) hin[i] = (float)(i % 1000) * 1e-3f;
  float *in, *out;
  CUDA_CHECK(cudaMalloc(&in, n * 4));
  CUDA_CHECK(cudaMalloc(&out, n * 4));
  CUDA_CHECK(cudaMemcpy(in, hin.data(), n * 4, cudaMemcpyHostToDevice));
  std::printf("Coalescing demo: out = a * in + b on %dx%d fp32 (%.0f MiB read + written)\n\n", rows, cols,
              2.0 * n * 4 / (1 << 20));
  const char* names[kModes] = {"Strided (uncoalesced)", "Coalesced", "Coalesced float4"};
  float ms[kModes];
  bool ok = true;
  for (int c = 0; c < kModes; ++c) {
    CUDA_CHECK(cudaMemset(out, 0, n * 4));
    ms[c] = time_ms([&] { CUDA_CHECK((cudaError_t)coalescing_run(c, in, out, rows, cols, a, b, 0)); });
    CUDA_CHECK(cudaMemcpy(hout.data(), out, n * 4, cudaMemcpyDeviceToHost));
    for (long i = 0; i < n; i += 101) ok = ok && hout[i] == std::fmaf(a, hin[i], b);
    std::printf("%-22s %.3f ms, %.1f GB/s\n", names[c], ms[c], 2.0 * n * 4 / (ms[c] * 1e-3) / 1e9);
  }
  std::printf("Speedup: %.2fx (coalesced), %.2fx (coalesced float4)\n%s\n", ms[0] / ms[1], ms[0] / ms[2],
              ok ? "All results match the CPU reference." : "MISMATCH against the CPU reference!");
  return ok ? 0 : 1;
}
#endif

// arithmetic_intensity.cu: one result, y = p(x) for a degree-8 polynomial over 10M floats, computed
// five ways that move fewer bytes per FLOP each time.
//
//   baseline    8 passes (one Horner step each), 1 float per thread    16 FLOP / 92 B = 0.17 FLOP/B
//   unrolled    8 passes, 4 floats per thread (independent loads: ILP)  same bytes, fewer stalls
//   vectorized  8 passes, float4 loads and stores (128-bit accesses)    same bytes, fewer instructions
//   more FLOPs  2 passes of 4 Horner steps: more work per byte loaded   16 FLOP / 20 B = 0.8 FLOP/B
//   fused       1 pass of all 8 steps: read x once, write y once        16 FLOP / 8 B  = 2.0 FLOP/B
//   fused x2    the fused pass, two float4 per thread loaded before either is stored: same bytes
//
// Every variant performs the same fmaf chain in the same order, so all five outputs are bitwise
// equal. On a GPU whose simple kernels already stream at HBM speed (H100/H200), unrolling and
// vectorizing gain little; cutting bytes (raising FLOP/byte) is what pays.
// Build and run: make && ./bin/arithmetic_intensity_sm$(arch)   (Python: ch01/baseline_arithmetic_intensity.py)
#include <cmath>
#include <vector>

#include "ch01_check.cuh"

constexpr int kDegree = 8;
constexpr int kThreads = 256;

// The coefficients one pass applies; `lead` starts the chain when the pass is the first.
struct Pass {
  float c[kDegree];
  float lead;
  int first;
};

template <int STEPS>
__device__ __forceinline__ float horner(float y, float x, const Pass& p) {
#pragma unroll
  for (int s = 0; s < STEPS; ++s) y = fmaf(y, x, p.c[s]);
  return y;
}

// One float per thread (ILP = 1) or ILP floats per thread, each a block-width apart (coalesced).
template <int STEPS, int ILP>
__global__ void pass_scalar(const float* __restrict__ x, float* __restrict__ y, Pass p, int n) {
  const long base = (long)blockIdx.x * kThreads * ILP + threadIdx.x;
  float xv[ILP], yv[ILP];
#pragma unroll
  for (int u = 0; u < ILP; ++u) {
    const long i = base + u * kThreads;
    xv[u] = i < n ? x[i] : 0.f;
    yv[u] = p.first ? p.lead : (i < n ? y[i] : 0.f);
  }
#pragma unroll
  for (int u = 0; u < ILP; ++u) {
    const long i = base + u * kThreads;
    if (i < n) y[i] = horner<STEPS>(yv[u], xv[u], p);
  }
}

// Four contiguous floats per thread as one 128-bit load/store; thread 0 also does the tail.
template <int STEPS>
__global__ void pass_float4(const float* __restrict__ x, float* __restrict__ y, Pass p, int n) {
  const long i = (long)blockIdx.x * kThreads + threadIdx.x;
  if (i < n / 4) {
    const float4 xv = reinterpret_cast<const float4*>(x)[i];
    float4 yv = p.first ? make_float4(p.lead, p.lead, p.lead, p.lead) : reinterpret_cast<const float4*>(y)[i];
    yv.x = horner<STEPS>(yv.x, xv.x, p);
    yv.y = horner<STEPS>(yv.y, xv.y, p);
    yv.z = horner<STEPS>(yv.z, xv.z, p);
    yv.w = horner<STEPS>(yv.w, xv.w, p);
    reinterpret_cast<float4*>(y)[i] = yv;
  }
  if (i == 0) {
    for (long j = n / 4 * 4; j < n; ++j) y[j] = horner<STEPS>(p.first ? p.lead : y[j], x[j], p);
  }
}

enum Variant { kBaseline = 0, kUnrolled, kVectorized, kMoreFlops, kFused, kVariants };

static int steps_per_pass(int variant) {
  return variant == kFused ? kDegree : variant == kMoreFlops ? 4 : 1;
}

template <int STEPS>
static void launch(int variant, const float* x, float* y, const Pass& p, int n, cudaStream_t s) {
  if (variant == kUnrolled) {
    pass_scalar<STEPS, 4><<<(n + kThreads * 4 - 1) / (kThreads * 4), kThreads, 0, s>>>(x, y, p, n);
  } else if (variant == kBaseline) {
    pass_scalar<STEPS, 1><<<(n + kThreads - 1) / kThreads, kThreads, 0, s>>>(x, y, p, n);
  } else {
    pass_float4<STEPS><<<(n / 4 + kThreads - 1) / kThreads + 1, kThreads, 0, s>>>(x, y, p, n);
  }
}

// y = c[0] x^8 + c[1] x^7 + ... + c[8], with `coef` (kDegree + 1 floats) in host memory.
extern "C" int ai_run(int variant, const float* x, float* y, int n, const float* coef, cudaStream_t s) {
  if (variant < 0 || variant >= kVariants) return -1;
  const int steps = steps_per_pass(variant);
  for (int next = 1; next <= kDegree; next += steps) {
    Pass p{};
    for (int j = 0; j < steps; ++j) p.c[j] = coef[next + j];
    p.lead = coef[0];
    p.first = next == 1;
    if (steps == 1) launch<1>(variant, x, y, p, n, s);
    else if (steps == 4) launch<4>(variant, x, y, p, n, s);
    else launch<kDegree>(variant, x, y, p, n, s);
  }
  return (int)cudaGetLastError();
}

// Bytes a variant moves per element: the first pass reads x and writes y, later ones also read y.
extern "C" double ai_bytes_per_element(int variant) {
  const int passes = kDegree / steps_per_pass(variant);
  return 8.0 + 12.0 * (passes - 1);
}

#ifndef CH01_LIBRARY
int main() {
  const int n = 10 * 1000 * 1000;
  const float coef[kDegree + 1] = {1.f / 9, -1.f / 8, 1.f / 7, -1.f / 6, 1.f / 5, -1.f / 4, 1.f / 3, -1.f / 2, 1.f};
  const char* names[kVariants] = {"Baseline kernel", "Unrolled kernel", "Vectorized kernel",
                                  "Optimized kernel (more FLOPs)", "Fused kernel"};
  std::vector<float> hx(n), hy(n);
  unsigned state = 2024u;
  for (auto& v : hx) { state = state * 1664525u + 1013904223u; v = (state >> 8) / 8388608.0f - 1.0f; }
  float *x, *y;
  CUDA_CHECK(cudaMalloc(&x, (size_t)n * 4));
  CUDA_CHECK(cudaMalloc(&y, (size_t)n * 4));
  CUDA_CHECK(cudaMemcpy(x, hx.data(), (size_t)n * 4, cudaMemcpyHostToDevice));

  std::printf("Arithmetic Intensity Optimization Demo (N = %dM elements)\n\n", n / 1000000);
  const double flops = 2.0 * kDegree;
  bool ok = true;
  float base_ms = 0.f;
  for (int v = 0; v < kVariants; ++v) {
    CUDA_CHECK(cudaMemset(y, 0, (size_t)n * 4));
    const float ms = time_ms([&] { CUDA_CHECK((cudaError_t)ai_run(v, x, y, n, coef, 0)); });
    CUDA_CHECK(cudaMemcpy(hy.data(), y, (size_t)n * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i += 997) {
      double ref = coef[0];
      for (int j = 1; j <= kDegree; ++j) ref = ref * hx[i] + coef[j];
      ok = ok && std::fabs(hy[i] - ref) <= 1e-5 + 1e-5 * std::fabs(ref);
    }
    const double bytes = ai_bytes_per_element(v);
    if (v == kBaseline) base_ms = ms;
    std::printf("%s:\n  Time: %.3f ms, Bandwidth: %.1f GB/s, AI: %.3f FLOP/Byte\n", names[v], ms,
                bytes * n / (ms * 1e-3) / 1e9, flops / bytes);
    if (v == kFused) std::printf("  Overall speedup: %.2fx\n", base_ms / ms);
    std::printf("\n");
  }
  std::printf("%s\n", ok ? "All results match the CPU reference." : "MISMATCH against the CPU reference!");
  return ok ? 0 : 1;
}
#endif

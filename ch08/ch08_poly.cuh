// The polynomial chapter 8's compute-bound kernels evaluate: P(v) = sum_k (-1)^k v^k / (k + 1), the
// series of ln(1 + v) / v, truncated to at most 256 terms, by Horner's rule: one FMA per term.
// The coefficient table is a constexpr: indexed at run time it is read from memory; indexed with a
// compile-time constant (a fully unrolled loop) each coefficient folds into its FFMA as an immediate.
#pragma once
#include <cuda_fp16.h>

#include "ch08_check.cuh"

constexpr int kMaxTerms = 256;

struct CoefTable {
  float v[kMaxTerms];
};

__host__ __device__ constexpr float series_coef(int k) { return (k % 2 ? -1.0f : 1.0f) / (float)(k + 1); }

constexpr CoefTable make_coef_table() {
  CoefTable t{};
  for (int k = 0; k < kMaxTerms; ++k) t.v[k] = series_coef(k);
  return t;
}

__device__ constexpr CoefTable kCoef = make_coef_table();

// P(v) with kTerms terms, fully unrolled: kTerms dependent FFMAs with immediate coefficients.
template <int kTerms>
__device__ __forceinline__ float horner(float v) {
  static_assert(kTerms <= kMaxTerms, "kTerms exceeds the table");
  float acc = 0.0f;
#pragma unroll
  for (int k = kTerms - 1; k >= 0; --k) acc = fmaf(acc, v, kCoef.v[k]);
  return acc;
}

// The same on two fp16 values at once: kTerms HFMA2, each two FMAs.
template <int kTerms>
__device__ __forceinline__ __half2 horner2(__half2 v) {
  static_assert(kTerms <= kMaxTerms, "kTerms exceeds the table");
  __half2 acc = __float2half2_rn(0.0f);
#pragma unroll
  for (int k = kTerms - 1; k >= 0; --k) acc = __hfma2(acc, v, __float2half2_rn(kCoef.v[k]));
  return acc;
}

// The loop body tail_effect's and predication's kernels share: `steps` steps of kGroup units of
// kThreads elements, one element per thread a unit: step s's unit j (s from 0) is element
// i + s * stride + j * kThreads (this thread's). Each step evaluates kGroup values with `eval`
// (a clamped input -> its output: a chain of FMAs), so the loop and address arithmetic of one step
// is shared by kGroup chains; step s + 1's inputs are loaded, and clamped, in step s, around its
// chains, so their latency hides behind them. The last step reloads its own, so no `if` guards the
// loads (guarded, ptxas sank them to the loop's end).
template <int kGroup, int kThreads, class Eval>
__device__ __forceinline__ void unit_steps(const float* __restrict__ x, float* __restrict__ y, size_t i,
                                           size_t stride, int steps, Eval eval) {
  if (steps <= 0) return;
  float v[kGroup];
#pragma unroll
  for (int j = 0; j < kGroup; ++j) v[j] = clamp_unit(x[i + j * kThreads]);
  for (int s = 1; s <= steps; ++s, i += stride) {
    const size_t next = i + (s < steps ? stride : 0);
    float in[kGroup];
#pragma unroll
    for (int j = 0; j < kGroup; ++j) in[j] = x[next + j * kThreads];
#pragma unroll
    for (int j = 0; j < kGroup; ++j) y[i + j * kThreads] = eval(v[j]);
#pragma unroll
    for (int j = 0; j < kGroup; ++j) v[j] = clamp_unit(in[j]);
  }
}

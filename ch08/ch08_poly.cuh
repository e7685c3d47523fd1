// The polynomial chapter 8's compute-bound kernels evaluate: P(v) = sum_k (-1)^k v^k / (k + 1), the
// series of ln(1 + v) / v, truncated to at most 256 terms, by Horner's rule: one FMA per term.
// The coefficient table is a constexpr: indexed at run time it is read from memory; indexed with a
// compile-time constant (a fully unrolled loop) each coefficient folds into its FFMA as an immediate.
#pragma once
#include <cuda_fp16.h>

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

// cutlass_simt.cu: C = A @ B in bf16 (fp32 accumulation) with CUTLASS 2.x's SIMT GEMM: CUDA-core FMAs,
// 128x128x8 thread-block tiles in shared memory, 32x64 warp tiles and an 8x8 register tile per
// thread (CUTLASS's default SIMT configuration). The tensor cores stay idle: the baseline of
// cutlass_gemm, whose optimized side is cutlass_sm90.cu. Needs the CUTLASS headers (-I .../include,
// see ch09_native.py); without them it compiles to a stub (cutlass_headers() returns 0; see cutlass_sm90.cu).
// Python: ch09/baseline_cutlass_gemm.py
#include <cuda_runtime.h>

#if __has_include(<cutlass/cutlass.h>)
extern "C" int cutlass_headers() { return 1; }  // built with CUTLASS
#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm.h>

using Element = cutlass::bfloat16_t;
using RowMajor = cutlass::layout::RowMajor;
using Gemm = cutlass::gemm::device::Gemm<Element, RowMajor, Element, RowMajor, Element, RowMajor, float,
                                         cutlass::arch::OpClassSimt, cutlass::arch::Sm80>;

// Row-major A (m x k), B (k x n), C (m x n) on `stream`.
extern "C" int cutlass_simt_gemm(const void* a, const void* b, void* c, int m, int n, int k, cudaStream_t stream) {
  const Element* pa = static_cast<const Element*>(a);
  const Element* pb = static_cast<const Element*>(b);
  Element* pc = static_cast<Element*>(c);
  Gemm::Arguments args({m, n, k}, {pa, k}, {pb, n}, {pc, n}, {pc, n}, {1.0f, 0.0f});
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return 1;
  return gemm(args, nullptr, stream) == cutlass::Status::kSuccess ? int(cudaGetLastError()) : 4;
}
#else
constexpr int kNoCutlass = 1000;  // the entry point's status when built without the headers
extern "C" int cutlass_headers() { return 0; }
extern "C" int cutlass_simt_gemm(const void*, const void*, void*, int, int, int, cudaStream_t) { return kNoCutlass; }
#endif

// cutlass_sgemm.cu: C = A @ B in fp32 with CUTLASS 2.x's SIMT GEMM, a register-tiled CUDA-core GEMM
// as a library builds it: 128 x 256 x 8 thread-block tiles, 64 x 64 warp tiles (each warp's 32 threads
// a 4 x 8 grid, so a 16 x 8 register tile a thread: 128 accumulators), a 4-stage cp.async ring of
// k-slabs in shared memory (the Sm80 multistage mainloop), FFMAs on the CUDA cores. Chosen by a sweep
// of 27 configurations on an H200 at 4096^3 (2026-11-30; see ch09/optimized_register_tiling_cutlass.py).
// Shared by ch09:register_tiling and ch07:tiled_matmul (chapters are self-contained folders, so it
// lives in the package). Needs the CUTLASS headers (-I .../include, see aisp/kits/cutlass.py); without
// them it compiles to a stub (cutlass_headers() returns 0).
// Python: aisp.kits.cutlass.SGEMM; ch09/optimized_register_tiling_cutlass.py,
// ch07/optimized_tiled_matmul_cutlass.py
#include <cuda_runtime.h>

#if __has_include(<cutlass/cutlass.h>)
extern "C" int cutlass_headers() { return 1; }  // built with CUTLASS
#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm.h>

using RowMajor = cutlass::layout::RowMajor;
using Gemm = cutlass::gemm::device::Gemm<
    float, RowMajor, float, RowMajor, float, RowMajor, float, cutlass::arch::OpClassSimt, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 256, 8>,  // thread-block tile
    cutlass::gemm::GemmShape<64, 64, 8>,    // warp tile
    cutlass::gemm::GemmShape<1, 1, 1>,      // one FFMA
    cutlass::epilogue::thread::LinearCombination<float, 1, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 4>;  // 4 stages

// Row-major A (m x k), B (k x n), C (m x n) on `stream`.
extern "C" int cutlass_sgemm(const void* a, const void* b, void* c, int m, int n, int k, cudaStream_t stream) {
  const float* pa = static_cast<const float*>(a);
  const float* pb = static_cast<const float*>(b);
  float* pc = static_cast<float*>(c);
  Gemm::Arguments args({m, n, k}, {pa, k}, {pb, n}, {pc, n}, {pc, n}, {1.0f, 0.0f});
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return 1;
  return gemm(args, nullptr, stream) == cutlass::Status::kSuccess ? int(cudaGetLastError()) : 4;
}
#else
constexpr int kNoCutlass = 1000;  // the entry point's status when built without the headers
extern "C" int cutlass_headers() { return 0; }
extern "C" int cutlass_sgemm(const void*, const void*, void*, int, int, int, cudaStream_t) { return kNoCutlass; }
#endif

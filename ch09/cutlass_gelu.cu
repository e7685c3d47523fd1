// cutlass_gelu.cu: Y = gelu_tanh(X @ W^T + b) in bf16 (fp32 accumulation) with a CUTLASS 3.x Hopper
// kernel whose GELU epilogue overlaps the tensor cores: the ping-pong schedule. A producer warp
// issues TMA loads; two consumer warpgroups each own a whole 128 x 128 tile and take turns: while
// one runs its tile's wgmma mainloop, the other runs its epilogue (bias add, tanh GELU on the fp32
// accumulators, bf16 TMA store), so the epilogue is hidden behind the other's math instead of
// stalling the tensor cores as in a cooperative kernel (both warpgroups on one tile, then both in
// its epilogue). 2 x 1 cluster (W tiles multicast), persistent tile scheduler.
// The epilogue is CUTLASS's LinCombPerColBiasEltAct<GELU_taylor>: D = gelu(acc + bias[col]) with
// GELU_taylor = 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))), tanh.approx.f32: the tanh GELU.
// Needs the CUTLASS headers (-I .../include, see ch09_native.py) and sm_90a; without them the file
// compiles to a stub (cutlass_headers() returns 0, the entry point kNoCutlass), as cutlass_sm90.cu.
// Python: ch09/optimized_gemm_epilogue_cutlass.py
#include <cuda_runtime.h>

#if __has_include(<cutlass/cutlass.h>)
extern "C" int cutlass_headers() { return 1; }  // built with CUTLASS
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/epilogue/thread/activation.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/kernel_hardware_info.h>

#include "cutlass_run.cuh"

using namespace cute;
using Element = cutlass::bfloat16_t;
// X (M x K) row-major; W (N x K) row-major is B (K x N) column-major: both K-major, as wgmma wants.
using LayoutX = cutlass::layout::RowMajor;
using LayoutW = cutlass::layout::ColumnMajor;
using LayoutY = cutlass::layout::RowMajor;
constexpr int kAlign = 128 / cutlass::sizeof_bits<Element>::value;  // 16-byte TMA alignment
using TileShape = Shape<_128, _128, _64>;  // one consumer warpgroup's tile (ping-pong)
using ClusterShape = Shape<_2, _1, _1>;

using GeluBias = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<cutlass::epilogue::thread::GELU_taylor, Element,
                                                                    float, Element>;
using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutY, kAlign, Element, LayoutY, kAlign,
    cutlass::epilogue::TmaWarpSpecialized, GeluBias>::CollectiveOp;
using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutX, kAlign, Element, LayoutW, kAlign, float,
    TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedPingpong>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

// Row-major X (m x k), W (n x k), Y (m x n), bias (n) on `stream`; `workspace` holds `workspace_bytes` bytes.
extern "C" int cutlass_gelu_gemm(const void* x, const void* w, const void* bias, void* y, int m, int n, int k,
                                 void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  auto stride_x = make_stride(int64_t(k), Int<1>{}, int64_t(0));
  auto stride_w = make_stride(int64_t(k), Int<1>{}, int64_t(0));
  auto stride_y = make_stride(int64_t(n), Int<1>{}, int64_t(0));
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                {m, n, k, 1},
                                {static_cast<const Element*>(x), stride_x, static_cast<const Element*>(w), stride_w},
                                {{}, nullptr, stride_y, static_cast<Element*>(y), stride_y}};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  args.epilogue.thread.bias_ptr = static_cast<const Element*>(bias);
  return run_gemm<Gemm>(args, workspace, workspace_bytes, stream);
}
#else
constexpr int kNoCutlass = 1000;  // the entry point's status when built without the headers
extern "C" int cutlass_headers() { return 0; }
extern "C" int cutlass_gelu_gemm(const void*, const void*, const void*, void*, int, int, int, void*, size_t,
                                 cudaStream_t) {
  return kNoCutlass;
}
#endif

// layer_chain.cu: the cuda_graphs pair's work, 100 layers of h = tanh(shift[i] + h * scale[i]) on
// 4,096 floats, as two lean kernels a layer (addcmul_step, tanh_step: one float4 a thread, 4 blocks
// of 256), the 200 launches chained on one stream, plainly or with programmatic dependent launch
// (PDL, sm_90+; ch01/optimized_cuda_graphs_pdl.py captures them into a CUDA graph).
//
// With PDL every launch but the first carries cudaLaunchAttributeProgrammaticStreamSerialization;
// stream capture records it as a programmatic edge. Each kernel lets its successor launch on entry
// (griddepcontrol.launch_dependents), so later kernels are launched and their blocks placed while
// earlier ones run; each waits in griddepcontrol.wait, which returns once the kernel before it has
// completed and its stores are visible, and only then loads: h (or t) from L2 (__ldcg), with
// addcmul_step's scale and shift in flight beside it (one L2 round trip; ptxas schedules the wait
// ahead of loads written before it, so loading them earlier gains nothing). Order and answer stay
// those of the plain chain; each kernel's launch and block placement leave the chain.
// Before sm_90 the griddepcontrol instructions compile out (the pair requires sm_90).
// Build and run: make && ./bin/layer_chain_sm$(arch)   (Python: ch01/optimized_cuda_graphs_pdl.py)
#include <cmath>
#include <cstdint>
#include <vector>

#include "ch01_check.cuh"

constexpr int kThreads = 256;

__device__ __forceinline__ void let_next_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void wait_for_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// t = shift + h * scale (torch.addcmul(shift, h, scale)), n4 float4s.
__global__ void __launch_bounds__(kThreads) addcmul_step(const float4* h, const float4* __restrict__ scale,
                                                         const float4* __restrict__ shift, float4* t, int n4) {
  let_next_launch();
  wait_for_previous();
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i < n4) {
    const float4 v = __ldcg(h + i), s = __ldg(scale + i), b = __ldg(shift + i);
    t[i] = make_float4(fmaf(v.x, s.x, b.x), fmaf(v.y, s.y, b.y), fmaf(v.z, s.z, b.z), fmaf(v.w, s.w, b.w));
  }
}

// h = tanh(t), n4 float4s.
__global__ void __launch_bounds__(kThreads) tanh_step(const float4* t, float4* h, int n4) {
  let_next_launch();
  wait_for_previous();
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i < n4) {
    const float4 v = __ldcg(t + i);
    h[i] = make_float4(tanhf(v.x), tanhf(v.y), tanhf(v.z), tanhf(v.w));
  }
}

static bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// The 2 x layers launches on `stream`: layer 0 reads h0, every later layer the h before it; t is
// the addcmul's output (width floats), h the result. scale and shift: layers x width, row-major.
// pdl: 1 for programmatic edges (every launch after the first), 0 for plain stream order.
extern "C" int layers_run(const float* h0, const float* scale, const float* shift, float* t, float* h, int width,
                          int layers, int pdl, cudaStream_t stream) {
  if (width <= 0 || width % 4 != 0 || layers <= 0 || !aligned16(h0) || !aligned16(scale) || !aligned16(shift) ||
      !aligned16(t) || !aligned16(h))
    return static_cast<int>(cudaErrorInvalidValue);
  const int n4 = width / 4;
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  // The first launch follows no kernel of the chain: an ordinary one (its wait returns at once).
  cudaLaunchConfig_t config = {dim3((n4 + kThreads - 1) / kThreads), dim3(kThreads), 0, stream, &attr, 0};
  const float4* in = reinterpret_cast<const float4*>(h0);
  float4* t4 = reinterpret_cast<float4*>(t);
  float4* h4 = reinterpret_cast<float4*>(h);
  cudaError_t err = cudaSuccess;
  for (int i = 0; i < layers && err == cudaSuccess; ++i) {
    const float4* s4 = reinterpret_cast<const float4*>(scale + static_cast<long>(i) * width);
    const float4* b4 = reinterpret_cast<const float4*>(shift + static_cast<long>(i) * width);
    err = cudaLaunchKernelEx(&config, addcmul_step, in, s4, b4, t4, n4);
    config.numAttrs = pdl ? 1 : 0;
    if (err == cudaSuccess) err = cudaLaunchKernelEx(&config, tanh_step, static_cast<const float4*>(t4), h4, n4);
    in = h4;
  }
  return static_cast<int>(err);
}

#ifndef CH01_LIBRARY
// Captures the chain into a graph (plain, then PDL), replays each, checks it against the CPU.
int main() {
  const int width = 4096, layers = 100;
  std::vector<float> h0(width), scale(layers * width), shift(layers * width), out(width);
  for (int j = 0; j < width; ++j) h0[j] = std::sin(0.37f * j);
  for (int k = 0; k < layers * width; ++k) {
    scale[k] = 1.0f + 0.1f * std::cos(0.11f * k);
    shift[k] = 0.1f * std::sin(0.23f * k);
  }
  std::vector<float> ref(h0);
  for (int i = 0; i < layers; ++i)
    for (int j = 0; j < width; ++j) ref[j] = std::tanh(std::fma(ref[j], scale[i * width + j], shift[i * width + j]));
  float *d_h0, *d_scale, *d_shift, *d_t, *d_h;
  CUDA_CHECK(cudaMalloc(&d_h0, width * 4));
  CUDA_CHECK(cudaMalloc(&d_scale, layers * width * 4));
  CUDA_CHECK(cudaMalloc(&d_shift, layers * width * 4));
  CUDA_CHECK(cudaMalloc(&d_t, width * 4));
  CUDA_CHECK(cudaMalloc(&d_h, width * 4));
  CUDA_CHECK(cudaMemcpy(d_h0, h0.data(), width * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_scale, scale.data(), layers * width * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_shift, shift.data(), layers * width * 4, cudaMemcpyHostToDevice));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));  // blocking: time_ms's events on stream 0 order with it
  std::printf("Layer chain: %d layers (%d kernels) on %d floats, one graph replay a call\n\n", layers, 2 * layers,
              width);
  bool ok = true;
  for (int pdl = 0; pdl < 2; ++pdl) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CUDA_CHECK(static_cast<cudaError_t>(layers_run(d_h0, d_scale, d_shift, d_t, d_h, width, layers, pdl, s)));
    CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaMemset(d_h, 0, width * 4));
    const float ms = time_ms([&] { CUDA_CHECK(cudaGraphLaunch(exec, s)); });
    CUDA_CHECK(cudaMemcpy(out.data(), d_h, width * 4, cudaMemcpyDeviceToHost));
    for (int j = 0; j < width; ++j) ok = ok && std::fabs(out[j] - ref[j]) <= 1e-4f;
    std::printf("%-18s %.1f us a replay, %.2f us a kernel\n", pdl ? "graph, PDL edges" : "graph, plain", ms * 1e3,
                ms * 1e3 / (2 * layers));
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
  }
  std::printf("%s\n", ok ? "All results match the CPU reference." : "MISMATCH against the CPU reference!");
  return ok ? 0 : 1;
}
#endif

// graph_replay.cu: a chain of `steps` tiny dependent kernels, launched one by one from the host or
// captured once into a cudaGraphExec and replayed with one cudaGraphLaunch.
// Built as a shared library by aisp.kits.native (ch12/baseline_graph_replay.py).
//
// The chain: out = a * in + b, then steps - 1 more times out = a * out + b (in place). Each kernel
// touches 16 KiB: its cost is the launch, which is what the graph removes from the host path.
//
// replay_build_pdl captures the same chain with programmatic dependent launch (PDL, sm_90+): each
// launch carries cudaLaunchAttributeProgrammaticStreamSerialization, which stream capture records
// as a programmatic edge, so node k + 1 is launched once every block of node k has executed
// griddepcontrol.launch_dependents, not when node k has completed. Its blocks take their slots
// early and wait in griddepcontrol.wait, which returns once node k has completed and its stores are
// visible: the chain keeps its order and its answer, and each node's launch and block placement
// move off the chain. Trigger first: a node lets its successor launch on entry (several nodes wait
// ahead, as many as the free block slots hold); trigger after the wait: one node waits ahead.
#include "ch12_common.cuh"

// affine_step for a PDL chain: the same math, its load after the wait and from L2 (__ldcg: never a
// line a waiting block's L1 held before the previous node's stores). Before sm_90 the griddepcontrol
// instructions are compiled out and the launches below carry no attribute.
template <bool kTriggerFirst>
__global__ void affine_step_pdl(const float* in, float* out, int n, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (kTriggerFirst) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (!kTriggerFirst) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = fmaf(a, __ldcg(in + i), b);
}

// The chain of affine_step_pdl launches on `s`, each with the PDL attribute where the GPU has it.
template <bool kTriggerFirst>
static cudaError_t launch_chain_pdl(const float* in, float* out, int n, int steps, float a, float b, cudaStream_t s) {
  cudaLaunchAttribute pdl = pdl_attribute();
  // The first step reads the input and follows no kernel of the capture: an ordinary launch (its
  // griddepcontrol.wait returns at once). Every later one reads the out the one before it wrote.
  cudaLaunchConfig_t config = {dim3(blocks_for(n)), dim3(kThreads), 0, s, &pdl, 0};
  cudaError_t err = cudaLaunchKernelEx(&config, affine_step_pdl<kTriggerFirst>, in, out, n, a, b);
  config.numAttrs = pdl_attribute_count();
  for (int k = 1; k < steps && err == cudaSuccess; ++k) {
    err = cudaLaunchKernelEx(&config, affine_step_pdl<kTriggerFirst>, static_cast<const float*>(out), out, n, a, b);
  }
  return err;
}

static void launch_chain(const float* in, float* out, int n, int steps, float a, float b, cudaStream_t s) {
  affine_step<<<blocks_for(n), kThreads, 0, s>>>(in, out, n, a, b);
  for (int k = 1; k < steps; ++k) affine_step<<<blocks_for(n), kThreads, 0, s>>>(out, out, n, a, b);
}

// The chain launched kernel by kernel on `stream`.
extern "C" int replay_eager(const float* in, float* out, int n, int steps, float a, float b, cudaStream_t stream) {
  if (n <= 0 || steps <= 0) return static_cast<int>(cudaErrorInvalidValue);
  launch_chain(in, out, n, steps, a, b, stream);
  return static_cast<int>(cudaGetLastError());
}

// Captures launch(s) on a private stream and instantiates the graph into *exec_out (cudaGraphExec_t).
template <typename Launch>
static int capture(Launch launch, void** exec_out) {
  cudaStream_t s;
  CH12_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  if (err == cudaSuccess) {
    err = launch(s);
    cudaError_t end = cudaStreamEndCapture(s, &graph);
    if (err == cudaSuccess) err = end;
  }
  cudaGraphExec_t exec = nullptr;
  if (err == cudaSuccess) err = cudaGraphInstantiate(&exec, graph, 0);
  if (graph) cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  *exec_out = exec;
  return static_cast<int>(err);
}

// Captures the chain and instantiates it into *exec_out.
extern "C" int replay_build(const float* in, float* out, int n, int steps, float a, float b, void** exec_out) {
  if (n <= 0 || steps <= 0) return static_cast<int>(cudaErrorInvalidValue);
  return capture([=](cudaStream_t s) {
    launch_chain(in, out, n, steps, a, b, s);
    return cudaGetLastError();
  }, exec_out);
}

// Captures the chain with PDL (trigger_first: each node lets the next launch on entry, else after
// its wait) and instantiates it into *exec_out.
extern "C" int replay_build_pdl(const float* in, float* out, int n, int steps, float a, float b, int trigger_first,
                                void** exec_out) {
  if (n <= 0 || steps <= 0) return static_cast<int>(cudaErrorInvalidValue);
  return capture([=](cudaStream_t s) {
    return trigger_first ? launch_chain_pdl<true>(in, out, n, steps, a, b, s)
                         : launch_chain_pdl<false>(in, out, n, steps, a, b, s);
  }, exec_out);
}

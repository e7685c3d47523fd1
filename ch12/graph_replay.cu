// graph_replay.cu: a chain of `steps` tiny dependent kernels, launched one by one from the host or
// captured once into a cudaGraphExec and replayed with one cudaGraphLaunch.
// Built as a shared library by aisp.kits.native (ch12/baseline_graph_replay.py).
//
// The chain: out = a * in + b, then steps - 1 more times out = a * out + b (in place). Each kernel
// touches 16 KiB: its cost is the launch, which is what the graph removes from the host path.
#include "ch12_common.cuh"

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

// Captures the chain on a private stream and instantiates it into *exec_out (cudaGraphExec_t).
extern "C" int replay_build(const float* in, float* out, int n, int steps, float a, float b, void** exec_out) {
  if (n <= 0 || steps <= 0) return static_cast<int>(cudaErrorInvalidValue);
  cudaStream_t s;
  CH12_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  if (err == cudaSuccess) {
    launch_chain(in, out, n, steps, a, b, s);
    err = cudaStreamEndCapture(s, &graph);
  }
  cudaGraphExec_t exec = nullptr;
  if (err == cudaSuccess) err = cudaGraphInstantiate(&exec, graph, 0);
  if (graph) cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  *exec_out = exec;
  return static_cast<int>(err);
}

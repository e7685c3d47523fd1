// graph_update.cu: a denoising-style loop: `steps` launches of one graph (a chain of `nodes` tiny
// kernels out = a * out + c_t), where the scalar c_t changes at every step. Three ways to launch it:
//   update_recapture: capture and instantiate a new graph per step (the baseline);
//   update_setparams: one graph instantiated once, each kernel node's c_t set with
//                     cudaGraphExecKernelNodeSetParams before each launch;
//   update_exec:      capture per step, then cudaGraphExecUpdate into the one instantiated graph
//                     (same topology, new arguments), no instantiation.
// Built as a shared library by aisp.kits.native (ch12/baseline_graph_update.py).
#include <vector>

#include "ch12_common.cuh"

struct Updatable {
  cudaStream_t capture;  // private stream the graphs are captured on
  cudaGraph_t graph;     // the graph the exec was instantiated from (its nodes name the exec's nodes)
  cudaGraphExec_t exec;
  std::vector<cudaGraphNode_t> nodes;
  float* out;
  int n, count;
  float a;
};

static cudaError_t capture(const Updatable& u, float c, cudaGraph_t* graph) {
  cudaError_t err = cudaStreamBeginCapture(u.capture, cudaStreamCaptureModeThreadLocal);
  if (err != cudaSuccess) return err;
  for (int k = 0; k < u.count; ++k) affine_step<<<blocks_for(u.n), kThreads, 0, u.capture>>>(u.out, u.out, u.n, u.a, c);
  return cudaStreamEndCapture(u.capture, graph);
}

// Builds the state of one chain over `out` (captured with c = c0, instantiated) into *state_out.
extern "C" int update_build(float* out, int n, int nodes, float a, float c0, void** state_out) {
  if (n <= 0 || nodes <= 0) return static_cast<int>(cudaErrorInvalidValue);
  auto* u = new Updatable{nullptr, nullptr, nullptr, {}, out, n, nodes, a};
  *state_out = u;
  CH12_TRY(cudaStreamCreateWithFlags(&u->capture, cudaStreamNonBlocking));
  CH12_TRY(capture(*u, c0, &u->graph));
  CH12_TRY(cudaGraphInstantiate(&u->exec, u->graph, 0));
  size_t count = 0;
  CH12_TRY(cudaGraphGetNodes(u->graph, nullptr, &count));
  u->nodes.resize(count);
  CH12_TRY(cudaGraphGetNodes(u->graph, u->nodes.data(), &count));
  return count == static_cast<size_t>(nodes) ? 0 : static_cast<int>(cudaErrorInvalidValue);
}

extern "C" int update_destroy(void* state) {
  auto* u = static_cast<Updatable*>(state);
  if (u->exec) cudaGraphExecDestroy(u->exec);
  if (u->graph) cudaGraphDestroy(u->graph);
  if (u->capture) cudaStreamDestroy(u->capture);
  delete u;
  return 0;
}

// Baseline: per step, capture with c_t, instantiate, launch, destroy (what a graph costs when it
// is rebuilt for every changed argument).
extern "C" int update_recapture(void* state, const float* in, const float* coefs, int steps, cudaStream_t stream) {
  auto* u = static_cast<Updatable*>(state);
  CH12_TRY(cudaMemcpyAsync(u->out, in, sizeof(float) * u->n, cudaMemcpyDeviceToDevice, stream));
  for (int t = 0; t < steps; ++t) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CH12_TRY(capture(*u, coefs[t], &graph));
    CH12_TRY(cudaGraphInstantiate(&exec, graph, 0));
    CH12_TRY(cudaGraphLaunch(exec, stream));
    CH12_TRY(cudaGraphExecDestroy(exec));  // freed once the launch completes
    CH12_TRY(cudaGraphDestroy(graph));
  }
  return 0;
}

// Optimized: per step, the new c_t goes into every kernel node of the instantiated graph.
extern "C" int update_setparams(void* state, const float* in, const float* coefs, int steps, cudaStream_t stream) {
  auto* u = static_cast<Updatable*>(state);
  CH12_TRY(cudaMemcpyAsync(u->out, in, sizeof(float) * u->n, cudaMemcpyDeviceToDevice, stream));
  float* out = u->out;
  int n = u->n;
  float a = u->a, c = 0.0f;
  void* args[] = {&out, &out, &n, &a, &c};
  cudaKernelNodeParams p = {};
  p.func = reinterpret_cast<void*>(affine_step);
  p.gridDim = dim3(blocks_for(n));
  p.blockDim = dim3(kThreads);
  p.kernelParams = args;
  for (int t = 0; t < steps; ++t) {
    c = coefs[t];
    for (cudaGraphNode_t node : u->nodes) CH12_TRY(cudaGraphExecKernelNodeSetParams(u->exec, node, &p));
    CH12_TRY(cudaGraphLaunch(u->exec, stream));
  }
  return 0;
}

// Optimized, whole-graph form: per step, capture with c_t and update the instantiated graph from it.
extern "C" int update_exec(void* state, const float* in, const float* coefs, int steps, cudaStream_t stream) {
  auto* u = static_cast<Updatable*>(state);
  CH12_TRY(cudaMemcpyAsync(u->out, in, sizeof(float) * u->n, cudaMemcpyDeviceToDevice, stream));
  for (int t = 0; t < steps; ++t) {
    cudaGraph_t graph;
    CH12_TRY(capture(*u, coefs[t], &graph));
    cudaGraphExecUpdateResultInfo info;
    cudaError_t err = cudaGraphExecUpdate(u->exec, graph, &info);
    cudaGraphDestroy(graph);
    CH12_TRY(err);
    CH12_TRY(cudaGraphLaunch(u->exec, stream));
  }
  return 0;
}

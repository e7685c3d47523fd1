// graph_update.cu: a denoising-style loop: `steps` launches of one graph (a chain of `nodes` tiny
// kernels out = a * out + c_t), where the scalar c_t changes at every step. Three ways to launch it:
//   update_recapture: capture and instantiate a new graph per step (the baseline);
//   update_setparams: one graph instantiated once, each kernel node's c_t set with
//                     cudaGraphExecKernelNodeSetParams before each launch;
//   update_exec:      capture per step, then cudaGraphExecUpdate into the one instantiated graph
//                     (same topology, new arguments), no instantiation;
//   update_template:  no capture: c_t written into the kept graph's nodes (host-side), then one
//                     cudaGraphExecUpdate into the next of a few execs (update_ring), taken in turn
//                     so the one updated is not the one the GPU is running; the call's first node
//                     reads the input (no input copy).
//   update_indirect:  no update at all: one exec per step, captured once with a pointer to its own
//                     device slot of c_t (affine_step_ref reads *c), so a call writes the steps' c_t
//                     and the input into device memory with one small kernel, then launches the execs;
//                     built with pdl, the chains' edges are programmatic (affine_step_ref_pdl).
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
  std::vector<cudaGraphExec_t> ring{};  // update_template's execs (update_ring), used in turn
  cudaGraphNode_t root = nullptr;         // the chain's first node (the one that reads the input)
  unsigned turn = 0;                      // launches so far, across calls: the next exec is ring[turn % size]
  std::vector<cudaGraphExec_t> per_step{};  // update_indirect's execs: step t's chain reads slots[t]
  float* slots = nullptr;                   // update_indirect's c_t of each step, in device memory
};

static cudaError_t capture(const Updatable& u, float c, cudaGraph_t* graph) {
  cudaError_t err = cudaStreamBeginCapture(u.capture, cudaStreamCaptureModeThreadLocal);
  if (err != cudaSuccess) return err;
  for (int k = 0; k < u.count; ++k) affine_step<<<blocks_for(u.n), kThreads, 0, u.capture>>>(u.out, u.out, u.n, u.a, c);
  return cudaStreamEndCapture(u.capture, graph);
}

// A kernel node of the chain: affine_step over n elements (the caller points kernelParams at its arguments).
static cudaKernelNodeParams step_params(int n) {
  cudaKernelNodeParams p = {};
  p.func = reinterpret_cast<void*>(affine_step);
  p.gridDim = dim3(blocks_for(n));
  p.blockDim = dim3(kThreads);
  return p;
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
  for (cudaGraphExec_t e : u->ring) cudaGraphExecDestroy(e);
  for (cudaGraphExec_t e : u->per_step) cudaGraphExecDestroy(e);
  if (u->slots) cudaFree(u->slots);
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
  cudaKernelNodeParams p = step_params(n);
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

// Setup for update_template: `count` execs instantiated from the kept graph, and its root node.
extern "C" int update_ring(void* state, int count) {
  auto* u = static_cast<Updatable*>(state);
  if (count <= 0 || !u->ring.empty()) return static_cast<int>(cudaErrorInvalidValue);
  size_t roots = 0;
  CH12_TRY(cudaGraphGetRootNodes(u->graph, nullptr, &roots));
  if (roots != 1) return static_cast<int>(cudaErrorInvalidValue);
  CH12_TRY(cudaGraphGetRootNodes(u->graph, &u->root, &roots));
  for (int k = 0; k < count; ++k) {
    cudaGraphExec_t e = nullptr;
    CH12_TRY(cudaGraphInstantiate(&e, u->graph, 0));
    u->ring.push_back(e);
  }
  return 0;
}

// Optimized, template form: per step, c_t (and for the first step the input as the root's source)
// set in the kept graph's nodes, which are host-side only, then one whole-graph cudaGraphExecUpdate
// into the next exec of the ring and its launch. The exec updated was last launched ring.size()
// launches ago: idle unless the host runs that far ahead of the GPU (correct either way: an update
// leaves launches already queued as they were).
extern "C" int update_template(void* state, const float* in, const float* coefs, int steps, cudaStream_t stream) {
  auto* u = static_cast<Updatable*>(state);
  if (u->ring.empty() || u->root == nullptr) return static_cast<int>(cudaErrorInvalidValue);
  if (steps <= 0) return static_cast<int>(cudaMemcpyAsync(u->out, in, sizeof(float) * u->n, cudaMemcpyDeviceToDevice, stream));
  float* out = u->out;
  const float* src = in;
  int n = u->n;
  float a = u->a, c = 0.0f;
  void* root_args[] = {&src, &out, &n, &a, &c};
  void* args[] = {&out, &out, &n, &a, &c};
  cudaKernelNodeParams p = step_params(n);
  for (int t = 0; t < steps; ++t) {
    c = coefs[t];
    src = t == 0 ? in : out;
    for (cudaGraphNode_t node : u->nodes) {
      p.kernelParams = node == u->root ? root_args : args;
      CH12_TRY(cudaGraphKernelNodeSetParams(node, &p));
    }
    cudaGraphExec_t exec = u->ring[u->turn++ % u->ring.size()];
    cudaGraphExecUpdateResultInfo info;
    CH12_TRY(cudaGraphExecUpdate(exec, u->graph, &info));
    CH12_TRY(cudaGraphLaunch(exec, stream));
  }
  return 0;
}

// out[i] = a * in[i] + *c: affine_step with its scalar read from device memory; the load of *c and of
// in[i] are independent, so they are in flight together.
__global__ void affine_step_ref(const float* in, float* out, int n, float a, const float* c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = fmaf(a, in[i], *c);
}

constexpr int kMaxSteps = 32;
struct Coefs {
  float c[kMaxSteps];
};

// A call's inputs into device memory in one launch: c_t of each step into slots, in into out.
__global__ void load_call(const float* in, float* out, int n, Coefs coefs, float* slots, int steps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
  if (i < steps) slots[i] = coefs.c[i];
}

// affine_step_ref for a PDL chain (update_slots with pdl): its scalar loaded before griddepcontrol.wait
// (the slots were written before the graph launched; no node writes them), its input after the wait
// and from L2 (__ldcg), as graph_replay.cu's affine_step_pdl; the successor is let launch on entry.
__global__ void affine_step_ref_pdl(const float* in, float* out, int n, float a, const float* c) {
  const float b = *c;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = fmaf(a, __ldcg(in + i), b);
}

// One step's chain on the capture stream: `count` kernels reading c; with pdl, every launch after the
// first carries the programmatic-serialization attribute (capture records programmatic edges).
static cudaError_t capture_step(const Updatable& u, const float* c, bool pdl) {
  if (!pdl) {
    for (int k = 0; k < u.count; ++k) affine_step_ref<<<blocks_for(u.n), kThreads, 0, u.capture>>>(u.out, u.out, u.n, u.a, c);
    return cudaGetLastError();
  }
  cudaLaunchAttribute attr = pdl_attribute();
  cudaLaunchConfig_t config = {dim3(blocks_for(u.n)), dim3(kThreads), 0, u.capture, &attr, 0};
  cudaError_t err = cudaSuccess;
  for (int k = 0; k < u.count && err == cudaSuccess; ++k) {
    config.numAttrs = k == 0 ? 0 : pdl_attribute_count();  // the first node follows no kernel of the capture
    err = cudaLaunchKernelEx(&config, affine_step_ref_pdl, static_cast<const float*>(u.out), u.out, u.n, u.a, c);
  }
  return err;
}

// Setup for update_indirect: `steps` execs, exec t the chain of `count` kernels reading slots[t]
// (pdl != 0: affine_step_ref_pdl launched with programmatic edges).
extern "C" int update_slots(void* state, int steps, int pdl) {
  auto* u = static_cast<Updatable*>(state);
  if (steps <= 0 || steps > kMaxSteps || !u->per_step.empty()) return static_cast<int>(cudaErrorInvalidValue);
  CH12_TRY(cudaMalloc(&u->slots, sizeof(float) * steps));
  for (int t = 0; t < steps; ++t) {
    cudaGraph_t graph;
    CH12_TRY(cudaStreamBeginCapture(u->capture, cudaStreamCaptureModeThreadLocal));
    cudaError_t err = capture_step(*u, u->slots + t, pdl != 0);
    cudaError_t end = cudaStreamEndCapture(u->capture, &graph);
    CH12_TRY(err);
    CH12_TRY(end);
    cudaGraphExec_t e = nullptr;
    err = cudaGraphInstantiate(&e, graph, 0);
    cudaGraphDestroy(graph);
    CH12_TRY(err);
    u->per_step.push_back(e);
  }
  return 0;
}

// Optimized, by reference: no graph is updated. One kernel writes the call's c_t into the device slots
// and copies the input into out (kernel arguments are copied at launch, so the host's coefs may change
// right after), then the steps' execs are launched in order; each of them reads its own slot.
extern "C" int update_indirect(void* state, const float* in, const float* coefs, int steps, cudaStream_t stream) {
  auto* u = static_cast<Updatable*>(state);
  if (steps < 0 || steps > static_cast<int>(u->per_step.size())) return static_cast<int>(cudaErrorInvalidValue);
  Coefs c = {};
  for (int t = 0; t < steps; ++t) c.c[t] = coefs[t];
  load_call<<<blocks_for(u->n > steps ? u->n : steps), kThreads, 0, stream>>>(in, u->out, u->n, c, u->slots, steps);
  CH12_TRY(cudaGetLastError());
  for (int t = 0; t < steps; ++t) CH12_TRY(cudaGraphLaunch(u->per_step[t], stream));
  return 0;
}

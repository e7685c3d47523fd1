// What chapter 12's CUDA C++ libraries share: a status-returning check, the small affine kernel the
// graph pairs chain, and helpers that add kernel and conditional nodes to a graph built by hand.
#pragma once
#include <cuda_runtime.h>

#define CH12_TRY(call)                                   \
  do {                                                   \
    cudaError_t err_ = (call);                           \
    if (err_ != cudaSuccess) return static_cast<int>(err_); \
  } while (0)

constexpr int kThreads = 256;

inline int blocks_for(int n) { return (n + kThreads - 1) / kThreads; }

// out[i] = a * in[i] + b: one tiny launch-bound step (n = a few thousand elements); in may be out.
__global__ void affine_step(const float* in, float* out, int n, float a, float b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = fmaf(a, in[i], b);
}

// 1 where the current GPU runs programmatic dependent launch (compute capability 9.0 and up), else 0:
// how many launch attributes a PDL chain passes.
inline unsigned pdl_attribute_count() {
  int device = 0, major = 0;
  bool known = cudaGetDevice(&device) == cudaSuccess &&
               cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess;
  return known && major >= 9 ? 1u : 0u;
}

// The launch attribute that makes a launch's edge from the kernel before it programmatic (captured as a
// programmatic graph edge): passed pdl_attribute_count() times.
inline cudaLaunchAttribute pdl_attribute() {
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  return attr;
}

// Adds a kernel node running fn<<<grid, block>>>(args...) after `deps` (the arguments are copied
// into the node when it is added, so `args` may point at locals).
inline cudaError_t add_kernel(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t ndeps,
                              void* fn, dim3 grid, dim3 block, void** args) {
  cudaKernelNodeParams p = {};
  p.func = fn;
  p.gridDim = grid;
  p.blockDim = block;
  p.kernelParams = args;
  return cudaGraphAddKernelNode(node, graph, deps, ndeps, &p);
}

// Adds a conditional node (cudaGraphCondTypeIf or cudaGraphCondTypeWhile) on `handle` after `deps`;
// *body receives the empty graph it runs, for the caller to fill.
inline cudaError_t add_conditional(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                   size_t ndeps, cudaGraphConditionalHandle handle,
                                   cudaGraphConditionalNodeType type, cudaGraph_t* body) {
  cudaGraphNodeParams p = {};
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = handle;
  p.conditional.type = type;
  p.conditional.size = 1;
  cudaError_t err = cudaGraphAddNode(node, graph, deps, nullptr, ndeps, &p);
  if (err == cudaSuccess) *body = p.conditional.phGraph_out[0];
  return err;
}

// Entry points every graph library exports (each .cu is its own shared library).
// One launch of an instantiated graph (a cudaGraphExec_t) on `stream`.
extern "C" int graph_launch(void* exec, cudaStream_t stream) {
  return static_cast<int>(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), stream));
}

// x = in (n floats), then one launch of the graph: for graphs that work in place on x.
extern "C" int copy_then_launch(const float* in, float* x, int n, void* exec, cudaStream_t stream) {
  CH12_TRY(cudaMemcpyAsync(x, in, sizeof(float) * n, cudaMemcpyDeviceToDevice, stream));
  return graph_launch(exec, stream);
}

extern "C" int graph_destroy(void* exec) {
  return static_cast<int>(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec)));
}

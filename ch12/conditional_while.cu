// conditional_while.cu: a loop whose trip count the data decides, driven from the host (a D2H copy
// and a sync per pass) or by a WHILE conditional graph node (CUDA 12.4+; CUDA 13 API).
// Built as a shared library by aisp.kits.native (ch12/baseline_conditional_while.py).
//
// The loop: x <- cos(x) elementwise until no element moves by more than tol (the fixed point
// 0.739...), at most max_iters passes. Host: step, copy the "still moving" flag D2H, sync, decide.
// Graph: a WHILE node whose body is the step and a one-thread kernel that sets the condition.
#include "ch12_common.cuh"

struct Loop { int flag, iters; };  // device state of the WHILE loop (an int32 tensor of 2)

// One pass. The "still moving" flag is one word every block may set: one store a block (after
// __syncthreads_or), not one a warp, so at most 256 stores a pass queue at that word's L2 slice, not
// 2,048 (nearly every warp moves in nearly every pass).
__global__ void cos_step(float* x, int n, float tol, int* moving) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  bool moved = false;
  if (i < n) {
    float v = x[i], next = cosf(v);
    x[i] = next;
    moved = fabsf(next - v) > tol;
  }
  if (__syncthreads_or(moved) && threadIdx.x == 0) *moving = 1;  // every writer stores the same value
}

__global__ void loop_reset(Loop* loop) { loop->flag = 0; loop->iters = 0; }

// x = in, and the loop reset: the graph's first node when the input copy is part of the graph.
__global__ void copy_and_reset(const float* __restrict__ in, float* __restrict__ x, int n, Loop* loop) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = in[i];
  if (i == 0) {
    loop->flag = 0;
    loop->iters = 0;
  }
}

__global__ void loop_decide(Loop* loop, int max_iters, cudaGraphConditionalHandle handle) {
  int passes = ++loop->iters;
  int again = loop->flag != 0 && passes < max_iters;
  loop->flag = 0;
  cudaGraphSetConditional(handle, again);
}

// Host-driven loop; *iters_out = passes run.
extern "C" int while_host(const float* in, float* x, int n, float tol, int max_iters, Loop* loop,
                          int* pinned_flag, int* iters_out, cudaStream_t stream) {
  CH12_TRY(cudaMemcpyAsync(x, in, sizeof(float) * n, cudaMemcpyDeviceToDevice, stream));
  int it = 0;
  while (it < max_iters) {
    CH12_TRY(cudaMemsetAsync(&loop->flag, 0, sizeof(int), stream));
    cos_step<<<blocks_for(n), kThreads, 0, stream>>>(x, n, tol, &loop->flag);
    CH12_TRY(cudaMemcpyAsync(pinned_flag, &loop->flag, sizeof(int), cudaMemcpyDeviceToHost, stream));
    CH12_TRY(cudaStreamSynchronize(stream));
    ++it;
    if (*pinned_flag == 0) break;
  }
  *iters_out = it;
  return static_cast<int>(cudaGetLastError());
}

// Graph: first -> WHILE(handle, default 1) { cos_step; loop_decide }. first: loop_reset when in is
// null (the caller copies in to x before each launch), else copy_and_reset (x = in inside the graph:
// one launch a call, nothing before it).
static int build(const float* in, float* x, int n, float tol, int max_iters, Loop* loop, void** exec_out) {
  cudaGraph_t graph, body;
  CH12_TRY(cudaGraphCreate(&graph, 0));
  cudaGraphConditionalHandle handle;
  CH12_TRY(cudaGraphConditionalHandleCreate(&handle, graph, 1, cudaGraphCondAssignDefault));
  cudaGraphNode_t first, cond, step, decide;
  if (in == nullptr) {
    void* reset_args[] = {&loop};
    CH12_TRY(add_kernel(&first, graph, nullptr, 0, reinterpret_cast<void*>(loop_reset), 1, 1, reset_args));
  } else {
    void* copy_args[] = {&in, &x, &n, &loop};
    CH12_TRY(add_kernel(&first, graph, nullptr, 0, reinterpret_cast<void*>(copy_and_reset), blocks_for(n), kThreads,
                        copy_args));
  }
  CH12_TRY(add_conditional(&cond, graph, &first, 1, handle, cudaGraphCondTypeWhile, &body));
  int* flag = &loop->flag;
  void* step_args[] = {&x, &n, &tol, &flag};
  CH12_TRY(add_kernel(&step, body, nullptr, 0, reinterpret_cast<void*>(cos_step), blocks_for(n), kThreads, step_args));
  void* decide_args[] = {&loop, &max_iters, &handle};
  CH12_TRY(add_kernel(&decide, body, &step, 1, reinterpret_cast<void*>(loop_decide), 1, 1, decide_args));
  cudaError_t err = cudaGraphInstantiate(reinterpret_cast<cudaGraphExec_t*>(exec_out), graph, 0);
  cudaGraphDestroy(graph);
  return static_cast<int>(err);
}

// The graph without the input copy: launch it with copy_then_launch.
extern "C" int while_build(float* x, int n, float tol, int max_iters, Loop* loop, void** exec_out) {
  return build(nullptr, x, n, tol, max_iters, loop, exec_out);
}

// The graph that copies in to x itself: launch it with graph_launch (in's address is fixed in it).
extern "C" int while_build_in_graph(const float* in, float* x, int n, float tol, int max_iters, Loop* loop,
                                    void** exec_out) {
  if (in == nullptr) return static_cast<int>(cudaErrorInvalidValue);
  return build(in, x, n, tol, max_iters, loop, exec_out);
}

// conditional_if.cu: a branch per stage decided on the host (a D2H copy and a sync per stage) or by
// IF conditional graph nodes (CUDA 12.4+; CUDA 13 API).
// Built as a shared library by aisp.kits.native (ch12/baseline_conditional_if.py).
//
// `stages` stages of clip-then-grow: if ||x|| > thr[s], x *= thr[s] / ||x|| (the branch); then
// x *= grow (always). Host: reduce, copy the flag D2H, sync, maybe launch the clip, grow. Graph: per
// stage reduce -> set the handle -> IF { clip } -> grow, all in one launch.
#include "ch12_common.cuh"

constexpr int kReduceThreads = 1024;

// One block: sum of squares of x (fixed order), then *flag = ||x|| > thr and *scale = thr / ||x||.
__global__ void norm_check(const float* x, int n, float thr, int* flag, float* scale) {
  __shared__ float part[kReduceThreads];
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s = fmaf(x[i], x[i], s);
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    float norm = sqrtf(part[0]);
    *flag = norm > thr;
    *scale = thr / norm;
  }
}

__global__ void scale_by(float* x, int n, const float* scale) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= *scale;
}

__global__ void set_if(const int* flag, cudaGraphConditionalHandle handle) { cudaGraphSetConditional(handle, *flag); }

static void grow(float* x, int n, float g, cudaStream_t s) { affine_step<<<blocks_for(n), kThreads, 0, s>>>(x, x, n, g, 0.0f); }

// Host-driven: thr (host array of `stages`), flags/scales (device arrays of `stages`), pinned_flag
// (one pinned int).
extern "C" int if_host(const float* in, float* x, int n, int stages, const float* thr, float g, int* flags,
                       float* scales, int* pinned_flag, cudaStream_t stream) {
  CH12_TRY(cudaMemcpyAsync(x, in, sizeof(float) * n, cudaMemcpyDeviceToDevice, stream));
  for (int s = 0; s < stages; ++s) {
    norm_check<<<1, kReduceThreads, 0, stream>>>(x, n, thr[s], flags + s, scales + s);
    CH12_TRY(cudaMemcpyAsync(pinned_flag, flags + s, sizeof(int), cudaMemcpyDeviceToHost, stream));
    CH12_TRY(cudaStreamSynchronize(stream));
    if (*pinned_flag) scale_by<<<blocks_for(n), kThreads, 0, stream>>>(x, n, scales + s);
    grow(x, n, g, stream);
  }
  return static_cast<int>(cudaGetLastError());
}

// Adds one stage after *last (or at the root when *last is null); *last becomes its grow node.
static cudaError_t add_stage(cudaGraph_t graph, cudaGraphNode_t* last, float* x, int n, float thr, float g,
                             int* flag, float* scale) {
  cudaGraphConditionalHandle handle;
  cudaError_t err = cudaGraphConditionalHandleCreate(&handle, graph, 0, cudaGraphCondAssignDefault);
  cudaGraphNode_t check, set, cond, clip, grown;
  cudaGraph_t body;
  size_t ndeps = *last ? 1 : 0;
  void* check_args[] = {&x, &n, &thr, &flag, &scale};
  void* set_args[] = {&flag, &handle};
  void* clip_args[] = {&x, &n, &scale};
  float zero = 0.0f;
  void* grow_args[] = {&x, &x, &n, &g, &zero};
  if (err == cudaSuccess)
    err = add_kernel(&check, graph, last, ndeps, reinterpret_cast<void*>(norm_check), 1, kReduceThreads, check_args);
  if (err == cudaSuccess) err = add_kernel(&set, graph, &check, 1, reinterpret_cast<void*>(set_if), 1, 1, set_args);
  if (err == cudaSuccess) err = add_conditional(&cond, graph, &set, 1, handle, cudaGraphCondTypeIf, &body);
  if (err == cudaSuccess)
    err = add_kernel(&clip, body, nullptr, 0, reinterpret_cast<void*>(scale_by), blocks_for(n), kThreads, clip_args);
  if (err == cudaSuccess)
    err = add_kernel(&grown, graph, &cond, 1, reinterpret_cast<void*>(affine_step), blocks_for(n), kThreads, grow_args);
  if (err == cudaSuccess) *last = grown;
  return err;
}

extern "C" int if_build(float* x, int n, int stages, const float* thr, float g, int* flags, float* scales,
                        void** exec_out) {
  cudaGraph_t graph;
  CH12_TRY(cudaGraphCreate(&graph, 0));
  cudaGraphNode_t last = nullptr;
  cudaError_t err = cudaSuccess;
  for (int s = 0; s < stages && err == cudaSuccess; ++s) err = add_stage(graph, &last, x, n, thr[s], g, flags + s, scales + s);
  if (err == cudaSuccess) err = cudaGraphInstantiate(reinterpret_cast<cudaGraphExec_t*>(exec_out), graph, 0);
  cudaGraphDestroy(graph);
  return static_cast<int>(err);
}

// device_graph_launch.cu: an estimate x (n floats) serves `requests` measurements z[r] in order. A gate
// kernel takes mean((z[r] - x)^2): at most thr2, the update path graph runs (blend, smooth: 2 kernels);
// above it (the level moved), the re-estimate path graph (4 smoothing passes of z[r]); either leaves
// the new x in out[r]. Host: the host copies the gate's choice back, syncs and launches the graph.
// Device: the gate, the node of a scheduler graph, launches the path graph itself (device graph launch,
// CUDA 12.0+), then its own graph for the next request. Needs -rdc=true -lcudadevrt
// (ch12/baseline_device_graph_launch.py); without them dgl_scheduler refuses.
#include "ch12_common.cuh"

constexpr int kGateThreads = 1024;
enum Path { kUpdate = 0, kReestimate = 1, kPaths = 2 };
enum Mode { kTail = 1, kFireAndForget = 2 };  // how the scheduler launches a path graph

struct Ctl { int next, cur, choice, err; };  // control block (an int32 tensor of 4); err: a failed device launch

struct Requests {
  const float* z;                  // [requests, n] measurements
  float *x, *tmp, *out;            // estimate, scratch, [requests, n] estimate after each request
  int* routes; Ctl* ctl;           // [requests] path taken; control block
  int n, requests; float k, thr2;  // blend gain; innovation threshold
};

struct Dispatch { cudaGraphExec_t path[kPaths]; int mode; };

// One block: the path for request ctl->next from mean((z[r] - x)^2) (fixed summation order), recorded
// in routes[r] and ctl; kDevice: thread 0 then launches that path's graph and, unless r is the last
// request, its own graph again as a tail launch (runs after the path: tail launches run in order).
template <bool kDevice>
__global__ void gate(Requests q, Dispatch d) {
  __shared__ float part[kGateThreads];
  int r = q.ctl->next;
  const float* z = q.z + static_cast<size_t>(r) * q.n;
  float s = 0.0f;
  for (int i = threadIdx.x; i < q.n; i += blockDim.x) {
    float e = z[i] - q.x[i];
    s = fmaf(e, e, s);
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  int path = part[0] > q.thr2 * static_cast<float>(q.n) ? kReestimate : kUpdate;
  q.routes[r] = path;
  *q.ctl = Ctl{r + 1, r, path, 0};  // err stays 0 unless a launch below fails, which ends the loop
  if constexpr (kDevice) {
#ifdef __CUDACC_RDC__  // device-side launches need relocatable device code (-rdc=true)
    __threadfence();   // the path reads ctl->cur; a fire-and-forget graph starts at once
    cudaStream_t how = d.mode == kTail ? cudaStreamGraphTailLaunch : cudaStreamGraphFireAndForget;
    cudaError_t err = cudaGraphLaunch(d.path[path], how);
    if (err == cudaSuccess && r + 1 < q.requests)  // the next request's gate, once this graph (and its path) is done
      err = cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch);
    if (err != cudaSuccess) q.ctl->err = static_cast<int>(err);
#endif
  }
}

// blend: tmp = x + k (z[cur] - x). smooth: dst = (1 2 1) / 4 smoothing of src's row cur (src_stride n)
// or of src (stride 0), edges repeated; out (unless null) gets dst as its row cur.
__global__ void blend(const float* z, const float* x, float* tmp, const Ctl* ctl, int n, float k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) tmp[i] = fmaf(k, z[static_cast<size_t>(ctl->cur) * n + i] - x[i], x[i]);
}

__global__ void smooth(const float* src, int src_stride, float* dst, float* out, const Ctl* ctl, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float* s = src + static_cast<size_t>(ctl->cur) * src_stride;
  float v = 0.25f * s[max(i - 1, 0)] + 0.5f * s[i] + 0.25f * s[min(i + 1, n - 1)];
  dst[i] = v;
  if (out) out[static_cast<size_t>(ctl->cur) * n + i] = v;
}

static void launch_path(int path, const Requests& q, cudaStream_t s) {
  int g = blocks_for(q.n);
  if (path == kUpdate) {
    blend<<<g, kThreads, 0, s>>>(q.z, q.x, q.tmp, q.ctl, q.n, q.k);
    smooth<<<g, kThreads, 0, s>>>(q.tmp, 0, q.x, q.out, q.ctl, q.n);
    return;
  }
  smooth<<<g, kThreads, 0, s>>>(q.z, q.n, q.tmp, nullptr, q.ctl, q.n);  // re-estimate: z[cur] -> tmp -> x -> tmp -> x
  smooth<<<g, kThreads, 0, s>>>(q.tmp, 0, q.x, nullptr, q.ctl, q.n);
  smooth<<<g, kThreads, 0, s>>>(q.x, 0, q.tmp, nullptr, q.ctl, q.n);
  smooth<<<g, kThreads, 0, s>>>(q.tmp, 0, q.x, q.out, q.ctl, q.n);
}

// launch(s) captured and instantiated; device_launch: launchable from the GPU and uploaded there (required).
template <class Launch>
static cudaError_t capture(Launch launch, bool device_launch, cudaStream_t stream, void** exec_out) {
  cudaStream_t s;
  cudaError_t err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (err != cudaSuccess) return err;
  cudaGraph_t graph = nullptr;
  auto exec = reinterpret_cast<cudaGraphExec_t*>(exec_out);
  *exec = nullptr;
  err = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  if (err == cudaSuccess) {
    launch(s);
    err = cudaStreamEndCapture(s, &graph);
  }
  if (err == cudaSuccess) err = cudaGraphInstantiate(exec, graph, device_launch ? cudaGraphInstantiateFlagDeviceLaunch : 0);
  if (err == cudaSuccess && device_launch) err = cudaGraphUpload(*exec, stream);
  if (graph) cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  return err;
}

// Each path's graph into paths[p] (device_launch: launchable from the GPU).
extern "C" int dgl_paths(Requests q, int device_launch, void** paths, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  for (int p = 0; p < kPaths && err == cudaSuccess; ++p)
    err = capture([&](cudaStream_t s) { launch_path(p, q, s); }, device_launch != 0, stream, &paths[p]);
  return static_cast<int>(err);
}

static cudaError_t start(const Requests& q, cudaStream_t stream) {  // every call: x = 0, from request 0
  cudaError_t err = cudaMemsetAsync(q.ctl, 0, sizeof(Ctl), stream);
  return err == cudaSuccess ? cudaMemsetAsync(q.x, 0, sizeof(float) * q.n, stream) : err;
}

// Host-driven: per request the gate, its choice copied to pinned_choice (pinned), a sync, the path's graph.
extern "C" int dgl_host(Requests q, void* const* paths, int* pinned_choice, cudaStream_t stream) {
  CH12_TRY(start(q, stream));
  for (int r = 0; r < q.requests; ++r) {
    gate<false><<<1, kGateThreads, 0, stream>>>(q, Dispatch{});
    CH12_TRY(cudaMemcpyAsync(pinned_choice, &q.ctl->choice, sizeof(int), cudaMemcpyDeviceToHost, stream));
    CH12_TRY(cudaStreamSynchronize(stream));
    CH12_TRY(cudaGraphLaunch(static_cast<cudaGraphExec_t>(paths[*pinned_choice]), stream));
  }
  return static_cast<int>(cudaGetLastError());
}

// The scheduler: one gate<true> node over the paths (dgl_paths, device_launch), launchable from the GPU.
extern "C" int dgl_scheduler(Requests q, void* const* paths, int mode, void** exec_out, cudaStream_t stream) {
#ifdef __CUDACC_RDC__
  Dispatch d = {{static_cast<cudaGraphExec_t>(paths[0]), static_cast<cudaGraphExec_t>(paths[1])}, mode};
  auto launch = [&](cudaStream_t s) { gate<true><<<1, kGateThreads, 0, s>>>(q, d); };
  return static_cast<int>(capture(launch, true, stream, exec_out));
#else
  return static_cast<int>(cudaErrorNotSupported);  // built without -rdc=true: no device launches
#endif
}

// One call: reset, then one host launch of the scheduler graph; the GPU runs every request.
extern "C" int dgl_device(Requests q, void* scheduler, cudaStream_t stream) {
  CH12_TRY(start(q, stream));
  return graph_launch(scheduler, stream);
}

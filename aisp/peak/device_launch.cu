// Device-side launch floors of `aisp peak` (aisp/peak/device_launch.py). First an empty kernel that
// tail-launches itself (cudaStreamTailLaunch, as each level of a dynamic-parallelism loop does) until a
// chain of `links` grids has run. Chains launched back to back keep the GPU on the chain, so a window
// of them divided by its links is one device-launched grid: the launch and an empty kernel.
// Built with -rdc=true -lcudadevrt (device-side launches need the device runtime).

__global__ void tail_chain(int remaining, int* ran) {
  if (threadIdx.x == 0) {
    ran[0] += 1;  // one block, one writing thread, and links run one after another: no race
    if (remaining > 1) tail_chain<<<1, 32, 0, cudaStreamTailLaunch>>>(remaining - 1, ran);
  }
}

// One chain of `links` grids on `stream` (the first launched from the host); the launch status.
extern "C" int device_tail_chain(int links, int* ran, cudaStream_t stream) {
  tail_chain<<<1, 32, 0, stream>>>(links, ran);
  return static_cast<int>(cudaGetLastError());
}

// Device graph launch: a one-kernel graph, instantiated for device launch and uploaded, whose kernel
// launches its own graph again (cudaGetCurrentGraphExec, cudaStreamGraphTailLaunch: after this one
// ends), as ch12:device_graph_launch's scheduler does. The grids that ran are counted in ran[0]; a
// chain ends where the count reaches a multiple of `links`, so chains go back to back with no reset.
// A failed device launch leaves its error in ran[1].
__global__ void graph_chain(int links, int* ran) {
  if (threadIdx.x == 0) {
    int n = ++ran[0];
    if (n % links != 0) {
      cudaError_t err = cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch);
      if (err != cudaSuccess) ran[1] = static_cast<int>(err);
    }
  }
}

// The chain's graph, captured on a stream of its own, instantiated for device launch and uploaded.
extern "C" int device_graph_chain_create(int links, int* ran, cudaStream_t stream, void** exec_out) {
  cudaStream_t s;
  cudaError_t err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (err != cudaSuccess) return static_cast<int>(err);
  cudaGraph_t graph = nullptr;
  auto exec = reinterpret_cast<cudaGraphExec_t*>(exec_out);
  *exec = nullptr;
  err = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  if (err == cudaSuccess) {
    graph_chain<<<1, 32, 0, s>>>(links, ran);
    err = cudaStreamEndCapture(s, &graph);
  }
  if (err == cudaSuccess) err = cudaGraphInstantiate(exec, graph, cudaGraphInstantiateFlagDeviceLaunch);
  if (err == cudaSuccess) err = cudaGraphUpload(*exec, stream);
  if (graph) cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  return static_cast<int>(err);
}

extern "C" int device_graph_chain_launch(void* exec, cudaStream_t stream) {
  return static_cast<int>(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), stream));
}

extern "C" int device_graph_chain_destroy(void* exec) {
  return static_cast<int>(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec)));
}

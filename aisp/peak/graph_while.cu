// Conditional-node floor of `aisp peak` (aisp/peak/graph_while.py): one pass of a WHILE graph node
// (CUDA 12.4+) whose body is one kernel that counts the pass and sets the condition, as
// ch12:conditional_while's loop_decide does. The graph is that one WHILE node; each launch runs
// `passes` passes (the count stops at a multiple of it, so launches go back to back with no reset),
// and the window per pass is one iteration: the conditional's own cost and its one-kernel body.

__global__ void while_count(int* ran, int passes, cudaGraphConditionalHandle handle) {
  int n = ++ran[0];
  cudaGraphSetConditional(handle, n % passes != 0);
}

// The graph: WHILE(handle, default 1 at each launch) { while_count }, instantiated into *exec_out.
extern "C" int while_graph_create(int* ran, int passes, void** exec_out) {
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaGraphCreate(&graph, 0);
  cudaGraphConditionalHandle handle;
  if (err == cudaSuccess) err = cudaGraphConditionalHandleCreate(&handle, graph, 1, cudaGraphCondAssignDefault);
  cudaGraphNodeParams cond = {};
  cond.type = cudaGraphNodeTypeConditional;
  cond.conditional.handle = handle;
  cond.conditional.type = cudaGraphCondTypeWhile;
  cond.conditional.size = 1;
  cudaGraphNode_t node, kernel;
  if (err == cudaSuccess) err = cudaGraphAddNode(&node, graph, nullptr, nullptr, 0, &cond);
  if (err == cudaSuccess) {
    void* args[] = {&ran, &passes, &handle};
    cudaKernelNodeParams k = {};
    k.func = reinterpret_cast<void*>(while_count);
    k.gridDim = dim3(1);
    k.blockDim = dim3(1);
    k.kernelParams = args;
    err = cudaGraphAddKernelNode(&kernel, cond.conditional.phGraph_out[0], nullptr, 0, &k);
  }
  if (err == cudaSuccess) err = cudaGraphInstantiate(reinterpret_cast<cudaGraphExec_t*>(exec_out), graph, 0);
  if (graph) cudaGraphDestroy(graph);
  return static_cast<int>(err);
}

extern "C" int while_graph_launch(void* exec, cudaStream_t stream) {
  return static_cast<int>(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), stream));
}

extern "C" int while_graph_destroy(void* exec) {
  return static_cast<int>(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec)));
}

// Dependent graph-node floor of `aisp peak` (aisp/peak/latency.py, dependent_nodes): the smallest kernel
// that reads a value the kernel before it wrote and writes the one the next reads. One thread loads
// *x, adds 1 and stores it back; captured N times in a CUDA graph, each node waits for the previous
// grid's completion (and the flush of its store), then loads what it stored. The count the chain
// leaves in *x is checked against the nodes launched.

__global__ void bump(int* x) { *x += 1; }

// One bump<<<1, 1>>> on `stream` (captured when the stream is capturing).
extern "C" int bump_launch(int* x, cudaStream_t stream) {
  bump<<<1, 1, 0, stream>>>(x);
  return static_cast<int>(cudaGetLastError());
}

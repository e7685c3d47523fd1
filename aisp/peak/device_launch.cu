// Device-side launch floor of `aisp peak` (aisp/peak/device_launch.py): an empty kernel that
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

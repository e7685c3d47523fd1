// ch11_kernels.cu: a small, latency-bound kernel, and the legacy-default-stream pattern chapter 11
// launches it in. Built as a shared library by aisp.kits.native (ch11/ch11_common.py).
//
// fma_chain: each thread runs `iters` dependent FMAs on one element (v <- 0.9999 v + 1e-4), so a
// launch of 8 blocks x 256 threads keeps 8 SMs busy for ~4 * iters cycles and leaves the other
// 124 SMs of an H100/H200 idle: the "small independent kernel" that streams can run side by side.
#include <cuda_runtime.h>

constexpr int kThreads = 256;

__global__ void fma_chain(const float* __restrict__ in, float* __restrict__ out, int n, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = in[i];
  for (int k = 0; k < iters; ++k) v = fmaf(v, 0.9999f, 1e-4f);
  out[i] = v;
}

static int blocks_for(int n) { return (n + kThreads - 1) / kThreads; }

// One fma_chain launch of n elements on `stream`.
extern "C" int small_kernel(const float* in, float* out, int n, int iters, cudaStream_t stream) {
  if (n <= 0 || iters < 0) return static_cast<int>(cudaErrorInvalidValue);
  fma_chain<<<blocks_for(n), kThreads, 0, stream>>>(in, out, n, iters);
  return static_cast<int>(cudaGetLastError());
}

// Two worker streams per mode, created once: mode 0 and 2 with cudaStreamCreate (blocking: they
// synchronize with the legacy default stream), mode 1 with cudaStreamNonBlocking.
struct Workers {
  cudaStream_t stream[2];
  cudaEvent_t start, done[3];
};

static Workers* workers(int mode) {
  static Workers made[3];
  static bool ready[3] = {false, false, false};
  Workers& w = made[mode];
  if (!ready[mode]) {
    unsigned flags = mode == 1 ? cudaStreamNonBlocking : cudaStreamDefault;
    for (cudaStream_t& s : w.stream) {
      if (cudaStreamCreateWithFlags(&s, flags) != cudaSuccess) return nullptr;
    }
    if (cudaEventCreateWithFlags(&w.start, cudaEventDisableTiming) != cudaSuccess) return nullptr;
    for (cudaEvent_t& e : w.done) {
      if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) return nullptr;
    }
    ready[mode] = true;
  }
  return &w;
}

// Three independent jobs of `steps` fma_chain launches each: jobs 0 and 1 on the two worker
// streams, job 2 (the application's own work) on the default stream: the legacy default stream
// (mode 0 and 1) or the per-thread default stream (mode 2, what `nvcc --default-stream per-thread`
// makes of a launch without a stream). x and out hold [3][steps][n] floats. The workers start after
// the caller's prior work and the caller waits for all three jobs, so the call's work is all in
// the caller's stream order.
//   mode 0: blocking workers + legacy stream: every legacy launch waits for all work queued before
//           it in both workers, and their later launches wait for it: the jobs take turns.
//   mode 1: non-blocking workers: no implicit synchronization; the three jobs overlap.
//   mode 2: blocking workers + per-thread default stream: it synchronizes only with the legacy
//           stream, so the three jobs overlap too.
extern "C" int legacy_run(int mode, const float* x, float* out, int steps, int n, int iters,
                          cudaStream_t caller) {
  if (mode < 0 || mode > 2 || steps <= 0 || n <= 0) return static_cast<int>(cudaErrorInvalidValue);
  Workers* w = workers(mode);
  if (w == nullptr) return static_cast<int>(cudaErrorUnknown);
  cudaStream_t app = mode == 2 ? cudaStreamPerThread : cudaStreamLegacy;
  cudaStream_t job[3] = {w->stream[0], w->stream[1], app};
  cudaEventRecord(w->start, caller);
  for (cudaStream_t s : job) cudaStreamWaitEvent(s, w->start, 0);
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < 3; ++j) {
      size_t offset = (static_cast<size_t>(j) * steps + i) * n;
      fma_chain<<<blocks_for(n), kThreads, 0, job[j]>>>(x + offset, out + offset, n, iters);
    }
  }
  for (int j = 0; j < 3; ++j) {
    cudaEventRecord(w->done[j], job[j]);
    cudaStreamWaitEvent(caller, w->done[j], 0);
  }
  return static_cast<int>(cudaGetLastError());
}

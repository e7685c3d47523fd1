// ch11_kernels.cu: a small, latency-bound kernel, and the legacy-default-stream pattern chapter 11
// launches it in. Built as a shared library by aisp.kits.native (ch11/ch11_common.py).
//
// fma_chain: each thread runs `iters` dependent FMAs on one element (v <- 0.9999 v + 1e-4), so a
// launch of 8 blocks x 256 threads keeps 8 SMs busy for ~4 * iters cycles and leaves the other
// 124 SMs of an H100/H200 idle: the "small independent kernel" that streams can run side by side.
// The chain's loop stays the plain `for (k < iters)` with immediate constants (16 FFMAs a trip in
// sm_90 SASS). Unrolled 64 a trip with a and b as kernel arguments, as aisp/peak/fma_latency.cu's
// floor is, every kernel of ch11 measured ~10% slower on an H200 (2026-11-29: legacy_default_stream's
// baseline 1.842 against 1.676 ms, stream_priority's 3.692 against 3.466), so that loop was reverted.
//
// fma_chain<kPdl, true> (the `_unrolled` variants only) runs the same FMAs in fma_dependent's loop
// shape: 64 a trip (ptxas makes it 128), then the rest. Static cycles of the main loop (sm_90 SASS,
// stall counts from the first FFMA of a trip to the next trip's): 515 per 128 FMAs, 4.02 an FMA, the
// floor's, against the plain loop's 67 per 16 (4.19: the back edge every 16 FMAs). The reverted loop had
// the floor's 4.02 static cycles too, yet ran ~10% slower than the plain one: its FFMA R8, R8, R2, R3 read
// a and b from registers, two sources in one register bank, the likely cost with two warps on each SM
// sub-partition (the floor ran the same FFMAs at 4.05 cycles with one warp). So here b stays an
// immediate and `a` one register in the other bank from v, as in the plain loop; `a` is 0.9999f through
// an OR with a bit threadIdx.x never has, so ptxas keeps it in its register instead of rebuilding the
// constant at the top of every trip (10 more stall cycles per 128 FMAs). Same fmaf calls in the same
// order: the plain loop's result bit for bit.
//
// Programmatic dependent launch (PDL, sm_90+): launched with
// cudaLaunchAttributeProgrammaticStreamSerialization, the next kernel of a stream may start while
// this one runs. Its blocks become resident and wait in griddepcontrol.wait, which returns once the
// kernel before it in the stream has completed and its writes are visible: the chain of kernels keeps
// its order, only the launch, the block placement (and, where the input is not the previous kernel's
// output, the load) move off the chain. Each kernel lets its successor launch once its own wait is
// over (griddepcontrol.launch_dependents), so one kernel at a time waits ahead. Launched without the
// attribute, both instructions are no-ops.
#include <cuda_runtime.h>

constexpr int kThreads = 256;
constexpr int kTrip = 64;                    // FMAs a trip of the unrolled loop
constexpr unsigned kABits = 0x3f7ff972u;     // 0.9999f, the chain's a

// How fma_chain meets the kernel before it in its stream.
enum Pdl : int {
  kPlain = 0,         // an ordinary launch: it starts after the previous kernel has completed
  kWaitThenLoad = 1,  // PDL; its input is the previous kernel's output: load after the wait
  kLoadThenWait = 2,  // PDL; its input no earlier kernel writes: load, then wait
};

__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void let_next_grid_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <int kPdl, bool kUnrolled = false>
__global__ void fma_chain(const float* __restrict__ in, float* __restrict__ out, int n, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = 0.0f;
  if (kPdl == kLoadThenWait) v = __ldcg(in + i);
  if (kPdl != kPlain) {
    wait_for_previous_grid();
    let_next_grid_launch();
  }
  if (kPdl == kWaitThenLoad) v = __ldcg(in + i);  // L2, not a read-only line cached before the wait
  if (kPdl == kPlain) v = in[i];
  if (kUnrolled) {
    const float a = __uint_as_float(kABits | (threadIdx.x & 0x80000000u));  // threadIdx.x < 1024: a = 0.9999f
    const int trips = iters / kTrip;
    for (int t = 0; t < trips; ++t) {
#pragma unroll
      for (int u = 0; u < kTrip; ++u) v = fmaf(v, a, 1e-4f);
    }
    for (int k = trips * kTrip; k < iters; ++k) v = fmaf(v, a, 1e-4f);
  } else {
    for (int k = 0; k < iters; ++k) v = fmaf(v, 0.9999f, 1e-4f);
  }
  out[i] = v;
}

static int blocks_for(int n, int threads = kThreads) { return (n + threads - 1) / threads; }

// Whether the current GPU runs programmatic dependent launches (compute capability 9.0 and up).
static bool pdl_supported() {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
  return major >= 9;
}

// fma_chain<kPdl, kUnrolled> over n elements in blocks of `threads` on `stream`; kPdl != kPlain
// launches it with PDL (an ordinary launch before Hopper, where the kernel's griddepcontrol
// instructions are compiled out).
template <int kPdl, bool kUnrolled = false>
static cudaError_t launch_chain(const float* in, float* out, int n, int iters, cudaStream_t stream,
                                int threads = kThreads) {
  if (kPdl == kPlain || !pdl_supported()) {
    fma_chain<kPdl, kUnrolled><<<blocks_for(n, threads), threads, 0, stream>>>(in, out, n, iters);
    return cudaGetLastError();
  }
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks_for(n, threads));
  config.blockDim = dim3(threads);
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, fma_chain<kPdl, kUnrolled>, in, out, n, iters);
}

// One fma_chain launch of n elements on `stream`.
extern "C" int small_kernel(const float* in, float* out, int n, int iters, cudaStream_t stream) {
  if (n <= 0 || iters < 0) return static_cast<int>(cudaErrorInvalidValue);
  return static_cast<int>(launch_chain<kPlain>(in, out, n, iters, stream));
}

// small_kernel launched with PDL, for a chain whose kernels each read the one before's output.
extern "C" int small_kernel_pdl(const float* in, float* out, int n, int iters, cudaStream_t stream) {
  if (n <= 0 || iters < 0) return static_cast<int>(cudaErrorInvalidValue);
  return static_cast<int>(launch_chain<kWaitThenLoad>(in, out, n, iters, stream));
}

// small_kernel (pdl == 0) or small_kernel_pdl (pdl != 0) with the unrolled loop, in blocks of
// `threads` (a multiple of 32, at most 1024).
extern "C" int small_kernel_unrolled(const float* in, float* out, int n, int iters, int pdl, int threads,
                                     cudaStream_t stream) {
  if (n <= 0 || iters < 0 || threads < 32 || threads > 1024 || threads % 32 != 0)
    return static_cast<int>(cudaErrorInvalidValue);
  cudaError_t err = pdl ? launch_chain<kWaitThenLoad, true>(in, out, n, iters, stream, threads)
                        : launch_chain<kPlain, true>(in, out, n, iters, stream, threads);
  return static_cast<int>(err);
}

// Two worker streams per mode, created once: modes 0, 2 and 3 with cudaStreamCreate (blocking: they
// synchronize with the legacy default stream), mode 1 with cudaStreamNonBlocking.
struct Workers {
  cudaStream_t stream[2];
  cudaEvent_t start, done[3];
};

static Workers* workers(int mode) {
  static Workers made[4];
  static bool ready[4] = {false, false, false, false};
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
//   mode 3: mode 2, each kernel launched with PDL (its input is not the kernel before's output, so it
//           loads before its wait): a job's next kernel is resident before its current one ends.
extern "C" int legacy_run(int mode, const float* x, float* out, int steps, int n, int iters,
                          cudaStream_t caller) {
  if (mode < 0 || mode > 3 || steps <= 0 || n <= 0) return static_cast<int>(cudaErrorInvalidValue);
  Workers* w = workers(mode);
  if (w == nullptr) return static_cast<int>(cudaErrorUnknown);
  cudaStream_t app = mode >= 2 ? cudaStreamPerThread : cudaStreamLegacy;
  cudaStream_t job[3] = {w->stream[0], w->stream[1], app};
  cudaEventRecord(w->start, caller);
  for (cudaStream_t s : job) cudaStreamWaitEvent(s, w->start, 0);
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < 3; ++j) {
      size_t offset = (static_cast<size_t>(j) * steps + i) * n;
      cudaError_t err = mode == 3 ? launch_chain<kLoadThenWait>(x + offset, out + offset, n, iters, job[j])
                                  : launch_chain<kPlain>(x + offset, out + offset, n, iters, job[j]);
      if (err != cudaSuccess) return static_cast<int>(err);
    }
  }
  for (int j = 0; j < 3; ++j) {
    cudaEventRecord(w->done[j], job[j]);
    cudaStreamWaitEvent(caller, w->done[j], 0);
  }
  return static_cast<int>(cudaGetLastError());
}

// stream_ordered.cu: a step loop that needs a temporary workspace each step, allocated with
// cudaMalloc/cudaFree (mode 0) or from a stream-ordered memory pool (mode 1).
// Built as a shared library by aisp.kits.native (ch11/baseline_stream_ordered_allocator.py).
//
// cudaFree waits until the whole device is idle, and cudaMalloc may too: the host stops at every
// step, the GPU drains its queue, and the next step's launches start from an idle GPU.
// cudaMallocFromPoolAsync/cudaFreeAsync are ordered on the stream like kernels: a freed block is
// reused by the next step's allocation in stream order, nothing waits, and the host runs ahead.
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kThreads = 256;

// Stage 1 writes the workspace: tmp = 2 x + 1.
__global__ void stage1(const float* __restrict__ x, float* __restrict__ tmp, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) tmp[i] = fmaf(2.0f, x[i], 1.0f);
}

// Stage 2 reads it: out = tmp * tmp - x.
__global__ void stage2(const float* __restrict__ tmp, const float* __restrict__ x, float* __restrict__ out,
                       int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = fmaf(tmp[i], tmp[i], -x[i]);
}

// A pool on the current device that keeps freed memory (release threshold: never) instead of
// returning it to the driver at each synchronization. Created once.
static cudaMemPool_t pool() {
  static cudaMemPool_t made = nullptr;
  if (made == nullptr) {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return nullptr;
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t p = nullptr;
    if (cudaMemPoolCreate(&p, &props) != cudaSuccess) return nullptr;
    uint64_t keep = UINT64_MAX;
    if (cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess) return nullptr;
    made = p;
  }
  return made;
}

extern "C" int pool_init() { return pool() == nullptr ? static_cast<int>(cudaErrorMemoryAllocation) : 0; }

static void stages(const float* x, float* tmp, float* out, int n, cudaStream_t stream) {
  int blocks = (n + kThreads - 1) / kThreads;
  stage1<<<blocks, kThreads, 0, stream>>>(x, tmp, n);
  stage2<<<blocks, kThreads, 0, stream>>>(tmp, x, out, n);
}

// x and out hold [steps][n] floats; each step gets a fresh n-float workspace.
extern "C" int alloc_run(int mode, const float* x, float* out, int steps, int n, cudaStream_t stream) {
  if (mode < 0 || mode > 1 || steps <= 0 || n <= 0) return static_cast<int>(cudaErrorInvalidValue);
  size_t bytes = static_cast<size_t>(n) * sizeof(float);
  cudaMemPool_t p = mode == 1 ? pool() : nullptr;
  if (mode == 1 && p == nullptr) return static_cast<int>(cudaErrorMemoryAllocation);
  for (int i = 0; i < steps; ++i) {
    const float* xi = x + static_cast<size_t>(i) * n;
    float* oi = out + static_cast<size_t>(i) * n;
    float* tmp = nullptr;
    cudaError_t err = mode == 0 ? cudaMalloc(&tmp, bytes) : cudaMallocFromPoolAsync(&tmp, bytes, p, stream);
    if (err != cudaSuccess) return static_cast<int>(err);
    stages(xi, tmp, oi, n, stream);
    err = mode == 0 ? cudaFree(tmp) : cudaFreeAsync(tmp, stream);
    if (err != cudaSuccess) return static_cast<int>(err);
  }
  return static_cast<int>(cudaGetLastError());
}

// unified_memory.cu: y = a * x + b where x lives in managed (unified) memory that starts each call
// on the host, as if the host had just produced it.
//
//   faults     the kernel reads x directly: each first touch of a page faults on the GPU, the
//              driver migrates it (grouping faults into batches of 64 KiB-2 MiB), and the warps
//              waiting on it stall; the link runs far below its rate.
//   prefetch   cudaMemPrefetchAsync(x, bytes, GPU, stream) first: the driver migrates the whole
//              range in large DMA transfers at close to the PCIe rate, in stream order, and the
//              kernel then reads device-resident pages at HBM speed.
// Every call first sends x back to the host (cudaMemPrefetchAsync to the CPU, the same step in
// both variants), so each call migrates the same bytes.
// Needs cudaDevAttrConcurrentManagedAccess (GPU page faulting): um_supported() says so.
// Python: ch06/baseline_unified_memory_prefetch.py
#include "ch06_check.cuh"

static cudaError_t prefetch(const void* p, size_t bytes, bool to_gpu, cudaStream_t s) {
  int device = 0;
  cudaGetDevice(&device);
#if CUDART_VERSION >= 13000
  cudaMemLocation where = {};
  where.type = to_gpu ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
  where.id = to_gpu ? device : 0;
  return cudaMemPrefetchAsync(p, bytes, where, 0, s);
#else
  return cudaMemPrefetchAsync(p, bytes, to_gpu ? device : cudaCpuDeviceId, s);
#endif
}

__global__ void axpb(const float* __restrict__ x, float* __restrict__ y, float a, float b, long n) {
  const long stride = (long)gridDim.x * blockDim.x;
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = fmaf(a, x[i], b);
}

// 1 when this GPU can fault managed pages in while kernels run (concurrent managed access), else 0.
extern "C" int um_supported() {
  int device = 0, managed = 0, concurrent = 0;
  if (cudaGetDevice(&device)) return 0;
  cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, device);
  cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device);
  return managed && concurrent;
}

extern "C" void* um_alloc(size_t bytes) {
  void* p = nullptr;
  return cudaMallocManaged(&p, bytes, cudaMemAttachGlobal) == cudaSuccess ? p : nullptr;
}

extern "C" int um_free(void* p) { return (int)cudaFree(p); }

// prefetch_first = 0: the kernel faults x in; 1: cudaMemPrefetchAsync to the GPU, then the kernel.
extern "C" int um_run(int prefetch_first, const float* x, float* y, float a, float b, long n,
                      cudaStream_t s) {
  const size_t bytes = (size_t)n * sizeof(float);
  cudaError_t err = prefetch(x, bytes, false, s);  // the data starts on the host
  if (!err && prefetch_first) err = prefetch(x, bytes, true, s);
  if (err) return (int)err;
  axpb<<<8 * sm_count(), 256, 0, s>>>(x, y, a, b, n);
  return launch_status();
}

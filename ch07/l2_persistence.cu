// l2_persistence.cu: out[r, :] = x[r, :] + table[idx[r], :] over rows of 32 floats: a stream of
// activations read and written once, plus rows gathered at random from a hot table (an embedding).
//
// The table (32 MiB) fits in L2 (60 MiB on an H200, 50 on an H100), but the stream pushes 256 bytes through L2 per gathered row:
// between two uses of a table row, ~64 MiB of stream traffic arrives, and plain LRU can evict table
// rows before they are used again. Two ways to keep them: an access-policy window on the table
// (hitProp persisting, in an L2 set-aside of the context: gather_add itself, only the stream
// attribute differs), or per-access eviction hints in the kernel (gather_add_hints: no context state).
#include <algorithm>

constexpr int kThreads = 256;
constexpr int kVec = 8;  // float4 per row: rows of 32 floats

__global__ void gather_add(const float4* __restrict__ x, const float4* __restrict__ table, const int* __restrict__ idx,
                           float4* __restrict__ out, long n4) {
  const long t = (long)blockIdx.x * kThreads + threadIdx.x;
  if (t >= n4) return;
  const float4 a = x[t], b = table[(long)idx[t / kVec] * kVec + t % kVec];
  out[t] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

// x, out: rows x 32 floats; table: table_rows x 32 floats; idx: rows ints in [0, table_rows).
extern "C" int gather_add_run(const float* x, const float* table, const int* idx, float* out, long rows,
                              cudaStream_t s) {
  const long n4 = rows * kVec;
  gather_add<<<(unsigned)((n4 + kThreads - 1) / kThreads), kThreads, 0, s>>>(
      reinterpret_cast<const float4*>(x), reinterpret_cast<const float4*>(table), idx, reinterpret_cast<float4*>(out), n4);
  return (int)cudaGetLastError();
}

// The same sum with a cache-eviction hint on each access, no context state (gather_add_hints_run):
// x is loaded and out stored under an L2 evict_first policy (createpolicy.fractional, sm_80+), x also
// without an L1 allocation; idx and the table rows load at normal priority. Every line a call streams
// is then the first to be evicted, so the 32 MiB of table rows (and the block's idx line, shared by
// its 8 warps) keep the L2 while 1 GiB passes. Not evict_last on the table: where it takes effect,
// those lines would outrank everything else after the call ends (what the set-aside did, by other
// means); evict_first on the stream gives the same order during the call (table above stream) and
// leaves behind only lines first in line for eviction. One float4 of x, table and out per thread, as gather_add: ptxas
// issues the x load after the idx load returns here too (x beside the table load; issuing x with idx
// instead would leave the idx -> table chain, two round trips, as it is), 19 registers.
__device__ __forceinline__ unsigned long long evict_first_policy() {
  unsigned long long policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

__device__ __forceinline__ float4 load_streamed(const float4* p, unsigned long long policy) {
  float4 v;
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
      : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p), "l"(policy));
  return v;
}

__device__ __forceinline__ void store_streamed(float4* p, float4 v, unsigned long long policy) {
  asm volatile("st.global.L1::no_allocate.L2::cache_hint.v4.f32 [%0], {%1, %2, %3, %4}, %5;"
               :: "l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "l"(policy) : "memory");
}

__global__ void gather_add_hints(const float4* __restrict__ x, const float4* __restrict__ table, const int* __restrict__ idx,
                                 float4* __restrict__ out, long n4) {
  const long t = (long)blockIdx.x * kThreads + threadIdx.x;
  if (t >= n4) return;
  const unsigned long long streamed = evict_first_policy();
  const float4 a = load_streamed(&x[t], streamed), b = table[(long)idx[t / kVec] * kVec + t % kVec];
  store_streamed(&out[t], make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w), streamed);
}

// gather_add_run with gather_add_hints: the same arguments and result.
extern "C" int gather_add_hints_run(const float* x, const float* table, const int* idx, float* out, long rows,
                                    cudaStream_t s) {
  const long n4 = rows * kVec;
  gather_add_hints<<<(unsigned)((n4 + kThreads - 1) / kThreads), kThreads, 0, s>>>(
      reinterpret_cast<const float4*>(x), reinterpret_cast<const float4*>(table), idx, reinterpret_cast<float4*>(out), n4);
  return (int)cudaGetLastError();
}

// The set-aside is a limit of the CUDA context (the whole process); the value found before the first
// of possibly several overlapping users is restored when the last one ends.
static int g_users = 0;
static size_t g_original = 0;

// Puts an access-policy window over [base, base + bytes) on stream s: hits persist (up to carveout
// bytes of them), misses stream.
static cudaError_t set_window(cudaStream_t s, const void* base, size_t bytes, size_t carveout) {
  int dev = 0, max_window = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (!err) err = cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, dev);
  if (err) return err;
  cudaStreamAttrValue attr = {};
  attr.accessPolicyWindow.base_ptr = const_cast<void*>(base);
  attr.accessPolicyWindow.num_bytes = std::min(bytes, (size_t)max_window);
  attr.accessPolicyWindow.hitRatio = std::min(1.0f, (float)carveout / (float)attr.accessPolicyWindow.num_bytes);
  attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  return cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &attr);
}

// Sets the persisting-L2 set-aside to min(bytes, the device maximum) (*carveout receives what the
// driver granted: it rounds up to its granularity, 33.75 MiB for 32 MiB asked on an H200) and puts
// the window over [base, base + bytes) on stream s.
extern "C" int l2_persist_begin(cudaStream_t s, const void* base, size_t bytes, size_t* carveout) {
  int dev = 0, max_persist = 0, max_window = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (!err) err = cudaDeviceGetAttribute(&max_persist, cudaDevAttrMaxPersistingL2CacheSize, dev);
  if (!err) err = cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, dev);
  if (err) return (int)err;
  if (max_persist <= 0 || max_window <= 0) return -2;  // no persisting L2 on this GPU (or under MIG)
  if (g_users == 0 && (err = cudaDeviceGetLimit(&g_original, cudaLimitPersistingL2CacheSize))) return (int)err;
  *carveout = std::min(bytes, (size_t)max_persist);
  if ((err = cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, *carveout))) return (int)err;
  if (size_t granted = 0; cudaDeviceGetLimit(&granted, cudaLimitPersistingL2CacheSize) == cudaSuccess) *carveout = granted;
  ++g_users;
  if ((err = set_window(s, base, bytes, *carveout)) && --g_users == 0)
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, g_original);  // undone: no window, no set-aside
  return (int)err;
}

// Each call of a holder of the set-aside (after l2_persist_begin): the limit back to carveout where
// something changed it (the harness restores the process's limit before every call of every variant)
// and the window on stream s again. One cudaDeviceGetLimit when nothing changed.
extern "C" int l2_persist_apply(cudaStream_t s, const void* base, size_t bytes, size_t carveout) {
  size_t limit = 0;
  cudaError_t err = cudaDeviceGetLimit(&limit, cudaLimitPersistingL2CacheSize);
  if (!err && limit != carveout) err = cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, carveout);
  if (!err) err = set_window(s, base, bytes, carveout);
  return (int)err;
}

// Removes the window from stream s and returns persisting lines to normal; the last user also
// restores the limit found before the first.
extern "C" int l2_persist_end(cudaStream_t s) {
  cudaStreamAttrValue attr = {};
  attr.accessPolicyWindow.num_bytes = 0;
  cudaError_t err = cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &attr);
  if (!err) err = cudaCtxResetPersistingL2Cache();
  if (!err && g_users > 0 && --g_users == 0) err = cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, g_original);
  return (int)err;
}

// Lines a variant left persisting become normal again, so no variant starts with L2 space taken.
// Without a set-aside there are no persisting lines (l2_persist_end resets them before it restores
// a zero limit): nothing to do, and no call a GPU without the feature might refuse.
extern "C" int l2_reset_persisting() {
  size_t limit = 0;
  const cudaError_t err = cudaDeviceGetLimit(&limit, cudaLimitPersistingL2CacheSize);
  if (err || limit == 0) return (int)err;
  return (int)cudaCtxResetPersistingL2Cache();
}

// The device's largest persisting-L2 set-aside in bytes (for tests), or 0 without one or on error.
extern "C" size_t l2_persisting_max() {
  int dev = 0, max_persist = 0;
  if (cudaGetDevice(&dev) || cudaDeviceGetAttribute(&max_persist, cudaDevAttrMaxPersistingL2CacheSize, dev)) return 0;
  return (size_t)max_persist;
}

// The context's current persisting-L2 limit in bytes (for tests), or (size_t)-1 on error.
extern "C" size_t l2_persisting_limit() {
  size_t limit = 0;
  return cudaDeviceGetLimit(&limit, cudaLimitPersistingL2CacheSize) ? (size_t)-1 : limit;
}

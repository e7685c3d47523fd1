// l2_persistence.cu: out[r, :] = x[r, :] + table[idx[r], :] over rows of 32 floats: a stream of
// activations read and written once, plus rows gathered at random from a hot table (an embedding).
//
// The table (32 MiB) fits in L2 (60 MiB on an H200, 50 on an H100), but the stream pushes 256 bytes through L2 per gathered row:
// between two uses of a table row, ~64 MiB of stream traffic arrives, and plain LRU can evict table
// rows before they are used again. Two ways to keep them: an access-policy window on the table
// (hitProp persisting, in an L2 set-aside of the context: gather_add itself, only the stream
// attribute differs), or per-access eviction hints in the kernel (gather_add_hints: no context state;
// gather_add_ahead: the same hints, each thread's idx use moved behind its HBM loads).
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

// The hinted sum with the idx load off the gather's critical path (gather_add_ahead_run). In
// gather_add_hints a thread waits two HBM round trips in a row: idx, then x with its table row (ptxas
// issues x after idx returns). Here a warp takes 8 rows (1 KiB of x and of out) and lane l the rows
// 2 * (l / 8) and 2 * (l / 8) + 1 of them, float4 l % 8 of each: it issues its two x float4s and its
// two indices (one 8-byte load) back to back before any is used (one HBM round trip), then the two
// table rows (one L2 round trip), then the two stores. Each x load and store still covers 4 whole
// 128-byte lines a warp; a warp's 8 indices are one 32-byte sector, read once (gather_add: two warps
// read each sector). idx, read once, is streamed too (evict_first), so only the table loads at normal
// priority. x and idx load as ld.relaxed.gpu (LDG.STRONG.GPU, served by L2; strong loads keep their
// program order in ptxas, so x goes first and the idx use waits after all three; with .nc loads
// ptxas issued the second x load after the idx use, reusing idx's registers). Two rows a lane at 8
// blocks of 256 an SM (__launch_bounds__: at most 32 registers), twice the bytes in flight of
// gather_add_hints; the removed _ilp kernel kept 4 rows a thread at 6 blocks an SM. idx must be
// 8-byte aligned (the launcher refuses it otherwise); a lane whose second row is past the end does one.
constexpr int kWarpRowsAhead = 8;

__device__ __forceinline__ float4 load_early(const float4* p, unsigned long long policy) {
  float4 v;
  asm volatile("ld.relaxed.gpu.global.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p), "l"(policy));
  return v;
}

__device__ __forceinline__ int2 load_early_pair(const int* p, unsigned long long policy) {
  int2 v;
  asm volatile("ld.relaxed.gpu.global.L1::no_allocate.L2::cache_hint.v2.s32 {%0, %1}, [%2], %3;"
               : "=r"(v.x), "=r"(v.y) : "l"(p), "l"(policy));
  return v;
}

__device__ __forceinline__ int load_early_one(const int* p, unsigned long long policy) {
  int v;
  asm volatile("ld.relaxed.gpu.global.L1::no_allocate.L2::cache_hint.s32 %0, [%1], %2;" : "=r"(v) : "l"(p), "l"(policy));
  return v;
}

__device__ __forceinline__ float4 add4(float4 a, float4 b) { return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }

__global__ void __launch_bounds__(kThreads, 8) gather_add_ahead(const float4* __restrict__ x, const float4* __restrict__ table,
                                                                const int* __restrict__ idx, float4* __restrict__ out, long rows) {
  const int lane = threadIdx.x & 31, col = lane & 7;
  const long row = ((long)blockIdx.x * kThreads + threadIdx.x) / 32 * kWarpRowsAhead + 2 * (lane >> 3);
  if (row >= rows) return;
  const unsigned long long streamed = evict_first_policy();
  const long f = row * kVec + col;  // this lane's float4 of its first row in x and out (the second: f + kVec)
  if (row + 1 < rows) {
    const float4 a0 = load_early(&x[f], streamed), a1 = load_early(&x[f + kVec], streamed);
    const int2 r = load_early_pair(&idx[row], streamed);
    const float4 b0 = table[(long)r.x * kVec + col], b1 = table[(long)r.y * kVec + col];
    store_streamed(&out[f], add4(a0, b0), streamed);
    store_streamed(&out[f + kVec], add4(a1, b1), streamed);
  } else {  // the last row, where rows is odd
    const float4 a = load_early(&x[f], streamed);
    const int r = load_early_one(&idx[row], streamed);
    store_streamed(&out[f], add4(a, table[(long)r * kVec + col]), streamed);
  }
}

// gather_add_run with gather_add_ahead: the same arguments and result; idx 8-byte aligned.
extern "C" int gather_add_ahead_run(const float* x, const float* table, const int* idx, float* out, long rows,
                                    cudaStream_t s) {
  if (reinterpret_cast<unsigned long long>(idx) % 8) return (int)cudaErrorMisalignedAddress;
  const long rows_per_block = (long)kThreads / 32 * kWarpRowsAhead;
  gather_add_ahead<<<(unsigned)((rows + rows_per_block - 1) / rows_per_block), kThreads, 0, s>>>(
      reinterpret_cast<const float4*>(x), reinterpret_cast<const float4*>(table), idx, reinterpret_cast<float4*>(out), rows);
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

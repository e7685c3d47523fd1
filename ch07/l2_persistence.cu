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

// ---- The same sum with the rows grouped by table slice (gather_add_grouped_run) ----
// Under the hints the gather is L2-bound: each row's table line crosses L2 (512 MiB a call, a third of
// the SM-facing L2 traffic) although the table is read from HBM once. Here a counting sort groups the
// rows by slice of kSliceRows table rows (64 KiB), and each block copies a slice into shared memory
// once and adds it to every row of its share that uses it: the table crosses L2 ~2x32 MiB instead of
// 512 MiB; x and out are then read and written a whole 128-byte row at a time in bucket order. Three
// kernels after one memset: group_count (rows a bucket), group_scatter (the rows' numbers in bucket
// order), gather_add_grouped (the sum). The order in a bucket varies run to run; each out row does not.
constexpr int kSliceShift = 9;
constexpr int kSliceRows = 1 << kSliceShift;  // table rows a bucket: 64 KiB of shared memory
constexpr int kMaxBuckets = 1024;             // table_rows <= 512K
constexpr int kGroupThreads = 512;
constexpr int kScatterPer = 8;                // rows a thread of group_scatter: 4,096 a block
constexpr int kScatterRows = kGroupThreads * kScatterPer;
constexpr int kCountPer = 4;                  // int4 of idx a thread of group_count has in flight
constexpr int kGroups = kGroupThreads / kVec; // rows a block of gather_add_grouped adds at once
constexpr int kUnroll = 4;                    // ... times this many in flight a thread

// s[0, n) replaced by its exclusive prefix sum (n <= kMaxBuckets), by all kGroupThreads of the block.
__device__ void block_exclusive_scan(int* s, int n, int* warp_sums) {
  const int per = (n + kGroupThreads - 1) / kGroupThreads, lo = min(n, (int)threadIdx.x * per), hi = min(n, lo + per);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int mine = 0;
  for (int i = lo; i < hi; ++i) mine += s[i];
  int inc = mine;
  for (int d = 1; d < 32; d *= 2) {
    const int v = __shfl_up_sync(~0u, inc, d);
    if (lane >= d) inc += v;
  }
  if (lane == 31) warp_sums[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    const int own = lane < kGroupThreads / 32 ? warp_sums[lane] : 0;
    int w = own;
    for (int d = 1; d < 32; d *= 2) {
      const int v = __shfl_up_sync(~0u, w, d);
      if (lane >= d) w += v;
    }
    if (lane < kGroupThreads / 32) warp_sums[lane] = w - own;
  }
  __syncthreads();
  int run = warp_sums[warp] + inc - mine;
  for (int i = lo; i < hi; ++i) {
    const int v = s[i];
    s[i] = run;
    run += v;
  }
  __syncthreads();
}

// counts[b] += rows whose idx falls in bucket b (idx 16-byte aligned; counts zeroed before).
__global__ void __launch_bounds__(kGroupThreads) group_count(const int* __restrict__ idx, long rows,
                                                             int* __restrict__ counts, int buckets) {
  __shared__ int s[kMaxBuckets];
  for (int b = threadIdx.x; b < buckets; b += kGroupThreads) s[b] = 0;
  __syncthreads();
  const long n4 = rows / 4, stride = (long)gridDim.x * kGroupThreads;
  const int4* idx4 = reinterpret_cast<const int4*>(idx);
  for (long v = (long)blockIdx.x * kGroupThreads + threadIdx.x; v < n4; v += stride * kCountPer) {
    int4 got[kCountPer];
#pragma unroll
    for (int k = 0; k < kCountPer; ++k) got[k] = v + k * stride < n4 ? __ldg(&idx4[v + k * stride]) : make_int4(-1, -1, -1, -1);
#pragma unroll
    for (int k = 0; k < kCountPer; ++k)
      if (got[k].x >= 0) {
        atomicAdd(&s[got[k].x >> kSliceShift], 1);
        atomicAdd(&s[got[k].y >> kSliceShift], 1);
        atomicAdd(&s[got[k].z >> kSliceShift], 1);
        atomicAdd(&s[got[k].w >> kSliceShift], 1);
      }
  }
  if (blockIdx.x == 0 && threadIdx.x < rows % 4) atomicAdd(&s[__ldg(&idx[n4 * 4 + threadIdx.x]) >> kSliceShift], 1);
  __syncthreads();
  for (int b = threadIdx.x; b < buckets; b += kGroupThreads)
    if (s[b]) atomicAdd(&counts[b], s[b]);
}

// perm[start of bucket b + k] = (row << kSliceShift) | (idx[row] % kSliceRows) for the rows of bucket
// b, each block its kScatterRows rows staged in bucket order in shared memory, then written in runs.
__global__ void __launch_bounds__(kGroupThreads) group_scatter(const int* __restrict__ idx, long rows,
                                                               const int* __restrict__ counts, int* __restrict__ cursors,
                                                               unsigned* __restrict__ perm, int buckets) {
  __shared__ int cnt[kMaxBuckets], local[kMaxBuckets], global[kMaxBuckets], warp_sums[32];
  __shared__ unsigned staged[kScatterRows];
  __shared__ unsigned short bucket_of[kScatterRows];
  const long row0 = (long)blockIdx.x * kScatterRows;
  for (int b = threadIdx.x; b < buckets; b += kGroupThreads) cnt[b] = 0, global[b] = counts[b];
  __syncthreads();
  int value[kScatterPer], rank[kScatterPer];
#pragma unroll
  for (int j = 0; j < kScatterPer; ++j) {
    const long r = row0 + j * kGroupThreads + threadIdx.x;
    value[j] = r < rows ? __ldg(&idx[r]) : -1;
  }
#pragma unroll
  for (int j = 0; j < kScatterPer; ++j) rank[j] = value[j] >= 0 ? atomicAdd(&cnt[value[j] >> kSliceShift], 1) : 0;
  block_exclusive_scan(global, buckets, warp_sums);  // each bucket's first position in perm
  for (int b = threadIdx.x; b < buckets; b += kGroupThreads) {
    local[b] = cnt[b];
    if (cnt[b]) global[b] += atomicAdd(&cursors[b], cnt[b]);  // this block's run in the bucket
  }
  __syncthreads();
  block_exclusive_scan(local, buckets, warp_sums);  // each bucket's first slot in staged
#pragma unroll
  for (int j = 0; j < kScatterPer; ++j)
    if (value[j] >= 0) {
      const int b = value[j] >> kSliceShift, slot = local[b] + rank[j];
      staged[slot] = (unsigned)(row0 + j * kGroupThreads + threadIdx.x) << kSliceShift | (value[j] & (kSliceRows - 1));
      bucket_of[slot] = (unsigned short)b;
    }
  __syncthreads();
  const int here = (int)min((long)kScatterRows, rows - row0);
  for (int i = threadIdx.x; i < here; i += kGroupThreads) {
    const int b = bucket_of[i];
    perm[global[b] + i - local[b]] = staged[i];
  }
}

// out[r] = x[r] + table[idx[r]] over perm: block k takes perm's k-th share of rows, and for each
// bucket in it copies the bucket's table slice into shared memory once; 8 threads a row, x and out
// streamed (evict_first, as gather_add_hints), kUnroll rows a thread in flight.
__global__ void __launch_bounds__(kGroupThreads, 2) gather_add_grouped(
    const float4* __restrict__ x, const float4* __restrict__ table, const unsigned* __restrict__ perm,
    const int* __restrict__ counts, float4* __restrict__ out, long rows, int table_rows, int buckets) {
  extern __shared__ float4 slice[];  // kSliceRows * kVec
  __shared__ int start[kMaxBuckets + 1], warp_sums[32];
  for (int b = threadIdx.x; b < buckets; b += kGroupThreads) start[b] = counts[b];
  if (threadIdx.x == 0) start[buckets] = (int)rows;
  __syncthreads();
  block_exclusive_scan(start, buckets, warp_sums);
  const long first = rows * blockIdx.x / gridDim.x, last = rows * (blockIdx.x + 1) / gridDim.x;
  int b = 0;
  for (int hi = buckets; b + 1 < hi;) {  // the last bucket starting at or before first
    const int mid = (b + hi) / 2;
    if (start[mid] <= first) b = mid; else hi = mid;
  }
  const unsigned long long streamed = evict_first_policy();
  const int group = threadIdx.x / kVec, q = threadIdx.x % kVec;
  for (long lo = first; lo < last; ++b) {
    const long end = min((long)start[b + 1], last);
    if (end <= lo) continue;
    const int base = b << kSliceShift, n = min(kSliceRows, table_rows - base) * kVec;
    __syncthreads();  // the previous slice's last reads are done
    for (int i = threadIdx.x; i < n; i += kGroupThreads) slice[i] = table[(long)base * kVec + i];
    __syncthreads();
    for (long i = lo + group; i < end; i += kGroups * kUnroll) {
      unsigned p[kUnroll];
      float4 a[kUnroll];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) p[k] = i + k * kGroups < end ? __ldg(&perm[i + k * kGroups]) : 0u;
#pragma unroll
      for (int k = 0; k < kUnroll; ++k)
        a[k] = i + k * kGroups < end ? load_streamed(&x[(long)(p[k] >> kSliceShift) * kVec + q], streamed) : make_float4(0, 0, 0, 0);
#pragma unroll
      for (int k = 0; k < kUnroll; ++k)
        if (i + k * kGroups < end) {
          const float4 t = slice[(p[k] & (kSliceRows - 1)) * kVec + q];
          store_streamed(&out[(long)(p[k] >> kSliceShift) * kVec + q],
                         make_float4(a[k].x + t.x, a[k].y + t.y, a[k].z + t.z, a[k].w + t.w), streamed);
        }
    }
    lo = end;
  }
}

// gather_add_run's sum with the rows grouped by table slice. table_rows: the table's rows (at most
// kMaxBuckets * kSliceRows); perm: rows uint32 of workspace; counts: 2 * ceil(table_rows / kSliceRows)
// int32 of workspace; rows < 2^(32 - kSliceShift); idx 16-byte aligned.
extern "C" int gather_add_grouped_run(const float* x, const float* table, const int* idx, float* out, long rows,
                                      cudaStream_t s, int table_rows, unsigned* perm, int* counts) {
  const int buckets = (table_rows + kSliceRows - 1) / kSliceRows;
  if (rows <= 0) return 0;
  if (table_rows <= 0 || buckets > kMaxBuckets || rows >= (1L << (32 - kSliceShift)) || (size_t)idx % 16)
    return (int)cudaErrorInvalidValue;
  static int dev_sms[64] = {}, dev_blocks[64] = {};  // per device: SMs, resident gather blocks an SM
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err || dev >= 64) return err ? (int)err : (int)cudaErrorInvalidDevice;
  constexpr int smem = kSliceRows * kVec * sizeof(float4);
  if (dev_blocks[dev] == 0) {
    if ((err = cudaFuncSetAttribute(gather_add_grouped, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)) ||
        (err = cudaDeviceGetAttribute(&dev_sms[dev], cudaDevAttrMultiProcessorCount, dev)) ||
        (err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&dev_blocks[dev], gather_add_grouped, kGroupThreads, smem)))
      return (int)err;
    if (dev_blocks[dev] == 0) return (int)cudaErrorInvalidConfiguration;
  }
  int* cursors = counts + buckets;
  if ((err = cudaMemsetAsync(counts, 0, 2 * buckets * sizeof(int), s))) return (int)err;
  group_count<<<2 * dev_sms[dev], kGroupThreads, 0, s>>>(idx, rows, counts, buckets);
  group_scatter<<<(unsigned)((rows + kScatterRows - 1) / kScatterRows), kGroupThreads, 0, s>>>(idx, rows, counts, cursors,
                                                                                             perm, buckets);
  const long blocks = std::min((long)dev_sms[dev] * dev_blocks[dev], (rows + kGroups - 1) / kGroups);
  gather_add_grouped<<<(unsigned)blocks, kGroupThreads, smem, s>>>(reinterpret_cast<const float4*>(x),
      reinterpret_cast<const float4*>(table), perm, counts, reinterpret_cast<float4*>(out), rows, table_rows, buckets);
  return (int)cudaGetLastError();
}

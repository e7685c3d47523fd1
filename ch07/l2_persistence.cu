// l2_persistence.cu: out[r, :] = x[r, :] + table[idx[r], :] over rows of 32 floats: a stream of
// activations read and written once, plus rows gathered at random from a hot table (an embedding).
//
// The table (32 MiB) fits in L2 (50 MiB), but the stream pushes 256 bytes through L2 per gathered row:
// between two uses of a table row, ~64 MiB of stream traffic arrives, and plain LRU evicts table rows
// before they are used again, so gathers go to HBM. With an access-policy window on the table
// (hitProp persisting, in an L2 set-aside of up to the table's size), table lines stay in L2 while
// the stream passes through the rest. The kernel is the same; only the stream attribute differs.
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

// The same sum, one warp per 32 rows (gather_add_warp_run): lane l loads idx[row0 + l] (one 128-byte
// request for 32 rows, where gather_add makes one request per 4 rows: 8x fewer L2 requests for idx)
// and hands it to the 8 lanes gathering that row with a shuffle; the warp then walks its 32 rows in
// kVec steps of 4 rows (x, the table rows and out coalesced exactly as in gather_add). The x loads do
// not depend on idx, so only the first table load of a warp waits for it. Plain loads and stores
// (the window's persisting property applies as in gather_add); not unrolled, so a thread keeps one x
// and one table float4 in flight, as gather_add does (the removed _ilp kernel kept 4 of each and was
// slower), at 8 blocks of 256 per SM. A lane past the last row loads and stores nothing.
constexpr int kWarpRows = 32;

__global__ void __launch_bounds__(kThreads) gather_add_warp(const float4* __restrict__ x, const float4* __restrict__ table,
                                                            const int* __restrict__ idx, float4* __restrict__ out, long rows) {
  const int lane = threadIdx.x & 31;
  const long row0 = ((long)blockIdx.x * kThreads + threadIdx.x) / 32 * kWarpRows;
  if (row0 >= rows) return;  // the whole warp leaves together: row0 is the same for its 32 lanes
  const int mine = row0 + lane < rows ? __ldg(&idx[row0 + lane]) : 0;
#pragma unroll 1
  for (int step = 0; step < kVec; ++step) {
    const int sub = step * 4 + (lane >> 3);  // this lane's row within the warp's 32
    const int row = __shfl_sync(0xffffffffu, mine, sub);
    const long f = (row0 + sub) * kVec + (lane & 7);  // this lane's float4 of x and out
    if (row0 + sub < rows) {
      const float4 a = x[f], b = table[(long)row * kVec + (lane & 7)];
      out[f] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    }
  }
}

// gather_add_run with gather_add_warp: the same arguments and result.
extern "C" int gather_add_warp_run(const float* x, const float* table, const int* idx, float* out, long rows,
                                   cudaStream_t s) {
  const long rows_per_block = (long)kThreads / 32 * kWarpRows;
  gather_add_warp<<<(unsigned)((rows + rows_per_block - 1) / rows_per_block), kThreads, 0, s>>>(
      reinterpret_cast<const float4*>(x), reinterpret_cast<const float4*>(table), idx, reinterpret_cast<float4*>(out), rows);
  return (int)cudaGetLastError();
}

// The set-aside is a limit of the CUDA context (the whole process); the value found before the first
// of possibly several overlapping users is restored when the last one ends.
static int g_users = 0;
static size_t g_original = 0;

// Sets the persisting-L2 set-aside to min(bytes, the device maximum) (*carveout receives what the
// driver granted: it rounds up to its granularity, 33.75 MiB for 32 MiB asked on an H200) and puts
// an access-policy window over [base, base + bytes) on stream s: hits persist, misses stream.
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
  cudaStreamAttrValue attr = {};
  attr.accessPolicyWindow.base_ptr = const_cast<void*>(base);
  attr.accessPolicyWindow.num_bytes = std::min(bytes, (size_t)max_window);
  attr.accessPolicyWindow.hitRatio = std::min(1.0f, (float)*carveout / (float)attr.accessPolicyWindow.num_bytes);
  attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  if ((err = cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &attr)) && --g_users == 0)
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, g_original);  // undone: no window, no set-aside
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

// dynamic_parallelism.cu: adaptive Simpson integration of one sharp peak per cell, refined level by
// level. Each level's kernel evaluates its intervals, adds the converged ones to their cell and
// appends both halves of the others to the next level's list. Who launches the next level:
//   dp_host:   the host, after copying the next level's count D2H and syncing (one round trip per level);
//   dp_device: the level kernel itself, as a tail launch (CUDA dynamic parallelism, CDP2): the next
//              grid starts on the GPU as soon as this one ends, with no host in the loop.
// Needs -rdc=true and -lcudadevrt (ch12/baseline_dynamic_parallelism.py declares them); built without
// them (a plain compile check) dp_device refuses to run with cudaErrorNotSupported.
//
// Cell c integrates f(x) = w / ((x - p)^2 + w^2) over [0, 1], with p = 0.5 + 0.5 tanh(u[c]) and
// w = 10^(-2 - tanh(v[c])) in (1e-3, 1e-1): exact atan((1 - p) / w) + atan(p / w). Narrow peaks
// need ~17 levels of bisection, wide ones 3: the skew that makes the refinement adaptive.
#include <algorithm>

#include "ch12_common.cuh"

struct Interval {
  double a, b;
  int cell, pad;
};

struct Refine {
  Interval* list[2];  // level L reads list[L % 2], appends to list[(L + 1) % 2]
  int* count;         // count[L]: intervals of level L (may pass cap); count[max_levels]: overflows
  double* out;        // one integral per cell
  const float *u, *v;
  int cap, max_levels, device_grid;  // cap: intervals a list holds (even)
  double tol;
};

__device__ double peak(double x, double p, double w) {
  double d = x - p;
  return w / (d * d + w * w);
}

__global__ void dp_seed(Refine r, int cells) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c == 0) r.count[0] = cells;
  if (c < cells) {
    r.list[0][c] = Interval{0.0, 1.0, c, 0};
    r.out[c] = 0.0;
  }
}

// A cell's peak: {p, w} = {0.5 + 0.5 tanh(u), 10^(-2 - tanh(v))}.
__device__ double2 peak_shape(float u, float v) {
  return make_double2(0.5 + 0.5 * tanh(static_cast<double>(u)), exp10(-2.0 - tanh(static_cast<double>(v))));
}

// Simpson's rule on [a, b] for one peak, whole and from its two halves (h6 = (b - a) / 6, h12 = (b - a) / 12).
// Both refinements below call it, so they split and accept on the same bits.
struct Simpson {
  double whole, halves;
};

__device__ Simpson simpson(double a, double b, double p, double w, double h6, double h12) {
  double m = 0.5 * (a + b);
  double fa = peak(a, p, w), fm = peak(m, p, w), fb = peak(b, p, w);
  double fl = peak(0.5 * (a + m), p, w), fr = peak(0.5 * (m + b), p, w);
  return Simpson{h6 * (fa + 4.0 * fm + fb), h12 * (fa + 4.0 * fl + 2.0 * fm + 4.0 * fr + fb)};
}

__device__ double accepted(const Simpson& s) { return s.halves + (s.halves - s.whole) / 15.0; }

__device__ void refine_one(const Refine& r, const Interval& it, int level) {
  double2 pw = peak_shape(r.u[it.cell], r.v[it.cell]);
  double a = it.a, b = it.b, m = 0.5 * (a + b), h = b - a;
  Simpson s = simpson(a, b, pw.x, pw.y, h / 6.0, h / 12.0);
  int slot = -1;
  if (fabs(s.halves - s.whole) > 15.0 * r.tol * h && level + 1 < r.max_levels) {
    slot = atomicAdd(&r.count[level + 1], 2);
    if (slot + 2 > r.cap) {
      atomicAdd(&r.count[r.max_levels], 1);  // no room: accept this interval's estimate instead
      slot = -1;
    }
  }
  if (slot < 0) {
    atomicAdd(&r.out[it.cell], accepted(s));
    return;
  }
  Interval* next = r.list[(level + 1) & 1];
  next[slot] = Interval{a, m, it.cell, 0};
  next[slot + 1] = Interval{m, b, it.cell, 0};
}

__global__ void dp_level(Refine r, int level, bool tail_launch) {
  int n = min(r.count[level], r.cap);  // slots are taken 2 at a time from 0 and cap is even: all < cap are written
  const Interval* items = r.list[level & 1];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) refine_one(r, items[i], level);
#ifdef __CUDACC_RDC__  // device-side launches need relocatable device code (-rdc=true)
  if (tail_launch && n > 0 && level + 1 < r.max_levels && blockIdx.x == 0 && threadIdx.x == 0)
    dp_level<<<r.device_grid, kThreads, 0, cudaStreamTailLaunch>>>(r, level + 1, true);
#endif
}

static int start(const Refine& r, int cells, cudaStream_t stream) {
  CH12_TRY(cudaMemsetAsync(r.count, 0, sizeof(int) * (r.max_levels + 1), stream));
  dp_seed<<<blocks_for(cells), kThreads, 0, stream>>>(r, cells);
  return static_cast<int>(cudaGetLastError());
}

// Host-driven levels; *levels_out = levels run. pinned_count: one pinned int.
extern "C" int dp_host(Refine r, int cells, int* pinned_count, int* levels_out, cudaStream_t stream) {
  CH12_TRY(static_cast<cudaError_t>(start(r, cells, stream)));
  int n = cells, level = 0;
  while (n > 0 && level < r.max_levels) {
    dp_level<<<blocks_for(n), kThreads, 0, stream>>>(r, level, false);
    CH12_TRY(cudaMemcpyAsync(pinned_count, r.count + level + 1, sizeof(int), cudaMemcpyDeviceToHost, stream));
    CH12_TRY(cudaStreamSynchronize(stream));
    n = min(*pinned_count, r.cap);
    ++level;
  }
  *levels_out = level;
  return static_cast<int>(cudaGetLastError());
}

// Device-driven levels: one launch from the host; each level tail-launches the next.
extern "C" int dp_device(Refine r, int cells, cudaStream_t stream) {
#ifdef __CUDACC_RDC__
  CH12_TRY(static_cast<cudaError_t>(start(r, cells, stream)));
  dp_level<<<r.device_grid, kThreads, 0, stream>>>(r, 0, true);
  return static_cast<int>(cudaGetLastError());
#else
  return static_cast<int>(cudaErrorNotSupported);  // built without -rdc=true: no device launches
#endif
}

// ---- optimized_dynamic_parallelism_lean.py: the same refinement with less work between tail launches ----
// The interval [k, k + 1] * 2^-level of a cell is stored as {cell, k} (8 bytes, not 24: a level's a and
// b are exact dyadic numbers, so k * h and (k + 1) * h are the baseline's bits); the peak's {p, w} are
// computed once a call per cell (a table) instead of once per interval; a block takes its children's
// slots with one atomic (a scan over its warps), not one per warp; block 0 of every grid only launches
// the next level, sized from this level's count (at most twice as many intervals), while the other
// blocks work; and the first grid (the only host launch) also does what dp_seed and the count reset did.
struct Lean {
  int2* list[2];  // level L reads list[L % 2] ({cell, k}; cell < 0: no interval), appends to list[(L + 1) % 2]
  int* count;     // count[L]: intervals of level L (may pass cap); count[max_levels]: overflows
  double* out;
  const float *u, *v;
  double2* shape;  // {p, w} per cell, written by the first grid
  int cells, cap, max_levels, max_grid;  // max_grid: working blocks a level grid may have (all resident)
  double tol;
};

constexpr int kWarps = kThreads / 32;
constexpr int kLevelBlocksPerSM = 5;  // 48 registers a thread, no spills (ptxas -v, sm_90)

// A level's widths: h, h / 6, h / 12 and the split threshold 15 tol h, worked out once by the launching thread.
struct Widths {
  double h, h6, h12, limit;
};

__device__ Widths widths(double h, double tol) { return Widths{h, h / 6.0, h / 12.0, 15.0 * tol * h}; }

__global__ void __launch_bounds__(kThreads, kLevelBlocksPerSM) dp_lean_level(Lean r, int level, Widths d);

// Tail-launches level + 1 after a level of n intervals (each leaves at most 2): one launching block
// and enough working blocks for 2n, at most max_grid (the grid-stride loop covers the rest).
__device__ void launch_next(const Lean& r, int level, int n, double h) {
#ifdef __CUDACC_RDC__
  if (n <= 0 || level + 1 >= r.max_levels) return;
  int work = (min(2 * n, r.cap) + kThreads - 1) / kThreads;
  dp_lean_level<<<1 + min(work, r.max_grid), kThreads, 0, cudaStreamTailLaunch>>>(r, level + 1, widths(0.5 * h, r.tol));
#endif
}

// Slot of this thread's two children in the next list (one atomicAdd on *counter per block); -1 when
// `want` is false. Every thread of the block calls it.
__device__ int reserve_pairs(bool want, int* counter) {
  __shared__ int warp_first[kWarps];
  __shared__ int block_first;
  unsigned wanting = __ballot_sync(0xffffffffu, want);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_first[warp] = __popc(wanting);
  __syncthreads();
  if (threadIdx.x == 0) {
    int total = 0;
    for (int i = 0; i < kWarps; ++i) {
      int c = warp_first[i];
      warp_first[i] = total;
      total += c;
    }
    block_first = total > 0 ? atomicAdd(counter, 2 * total) : 0;
  }
  __syncthreads();
  int slot = block_first + 2 * (warp_first[warp] + __popc(wanting & ((1u << lane) - 1u)));
  __syncthreads();  // all have read the shared words before a next call rewrites them
  return want ? slot : -1;
}

// Level `level` (>= 1) of intervals of width h. Block 0 launches the next level; blocks 1.. refine.
__global__ void __launch_bounds__(kThreads, kLevelBlocksPerSM) dp_lean_level(Lean r, int level, Widths d) {
  const int2* items = level & 1 ? r.list[1] : r.list[0];  // a select: an indexed kernel parameter would go through local memory
  int first = (blockIdx.x - 1) * kThreads, stride = (gridDim.x - 1) * kThreads;
  int2 it = blockIdx.x > 0 && first + threadIdx.x < r.cap ? items[first + threadIdx.x] : make_int2(-1, 0);  // beside the count
  int n = min(r.count[level], r.cap);
  if (blockIdx.x == 0) {
    if (threadIdx.x == 0) launch_next(r, level, n, d.h);
    return;
  }
  for (; first < n; first += stride) {  // uniform over the block: every thread reaches reserve_pairs' barriers
    int i = first + threadIdx.x;
    if (first >= stride) it = i < n ? items[i] : make_int2(-1, 0);  // passes after the first
    bool live = i < n && it.x >= 0;
    Simpson s{0.0, 0.0};
    if (live) {
      double2 pw = __ldg(&r.shape[it.x]);
      s = simpson(static_cast<double>(it.y) * d.h, static_cast<double>(it.y + 1) * d.h, pw.x, pw.y, d.h6, d.h12);
    }
    int slot = reserve_pairs(live && level + 1 < r.max_levels && fabs(s.halves - s.whole) > d.limit, &r.count[level + 1]);
    if (slot >= 0 && slot + 2 <= r.cap) {
      int2* next = level & 1 ? r.list[0] : r.list[1];
      next[slot] = make_int2(it.x, 2 * it.y);
      next[slot + 1] = make_int2(it.x, 2 * it.y + 1);
    } else if (live) {
      if (slot >= 0) atomicAdd(&r.count[r.max_levels], 1);  // no room: accept this interval's estimate instead
      atomicAdd(&r.out[it.x], accepted(s));
    }
  }
}

// Level 0, launched from the host: block 0 sets the counts and launches level 1; thread c of the others
// computes cell c's {p, w}, refines [0, 1] and writes out[c] and the two list slots 2c, 2c + 1 (no
// atomics: level 1 reads 2 * cells slots, the cells that converged leaving holes), so nothing has to
// be zeroed before this grid starts.
__global__ void __launch_bounds__(kThreads) dp_lean_first(Lean r) {
  if (blockIdx.x == 0) {
    int t = threadIdx.x;
    if (t <= r.max_levels) r.count[t] = t == 0 ? r.cells : t == 1 && t < r.max_levels ? 2 * r.cells : 0;
    if (t == 0) launch_next(r, 0, r.cells, 1.0);
    return;
  }
  int c = (blockIdx.x - 1) * kThreads + threadIdx.x;
  if (c >= r.cells) return;
  double2 pw = peak_shape(r.u[c], r.v[c]);
  r.shape[c] = pw;
  Widths d = widths(1.0, r.tol);
  Simpson s = simpson(0.0, 1.0, pw.x, pw.y, d.h6, d.h12);
  bool split = fabs(s.halves - s.whole) > d.limit && 1 < r.max_levels;
  r.out[c] = split ? 0.0 : accepted(s);
  int2* next = r.list[1];
  next[2 * c] = split ? make_int2(c, 0) : make_int2(-1, 0);
  next[2 * c + 1] = split ? make_int2(c, 1) : make_int2(-1, 0);
}

// Working blocks of one level grid that are resident together on this GPU, less the launching block.
extern "C" int dp_lean_grid(int* blocks) {
  int device = 0, sms = 0, per_sm = 0;
  CH12_TRY(cudaGetDevice(&device));
  CH12_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CH12_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, dp_lean_level, kThreads, 0));
  *blocks = max(1, per_sm * sms - 1);
  return 0;
}

// One host launch; each level tail-launches the next. Needs 2 * cells <= cap and max_levels < kThreads.
extern "C" int dp_lean(Lean r, cudaStream_t stream) {
#ifdef __CUDACC_RDC__
  if (2 * r.cells > r.cap || r.cap % 2 != 0 || r.max_levels < 1 || r.max_levels >= kThreads || r.max_grid < 1)
    return static_cast<int>(cudaErrorInvalidValue);
  dp_lean_first<<<1 + blocks_for(r.cells), kThreads, 0, stream>>>(r);
  return static_cast<int>(cudaGetLastError());
#else
  return static_cast<int>(cudaErrorNotSupported);  // built without -rdc=true: no device launches
#endif
}

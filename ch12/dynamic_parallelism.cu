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

__device__ void refine_one(const Refine& r, const Interval& it, int level) {
  double p = 0.5 + 0.5 * tanh(static_cast<double>(r.u[it.cell]));
  double w = exp10(-2.0 - tanh(static_cast<double>(r.v[it.cell])));
  double a = it.a, b = it.b, m = 0.5 * (a + b), h = b - a;
  double fa = peak(a, p, w), fm = peak(m, p, w), fb = peak(b, p, w);
  double fl = peak(0.5 * (a + m), p, w), fr = peak(0.5 * (m + b), p, w);
  double whole = h / 6.0 * (fa + 4.0 * fm + fb), halves = h / 12.0 * (fa + 4.0 * fl + 2.0 * fm + 4.0 * fr + fb);
  int slot = -1;
  if (fabs(halves - whole) > 15.0 * r.tol * h && level + 1 < r.max_levels) {
    slot = atomicAdd(&r.count[level + 1], 2);
    if (slot + 2 > r.cap) {
      atomicAdd(&r.count[r.max_levels], 1);  // no room: accept this interval's estimate instead
      slot = -1;
    }
  }
  if (slot < 0) {
    atomicAdd(&r.out[it.cell], halves + (halves - whole) / 15.0);
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

// odd_branch.cu: an odd function y = sign(x) * P(|x|), x clamped to [-1, 1], P the series of
// ch08_poly.cuh with 128 terms (Horner's rule, fully unrolled): 128 FMAs per element, compute-bound.
//
//   branchy  the definition written as a branch: if (x < 0) y = -P(-x); else y = P(x). The sign
//            of random data differs between the lanes of almost every warp, so the warp runs both
//            sides one after the other, each with about half its lanes masked off: 256 FMAs
//            issued per element, half of them wasted.
//   select   one path for every lane: r = P(|x|), then y = x < 0 ? -r : r, a select with no
//            branch: 128 FMAs issued per element, every lane busy.
// Both run the same body, unit_steps (ch08_poly.cuh), on a grid of SMs x resident blocks (8 of 256 threads: at most
// 32 registers) that strides over groups of 4 units of 256 elements (one element per thread a
// unit): 4 elements a thread a step, so one step's loop and address arithmetic is shared by 4 x 128
// FFMA (x 2 in the branchy kernel), and the next step's inputs are loaded before this step's
// chains, so their latency hides behind them. The elements left over (under one round of the grid)
// go one a thread. Every element gets the same FMAs in the same order: bitwise-equal results.
#include "ch08_check.cuh"
#include "ch08_poly.cuh"

constexpr int kTerms = 128, kThreads = 256, kMinBlocks = 8;
constexpr int kGroup = 4;  // units a step: 4 chains of 128 FFMA each thread

// The two ways to write y = sign(v) P(|v|) for a clamped v.
struct Branchy {
  __device__ __forceinline__ static float eval(float v) {
    float r;
    if (v < 0.0f) {
      r = -horner<kTerms>(-v);
    } else {
      r = horner<kTerms>(v);
    }
    return r;
  }
};

struct Select {
  __device__ __forceinline__ static float eval(float v) {
    const float r = horner<kTerms>(fabsf(v));
    return v < 0.0f ? -r : r;
  }
};

// Full rounds of the grid in groups, then what is left one element a thread.
template <class Odd>
__device__ __forceinline__ void odd_body(const float* __restrict__ x, float* __restrict__ y, long n) {
  const long group = (long)kGroup * kThreads, round = (long)gridDim.x * group;
  const int steps = (int)(n / round);
  unit_steps<kGroup, kThreads>(x, y, (size_t)blockIdx.x * group + threadIdx.x, (size_t)round, steps,
                               [](float v) { return Odd::eval(v); });
  for (long i = steps * round + (long)blockIdx.x * kThreads + threadIdx.x; i < n; i += (long)gridDim.x * kThreads) {
    y[i] = Odd::eval(clamp_unit(x[i]));
  }
}

__global__ void __launch_bounds__(kThreads, kMinBlocks) odd_branchy(const float* __restrict__ x,
                                                                   float* __restrict__ y, long n) {
  odd_body<Branchy>(x, y, n);
}

__global__ void __launch_bounds__(kThreads, kMinBlocks) odd_select(const float* __restrict__ x,
                                                                  float* __restrict__ y, long n) {
  odd_body<Select>(x, y, n);
}

// Blocks of `kernel` resident at once on the whole GPU (SMs x blocks per SM), read once.
template <class Kernel>
int resident_grid(Kernel kernel) {
  static int grid = 0;
  if (grid == 0) {
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0) == cudaSuccess) {
      grid = per_sm * sm_count();
    }
  }
  return grid;
}

// mode 0: branch on the sign, 1: one path and a select.
extern "C" int odd_run(int mode, const float* x, float* y, long n, cudaStream_t s) {
  if (n <= 0) return -1;
  const long needed = (n + kThreads - 1) / kThreads;
  if (mode == 0) {
    const int grid = resident_grid(odd_branchy);
    if (grid <= 0) return -1;
    odd_branchy<<<(unsigned)(needed < grid ? needed : grid), kThreads, 0, s>>>(x, y, n);
  } else {
    const int grid = resident_grid(odd_select);
    if (grid <= 0) return -1;
    odd_select<<<(unsigned)(needed < grid ? needed : grid), kThreads, 0, s>>>(x, y, n);
  }
  return (int)cudaGetLastError();
}

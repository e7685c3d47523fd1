// tail_waves.cu: y = P(clamp(x, -1, 1)) (the 128-term series of ch08_poly.cuh, compute-bound) over
// 265 tiles of 1,024 x 128 elements, with 1,024-thread blocks of which two fit on an SM
// (__launch_bounds__(1024, 2): at most 32 registers per thread).
//
//   per_tile    one block per tile, the first thing one writes: 265 blocks. An H100/H200 holds
//               132 x 2 = 264 at once, so 264 run in a first wave that keeps every SM busy, and
//               the 265th runs alone in a second wave on one SM while 131 SMs idle: half the
//               first wave's time for 0.4% of the work (alone, a block has its SM to itself).
//   persistent  a grid of exactly SMs x resident blocks (264) that strides over the work in
//               groups of 4 units of 1,024 elements (one element per thread a unit), the units
//               left over one at a time, so every block gets 1/264 of it (128 or 129 units): no
//               second wave. The grid comes from the occupancy API, so it fits any GPU.
// Both run the same body, unit_steps (ch08_poly.cuh): 4 units' FMA chains a step (128 FFMA each), so one step's
// loop and address arithmetic is shared by 512 FFMA, and the next step's inputs are loaded before
// this step's chains, so their latency hides behind them. Every element gets the same FMAs in the
// same order: bitwise-equal results.
#include "ch08_check.cuh"
#include "ch08_poly.cuh"

constexpr int kTerms = 128, kThreads = 1024, kMinBlocks = 2;
constexpr int kGroup = 4;  // units a step: 4 x 128 FFMA of straight-line code (~8.7 KB of SASS)

__device__ __forceinline__ float eval(float x) { return horner<kTerms>(clamp_unit(x)); }

// unit_steps (ch08_poly.cuh) with this file's unit work.
__device__ __forceinline__ void eval_groups(const float* __restrict__ x, float* __restrict__ y, size_t i,
                                            size_t stride, int steps) {
  unit_steps<kGroup, kThreads>(x, y, i, stride, steps, [](float v) { return horner<kTerms>(v); });
}

__global__ void __launch_bounds__(kThreads, kMinBlocks) tile_blocks(const float* __restrict__ x,
                                                                   float* __restrict__ y, int units_per_tile) {
  const size_t first = (size_t)blockIdx.x * units_per_tile * kThreads + threadIdx.x;
  const int steps = units_per_tile / kGroup;
  eval_groups(x, y, first, kGroup * kThreads, steps);
  for (int u = steps * kGroup; u < units_per_tile; ++u) {
    const size_t i = first + (size_t)u * kThreads;
    y[i] = eval(x[i]);
  }
}

__global__ void __launch_bounds__(kThreads, kMinBlocks) persistent_blocks(const float* __restrict__ x,
                                                                         float* __restrict__ y, long units) {
  const long round = (long)gridDim.x * kGroup;  // units one step of the whole grid covers
  const int steps = (int)(units / round);
  eval_groups(x, y, (size_t)blockIdx.x * kGroup * kThreads + threadIdx.x, (size_t)round * kThreads, steps);
  for (long u = steps * round + blockIdx.x; u < units; u += gridDim.x) {  // under one round left
    const size_t i = (size_t)u * kThreads + threadIdx.x;
    y[i] = eval(x[i]);
  }
}

// Blocks of persistent_blocks resident at once on the whole GPU (SMs x blocks per SM).
extern "C" int tail_persistent_grid(int* grid) {
  int per_sm = 0;
  const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent_blocks, kThreads, 0);
  *grid = per_sm * sm_count();
  return err != cudaSuccess ? (int)err : (*grid > 0 ? 0 : -1);
}

// mode 0: one block per tile (`tiles` blocks); 1: a persistent grid of `grid` blocks.
// x, y: tiles * units_per_tile * 1024 floats.
extern "C" int tail_run(int mode, const float* x, float* y, int tiles, int units_per_tile, int grid,
                        cudaStream_t s) {
  if (tiles <= 0 || units_per_tile <= 0 || grid <= 0) return -1;
  if (mode == 0) {
    tile_blocks<<<tiles, kThreads, 0, s>>>(x, y, units_per_tile);
  } else {
    persistent_blocks<<<grid, kThreads, 0, s>>>(x, y, (long)tiles * units_per_tile);
  }
  return (int)cudaGetLastError();
}

// fir_spill.cu: a 32-tap FIR filter down the columns of a matrix, y[r][c] = sum_j taps[j] * x[r+j][c].
// One thread per column strip of `strip` output rows; it keeps the last 32 input rows of its column
// in a per-thread window so that each input element is loaded from DRAM once.
//
//   ring    the window is a ring buffer indexed with (r + j) % 32, r the runtime row counter.
//           Registers cannot be indexed at run time, so the compiler puts the array in local
//           memory (LDL/STL: per-thread DRAM, cached in L1): 31 local loads and one local store
//           per output, on top of the one global load and store the filter needs.
//   shift   the same window with the row loop unrolled by 32 (strip % 32 == 0): every index
//           (p + j) % 32 is a compile-time constant, so the window lives in 32 registers.
//           Each row is loaded kAhead = 8 outputs before the first output that needs it, into a
//           second register array `ahead` (slot p % 8: a constant too), so every thread keeps
//           6-8 loads in flight, across the loop's back edge as well; left alone, ptxas issues a
//           32-row step's loads inside that step, none are in flight at the step's start, and
//           the first outputs of every step wait for DRAM. The 40 registers of rows (72 in all)
//           fit 7 blocks of 128 threads an SM (__launch_bounds__, no spill): 28 warps, 4.4 waves
//           (a last wave 43% full; 5 blocks of 256 made 3.1 waves, the last 10% full). Rows that only this thread reads, and the
//           outputs, are streamed (__ldcs/__stcs: evict-first in L2), so that L2 keeps the
//           31-row halo the block above reads again at the end of its strip.
// Same loads from global memory, same FMAs in the same order: bitwise-equal results.
#include "ch08_check.cuh"

constexpr int kTaps = 32, kThreads = 256;
// fir_shift: rows loaded ahead (divides kTaps, so slot p % kAhead is a constant); block size and
// blocks per SM, which cap it at 65,536 / (7 x 128) = 72 registers.
constexpr int kAhead = 8, kShiftThreads = 128, kShiftBlocks = 7;

struct Taps {
  float c[kTaps];
};

__global__ void __launch_bounds__(kThreads) fir_ring(const float* __restrict__ x, float* __restrict__ y,
                                                    Taps taps, int cols, int strip) {
  const int col = blockIdx.x * kThreads + threadIdx.x;
  const float* in = x + (size_t)blockIdx.y * strip * cols + col;
  float* out = y + (size_t)blockIdx.y * strip * cols + col;
  float ring[kTaps];
#pragma unroll
  for (int j = 0; j < kTaps - 1; ++j) ring[j] = in[(size_t)j * cols];
  for (int r = 0; r < strip; ++r) {
    ring[(r + kTaps - 1) % kTaps] = in[(size_t)(r + kTaps - 1) * cols];
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < kTaps; ++j) acc = fmaf(taps.c[j], ring[(r + j) % kTaps], acc);
    out[(size_t)r * cols] = acc;
  }
}

__global__ void __launch_bounds__(kShiftThreads, kShiftBlocks)
    fir_shift(const float* __restrict__ x, float* __restrict__ y, Taps taps, int cols, int strip) {
  const int col = blockIdx.x * kShiftThreads + threadIdx.x;
  const float* in = x + (size_t)blockIdx.y * strip * cols + col;  // the next row to load
  float* out = y + (size_t)blockIdx.y * strip * cols + col;
  float win[kTaps], ahead[kAhead];
#pragma unroll
  for (int j = 0; j < kTaps - 1; ++j, in += cols) win[j] = *in;  // the halo: read again by the block above
#pragma unroll
  for (int k = 0; k < kAhead; ++k, in += cols) ahead[k] = __ldcs(in);
  for (int left = strip; left > 0; left -= kTaps) {
    const bool more = left > kTaps;  // the last step loads no row past the strip's
#pragma unroll
    for (int p = 0; p < kTaps; ++p, in += cols, out += cols) {
      win[(p + kTaps - 1) % kTaps] = ahead[p % kAhead];  // loaded 8 outputs ago
      if (p + kAhead < kTaps || more) ahead[p % kAhead] = __ldcs(in);
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < kTaps; ++j) acc = fmaf(taps.c[j], win[(p + j) % kTaps], acc);
      __stcs(out, acc);
    }
  }
}

// mode 0: ring buffer (local memory), 1: unrolled window (registers). x: (rows + 31) x cols,
// y: rows x cols, taps: 32 floats in host memory; strip output rows per thread.
extern "C" int fir_run(int mode, const float* x, float* y, const float* taps_host, int rows, int cols,
                       int strip, cudaStream_t s) {
  if (cols % kThreads || strip % kTaps || strip <= 0 || rows % strip) return -1;
  Taps taps;
  for (int j = 0; j < kTaps; ++j) taps.c[j] = taps_host[j];
  if (mode == 0) {
    fir_ring<<<dim3(cols / kThreads, rows / strip), kThreads, 0, s>>>(x, y, taps, cols, strip);
  } else {
    fir_shift<<<dim3(cols / kShiftThreads, rows / strip), kShiftThreads, 0, s>>>(x, y, taps, cols, strip);
  }
  return (int)cudaGetLastError();
}

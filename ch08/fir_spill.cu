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
// Same loads from global memory, same FMAs in the same order: bitwise-equal results.
#include "ch08_check.cuh"

constexpr int kTaps = 32, kThreads = 256;

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

__global__ void __launch_bounds__(kThreads) fir_shift(const float* __restrict__ x, float* __restrict__ y,
                                                     Taps taps, int cols, int strip) {
  const int col = blockIdx.x * kThreads + threadIdx.x;
  const float* in = x + (size_t)blockIdx.y * strip * cols + col;
  float* out = y + (size_t)blockIdx.y * strip * cols + col;
  float win[kTaps];
#pragma unroll
  for (int j = 0; j < kTaps - 1; ++j) win[j] = in[(size_t)j * cols];
  for (int r0 = 0; r0 < strip; r0 += kTaps) {
#pragma unroll
    for (int p = 0; p < kTaps; ++p) {
      win[(p + kTaps - 1) % kTaps] = in[(size_t)(r0 + p + kTaps - 1) * cols];
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < kTaps; ++j) acc = fmaf(taps.c[j], win[(p + j) % kTaps], acc);
      out[(size_t)(r0 + p) * cols] = acc;
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
  const dim3 grid(cols / kThreads, rows / strip);
  if (mode == 0) {
    fir_ring<<<grid, kThreads, 0, s>>>(x, y, taps, cols, strip);
  } else {
    fir_shift<<<grid, kThreads, 0, s>>>(x, y, taps, cols, strip);
  }
  return (int)cudaGetLastError();
}

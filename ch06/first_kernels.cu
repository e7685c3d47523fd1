// first_kernels.cu: the first two kernels of the chapter.
//
//   hello         every thread prints its block and thread index (device-side printf; the text
//                 appears when the host synchronizes).
//   index_2d      a 2-D grid of 16x16 blocks over a rows x cols matrix: each thread computes its
//                 row and column from blockIdx, blockDim and threadIdx, checks it is inside the
//                 matrix (the grid is rounded up to whole blocks), and writes its row-major index.
// Python: ch06/first_kernels.py (builds this file, runs both, checks index_2d against PyTorch).
// Standalone: make && ./bin/first_kernels_sm$(arch)
#include <cstdio>
#include <vector>

#include "ch06_check.cuh"

__global__ void hello() {
  printf("Hello from block %d, thread %d\n", blockIdx.x, threadIdx.x);
}

__global__ void index_2d(int* out, int rows, int cols) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;  // x runs along a row (coalesced)
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < rows && col < cols) out[row * cols + col] = row * cols + col;
}

extern "C" int hello_run(int blocks, int threads) {
  hello<<<blocks, threads>>>();
  const int launched = launch_status();
  const int status = launched ? launched : (int)cudaDeviceSynchronize();  // prints the device's buffer
  std::fflush(stdout);  // C stdio buffers it when stdout is a pipe
  return status;
}

// out: rows x cols ints on the device. Returns the grid it used in grid_xy[0..1].
extern "C" int index_2d_run(int* out, int rows, int cols, int* grid_xy, cudaStream_t s) {
  const dim3 block(16, 16);
  const dim3 grid((cols + block.x - 1) / block.x, (rows + block.y - 1) / block.y);
  grid_xy[0] = (int)grid.x;
  grid_xy[1] = (int)grid.y;
  index_2d<<<grid, block, 0, s>>>(out, rows, cols);
  return launch_status();
}

#ifndef CH06_LIBRARY
int main() {
  if (hello_run(2, 4)) return 1;
  const int rows = 100, cols = 37;
  int* out = nullptr;
  int grid[2];
  if (cudaMalloc(&out, sizeof(int) * rows * cols) || index_2d_run(out, rows, cols, grid, 0)) return 1;
  std::vector<int> host(rows * cols);
  if (cudaMemcpy(host.data(), out, sizeof(int) * rows * cols, cudaMemcpyDeviceToHost)) return 1;
  cudaFree(out);
  for (int i = 0; i < rows * cols; ++i) {
    if (host[i] != i) {
      std::printf("MISMATCH at %d: %d\n", i, host[i]);
      return 1;
    }
  }
  std::printf("index_2d: %dx%d matrix, grid %dx%d of 16x16 blocks: all %d elements correct\n", rows, cols,
              grid[0], grid[1], rows * cols);
  return 0;
}
#endif

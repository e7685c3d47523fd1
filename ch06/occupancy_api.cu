// occupancy_api.cu: codebook dequantization, out[i] = codebook[codes[i]], with the 8,192-entry
// fp32 codebook (32 KiB) staged in shared memory once per block, then a grid-stride loop.
//
// The launch decides how much of each SM works:
//   hand-picked  <<<32 x SMs, 128>>> (the grid-stride habit: many small blocks). The 32 KiB table
//                lets only 6 blocks share an SM (228 KiB), so 6 x 128 = 768 of 2,048 threads run,
//                and each of the 4,224 blocks loads the table again.
//   occupancy    cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, dequantize): the block size
//   API          with the highest occupancy for this kernel's registers and shared memory (1,024
//                here: 2 blocks = 2,048 threads per SM) and the grid that fills every SM once.
// Same bytes per element (2 in, 4 out), same answer.
// Python: ch06/baseline_occupancy_api.py; the occupancy tool: ch06/occupancy.py
#include "ch06_check.cuh"

constexpr int kCodebook = 8192;

__global__ void dequantize(const short* __restrict__ codes, const float* __restrict__ codebook,
                           float* __restrict__ out, long n) {
  __shared__ float table[kCodebook];
  for (int i = threadIdx.x; i < kCodebook; i += blockDim.x) table[i] = codebook[i];
  __syncthreads();
  const long stride = (long)gridDim.x * blockDim.x;
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = table[codes[i] & (kCodebook - 1)];
  }
}

extern "C" int codebook_size() { return kCodebook; }

// The hand-picked launch: 128 threads, 32 blocks per SM.
extern "C" int dequantize_fixed(const short* codes, const float* codebook, float* out, long n,
                                cudaStream_t s) {
  dequantize<<<32 * sm_count(), 128, 0, s>>>(codes, codebook, out, n);
  return launch_status();
}

// The occupancy API's launch: block size and minimum full-occupancy grid, asked once (static).
extern "C" int dequantize_api_config(int* grid, int* block) {
  return (int)cudaOccupancyMaxPotentialBlockSize(grid, block, dequantize, 0, 0);
}

extern "C" int dequantize_launch(const short* codes, const float* codebook, float* out, long n,
                                 int grid, int block, cudaStream_t s) {
  dequantize<<<grid, block, 0, s>>>(codes, codebook, out, n);
  return launch_status();
}

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
// Same bytes per element (2 in, 4 out), same answer. Each thread takes 8 codes per step: one 128-bit
// load (LDG.E.128) and two 128-bit stores (n % 8 == 0 and 16-byte-aligned codes and out, else -1).
// The first H200 measurement (73% of the HBM copy ceiling) was of a kernel with one 2-byte load
// (LDG.E.U16) and one 4-byte store per element; changed after it, not yet re-measured.
// Python: ch06/baseline_occupancy_api.py; the occupancy tool: ch06/occupancy.py
#include "ch06_check.cuh"

constexpr int kCodebook = 8192;

// The two codes packed in one 32-bit word (little-endian: the lower half is the first).
__device__ __forceinline__ float2 lookup2(const float* table, int word) {
  return make_float2(table[word & (kCodebook - 1)], table[(word >> 16) & (kCodebook - 1)]);
}

// n8 = n / 8 groups of 8 codes (one int4); out as float4 pairs. The bound keeps 32 registers (as
// the scalar kernel had), so 2,048 threads still fit on an SM; without it ptxas takes 38.
__global__ void __launch_bounds__(1024, 2) dequantize(const int4* __restrict__ codes, const float* __restrict__ codebook,
                           float4* __restrict__ out, long n8) {
  __shared__ float table[kCodebook];
  for (int i = threadIdx.x; i < kCodebook; i += blockDim.x) table[i] = codebook[i];
  __syncthreads();
  const long stride = (long)gridDim.x * blockDim.x;
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += stride) {
    const int4 w = codes[i];
    const float2 p = lookup2(table, w.x), q = lookup2(table, w.y), r = lookup2(table, w.z), t = lookup2(table, w.w);
    out[2 * i] = make_float4(p.x, p.y, q.x, q.y);
    out[2 * i + 1] = make_float4(r.x, r.y, t.x, t.y);
  }
}

// Launches dequantize over n codes if they can be read as int4 and written as float4.
static int launch(const short* codes, const float* codebook, float* out, long n, int grid, int block,
                  cudaStream_t s) {
  if (n % 8 || ((size_t)codes | (size_t)out) % 16) return -1;
  dequantize<<<grid, block, 0, s>>>(reinterpret_cast<const int4*>(codes), codebook, reinterpret_cast<float4*>(out),
                                    n / 8);
  return launch_status();
}

extern "C" int codebook_size() { return kCodebook; }

// The hand-picked launch: 128 threads, 32 blocks per SM.
extern "C" int dequantize_fixed(const short* codes, const float* codebook, float* out, long n,
                                cudaStream_t s) {
  return launch(codes, codebook, out, n, 32 * sm_count(), 128, s);
}

// The occupancy API's launch: block size and minimum full-occupancy grid, asked once (static).
extern "C" int dequantize_api_config(int* grid, int* block) {
  return (int)cudaOccupancyMaxPotentialBlockSize(grid, block, dequantize, 0, 0);
}

extern "C" int dequantize_launch(const short* codes, const float* codebook, float* out, long n,
                                 int grid, int block, cudaStream_t s) {
  return launch(codes, codebook, out, n, grid, block, s);
}

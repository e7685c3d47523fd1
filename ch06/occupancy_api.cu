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
//
// dequantize4 (ch06/optimized_occupancy_api_ilp.py): the same lookup and the same occupancy-API
// launch, with 4 codes per access and 4 accesses in flight per thread. dequantize, which nvcc
// unrolls 4x, issues per 4 codes 4 two-byte loads (LDG.E.U16), 4 shared loads and 4 four-byte
// stores: 12 memory instructions, and 4 x 2 B = 8 B of reads in flight per thread, 16 KiB per SM,
// about what Little's law asks for its reads alone at full rate (1.4 TB/s x ~1.5 us loaded latency
// / 132 SMs). dequantize4 reads 4 codes as one 8-byte load (LDG.E.64: a warp reads 256 contiguous
// bytes) and writes their 4 floats as one float4 (STG.E.128: a warp writes 512 contiguous bytes,
// 4 whole lines), and loads the codes of 4 such groups, a grid stride apart, before it looks any up:
// 6 memory instructions per 4 codes, 32 B of reads in flight per thread, 64 KiB per SM.
// The earlier 8-codes-per-thread kernel (one LDG.E.128, two STG.E.128; 49% of HBM copy against the
// scalar kernel's 73%) wrote out[2i] and out[2i + 1]: each store instruction put 16 B at a 32-byte
// stride across the warp, 8 lines and half of every 32-byte sector it touched, twice the L2 write
// requests of a contiguous float4 store, each sector completed only by the next instruction. Its
// unrolled loop already kept 3-4 16-byte loads per thread in flight (nvcc 13.0 SASS), so bytes in
// flight were not what it lacked: the store pattern is the difference we see. Not profiled.
// The shared-memory lookups stay: random codes put a warp's 32 reads ~3.5 deep on the busiest bank
// on average (~30 us of shared-memory passes per SM for 64M codes against ~96 us of HBM time),
// overlapped by the SM's other warps.
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

constexpr int kGroups = 4;  // 4-code groups per thread per step, their loads all issued first

// Four codes packed in two 32-bit words (little-endian: the lower half is the earlier code).
__device__ __forceinline__ float4 lookup4(const float* table, uint2 w) {
  return make_float4(table[w.x & (kCodebook - 1)], table[(w.x >> 16) & (kCodebook - 1)],
                     table[w.y & (kCodebook - 1)], table[(w.y >> 16) & (kCodebook - 1)]);
}

// n4 = n / 4 groups of 4 codes (one uint2 each); out as float4s. The bound holds 32 registers (ptxas
// takes 32 without it on nvcc 13.0), so the API's answer stays 1,024 threads x 2 blocks per SM.
__global__ void __launch_bounds__(1024, 2) dequantize4(const uint2* __restrict__ codes, const float* __restrict__ codebook,
                            float4* __restrict__ out, long n4) {
  __shared__ float table[kCodebook];
  for (int i = threadIdx.x; i < kCodebook; i += blockDim.x) table[i] = codebook[i];
  __syncthreads();
  const long stride = (long)gridDim.x * blockDim.x;
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (kGroups - 1) * stride < n4; i += kGroups * stride) {
    uint2 w[kGroups];
#pragma unroll
    for (int k = 0; k < kGroups; ++k) w[k] = codes[i + k * stride];
#pragma unroll
    for (int k = 0; k < kGroups; ++k) out[i + k * stride] = lookup4(table, w[k]);
  }
  for (; i < n4; i += stride) out[i] = lookup4(table, codes[i]);
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

// dequantize4's launch from the occupancy API, as for dequantize: asked once (Python keeps it).
extern "C" int dequantize4_api_config(int* grid, int* block) {
  return (int)cudaOccupancyMaxPotentialBlockSize(grid, block, dequantize4, 0, 0);
}

// -1 unless n % 4 == 0, codes 8-byte and out 16-byte aligned (uint2 loads, float4 stores).
extern "C" int dequantize4_launch(const short* codes, const float* codebook, float* out, long n, int grid,
                                  int block, cudaStream_t s) {
  if (n % 4 || (size_t)codes % 8 || (size_t)out % 16) return -1;
  dequantize4<<<grid, block, 0, s>>>(reinterpret_cast<const uint2*>(codes), codebook,
                                     reinterpret_cast<float4*>(out), n / 4);
  return launch_status();
}

// vectorized_ops.cu: out[r][c] = x[r][c] * scale[c] + bias[c] over a rows x cols fp32 matrix, the
// broadcast torch.addcmul(bias, x, scale) as one kernel of our own (ch06/optimized_vectorized_ops_native.py).
//
// PyTorch's broadcast addcmul reached 57% of the H200's HBM copy ceiling: its elementwise loop
// recomputes each operand's offset from the broadcast strides and, with scale and bias at stride 0
// over rows, does not take its 128-bit path (from PyTorch's Loops.cuh: the vectorized path needs
// every operand contiguous; not profiled). Here the broadcast is in the grid instead:
//   blockIdx.x  one 256-thread slice of the columns, in float4s (256 x 16 B = 4 KiB of a row);
//   thread      one column group of 4: it reads its scale and bias float4 once, into registers;
//   blockIdx.y  a row group: the thread walks rows blockIdx.y, + gridDim.y, ... (a grid-stride loop
//               over rows), kRows = 2 rows per step, both 128-bit loads issued before any math
//               (LDG.E.128 / STG.E.128 in the SASS): 32 B in flight per thread, 64 KiB per SM at
//               2,048 threads, ~4x what Little's law asks for the reads (2.1 TB/s x ~1 us / 132 SMs).
// kRows = 4 does not fit 32 registers: ptxas either spills (with the 8-block bound) or, at 32
// registers without it, issues the loads two by two; at 40 registers (6 blocks per SM) it keeps
// 4 in flight, 96 KiB per SM: tried on an H200 (2026-11-29), 0.6201 ms for the pair against this
// kernel's 0.6203: more bytes in flight change nothing, so it stays at 2.
// The grid is the occupancy API's resident blocks per SM x SMs (8 x 132 on an H200), split into
// column slices x row groups. Each element is fmaf(x, scale, bias): one rounding, as PyTorch's
// CUDA addcmul with value = 1 computes it (std::fma in DeviceAddCmulCdiv.cuh); a + b * c written
// out would be contracted to the same FFMA by nvcc's default --fmad=true.
#include "ch06_check.cuh"

constexpr int kAffineThreads = 256;
constexpr int kRows = 2;

__device__ __forceinline__ float4 affine4(float4 v, float4 s, float4 b) {
  return make_float4(fmaf(v.x, s.x, b.x), fmaf(v.y, s.y, b.y), fmaf(v.z, s.z, b.z), fmaf(v.w, s.w, b.w));
}

// cols4 = cols / 4 float4s per row. 8 blocks of 256 per SM: the bound keeps <= 32 registers.
__global__ void __launch_bounds__(kAffineThreads, 8)
    affine_rows(const float4* __restrict__ x, const float4* __restrict__ scale, const float4* __restrict__ bias,
                float4* __restrict__ out, int rows, int cols4) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols4) return;
  const float4 s = scale[c], b = bias[c];
  const int step = gridDim.y;
  int r = blockIdx.y;
  for (; r + (kRows - 1) * step < rows; r += kRows * step) {
    float4 v[kRows];
#pragma unroll
    for (int k = 0; k < kRows; ++k) v[k] = x[(long)(r + k * step) * cols4 + c];
#pragma unroll
    for (int k = 0; k < kRows; ++k) out[(long)(r + k * step) * cols4 + c] = affine4(v[k], s, b);
  }
  for (; r < rows; r += step) out[(long)r * cols4 + c] = affine4(x[(long)r * cols4 + c], s, b);
}

// Column slices of kAffineThreads float4s.
static int column_slices(int cols) { return (cols / 4 + kAffineThreads - 1) / kAffineThreads; }

// Row groups (gridDim.y) so that slices x groups fill every SM once: resident blocks per SM (the
// occupancy API) x SMs / slices, at least 1, at most rows. -1 on a shape the kernel cannot take.
extern "C" int affine_rows_groups(int rows, int cols) {
  int per_sm = 0;
  if (rows <= 0 || cols <= 0 || cols % 4) return -1;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, affine_rows, kAffineThreads, 0)) return -1;
  const int slices = column_slices(cols), groups = (per_sm * sm_count() + slices - 1) / slices;
  return groups < 1 ? 1 : (groups > rows ? rows : groups);
}

// Blocks of affine_rows resident on the whole GPU at once (the occupancy API's blocks per SM x SMs:
// 8 x 132 on an H200), -1 on an error. optimized_vectorized_ops_wave.py sizes its grid to at most this:
// affine_rows_groups rounds the row groups up (128 slices x 9 = 1,152 blocks for 1,056 places), so
// 96 blocks, 8% of the bytes, run in a second wave on a GPU 9% occupied; rounding down (x 8 = 1,024
// blocks, 256 rows each) puts every block in the one wave.
extern "C" int affine_rows_resident() {
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, affine_rows, kAffineThreads, 0)) return -1;
  return per_sm * sm_count();
}

// x, out: rows x cols, contiguous; scale, bias: cols. -1 unless cols % 4 == 0 and every pointer is
// 16-byte aligned (float4 access), or groups is not in [1, 65535].
extern "C" int affine_rows_run(const float* x, const float* scale, const float* bias, float* out, int rows,
                               int cols, int groups, cudaStream_t s) {
  if (cols % 4 || ((size_t)x | (size_t)scale | (size_t)bias | (size_t)out) % 16 || groups < 1 || groups > 65535)
    return -1;
  const dim3 grid(column_slices(cols), groups);
  affine_rows<<<grid, kAffineThreads, 0, s>>>(reinterpret_cast<const float4*>(x),
                                              reinterpret_cast<const float4*>(scale),
                                              reinterpret_cast<const float4*>(bias),
                                              reinterpret_cast<float4*>(out), rows, cols / 4);
  return launch_status();
}

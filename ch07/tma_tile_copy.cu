// tma_tile_copy.cu: a 5-point stencil, out = 4 x[i,j] - x[i-1,j] - x[i+1,j] - x[i,j-1] - x[i,j+1], over a
// (rows x cols) fp32 image with zeros outside it. Each block computes a 32x64 tile of out from a
// tile of x (the tile plus a one-pixel halo) staged in shared memory. Both kernels share the
// compute; they differ in how the tile gets there.
//
//   threads  the 256 threads load a 34x68 box (image column c0 - 1 on; 68 floats so a row is
//            16-byte whole) themselves: per element, index arithmetic, a bounds check for the
//            image edge, and a 4-byte load that is not 16-byte aligned.
//   tma      one thread hands the Tensor Memory Accelerator a tensor map and the box's corner
//            (which may lie outside the image: TMA fills out-of-bounds elements with zeros);
//            the copy engine moves a 34x72 box (UTMALDG) and signals an mbarrier with the byte
//            count; the block waits on the barrier. No per-element address or bounds work.
//            The box starts 4 columns left of the tile, not 1: a TMA box's first column must lie
//            on a 16 B boundary of its row (Triton's interpreter checks the same rule: "block
//            offset start must be 16-byte aligned"); this file's first version, with its box at
//            column c0 - 1, stopped an H200 with "an illegal instruction was encountered".
//            The left halo is box column 3; the right one is column 68 (72 floats: 16 B whole).
//
// The tensor map (cuTensorMapEncodeTiled, through cudaGetDriverEntryPointByVersion: no -lcuda)
// is encoded on the host for each call: a few hundred nanoseconds of host work.
#include <cuda.h>
#include <cudaTypedefs.h>
#include "ch07_tma.cuh"

#include <cuda/barrier>

using barrier = cuda::barrier<cuda::thread_scope_block>;
namespace cde = cuda::device::experimental;

constexpr int kThreads = 256, kTileH = 32, kTileW = 64, kBoxH = kTileH + 2, kBoxW = kTileW + 4;
constexpr int kTmaLeft = 4, kTmaBoxW = kTileW + 8;  // TMA box: image columns c0 - 4 .. c0 + 67
constexpr int kRowsPerThread = kTileH * kTileW / kThreads;  // 8: thread t owns column t % 64, 8 rows
static_assert(kTmaLeft * sizeof(float) % 16 == 0 && kTileW * sizeof(float) % 16 == 0,
              "a TMA box's first column must be 16-byte aligned in the image row");
static_assert(kTmaBoxW * sizeof(float) % 16 == 0 && kTmaBoxW >= kTmaLeft + kTileW + 1 && kTmaBoxW <= 256,
              "a TMA box row is a whole number of 16 bytes, holds the right halo, at most 256 elements");

// The stencil of the block's 32x64 tile from its staged box of kW columns (box row 0 = image row
// r0 - 1, box column kLeft = image column c0): coalesced stores, conflict-free shared reads.
template <int kW, int kLeft>
__device__ void stencil_from_tile(const float (*tile)[kW], float* __restrict__ out, int r0, int c0, int cols) {
  const int tc = threadIdx.x % kTileW, sc = tc + kLeft, ry = (threadIdx.x / kTileW) * kRowsPerThread;
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int sr = ry + i + 1;
    const float v = 4.f * tile[sr][sc] - tile[sr - 1][sc] - tile[sr + 1][sc] - tile[sr][sc - 1] - tile[sr][sc + 1];
    out[(long)(r0 + ry + i) * cols + c0 + tc] = v;
  }
}

__global__ __launch_bounds__(kThreads) void stencil_threads(const float* __restrict__ in, float* __restrict__ out,
                                                            int rows, int cols) {
  __shared__ alignas(128) float tile[kBoxH][kBoxW];
  const int r0 = blockIdx.y * kTileH, c0 = blockIdx.x * kTileW;
  for (int k = threadIdx.x; k < kBoxH * kBoxW; k += kThreads) {
    const int r = r0 - 1 + k / kBoxW, c = c0 - 1 + k % kBoxW;
    tile[k / kBoxW][k % kBoxW] = (r >= 0 && r < rows && c >= 0 && c < cols) ? in[(long)r * cols + c] : 0.f;
  }
  __syncthreads();
  stencil_from_tile<kBoxW, 1>(tile, out, r0, c0, cols);
}

__global__ __launch_bounds__(kThreads) void stencil_tma(const __grid_constant__ CUtensorMap map, float* __restrict__ out,
                                                        int cols) {
  __shared__ alignas(128) float tile[kBoxH][kTmaBoxW];  // TMA writes shared memory at 128-byte alignment
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ barrier bar;
  const int r0 = blockIdx.y * kTileH, c0 = blockIdx.x * kTileW;
  if (threadIdx.x == 0) {
    init(&bar, blockDim.x);
    cde::fence_proxy_async_shared_cta();  // the barrier's init is visible to the copy engine
  }
  __syncthreads();
  barrier::arrival_token token;
  if (threadIdx.x == 0) {
    cde::cp_async_bulk_tensor_2d_global_to_shared(&tile, &map, c0 - kTmaLeft, r0 - 1, bar);  // (column, row)
    token = cuda::device::barrier_arrive_tx(bar, 1, sizeof(tile));
  } else {
    token = bar.arrive();
  }
  bar.wait(std::move(token));
  stencil_from_tile<kTmaBoxW, kTmaLeft>(tile, out, r0, c0, cols);
}

// A map of the row-major (rows x cols) fp32 image whose box is the TMA kernel's 34x72 tile.
static int make_map(CUtensorMap* map, const float* in, int rows, int cols) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled();
  if (!encode) return -3;
  const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};  // innermost first
  const cuuint64_t strides[1] = {(cuuint64_t)cols * sizeof(float)};  // bytes between rows
  const cuuint32_t box[2] = {kTmaBoxW, kBoxH}, step[2] = {1, 1};
  const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float*>(in), dims, strides, box, step,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : 1000 + (int)r;
}

// rows a multiple of 32, cols of 64; in and out 16-byte aligned. use_tma: 0 threads, 1 TMA.
extern "C" int stencil_run(int use_tma, const float* in, float* out, int rows, int cols, cudaStream_t s) {
  if (rows % kTileH || cols % kTileW || rows <= 0 || cols <= 0 || ((size_t)in | (size_t)out) % 16) return -1;
  const dim3 grid(cols / kTileW, rows / kTileH);
  if (!use_tma) {
    stencil_threads<<<grid, kThreads, 0, s>>>(in, out, rows, cols);
    return (int)cudaGetLastError();
  }
  CUtensorMap map;
  if (const int err = make_map(&map, in, rows, cols)) return err;
  stencil_tma<<<grid, kThreads, 0, s>>>(map, out, cols);
  return (int)cudaGetLastError();
}

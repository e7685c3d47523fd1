// transpose.cu: out (cols x rows) = in (rows x cols)^T, fp32, three kernels on the same launch shape
// (32x8 threads per 32x32 tile, 4 elements per thread).
//
//   naive   reads rows of `in` (coalesced) and writes columns of `out`: each warp-wide store hits
//           32 rows, 32 separate sectors carrying 4 useful bytes each.
//   tiled   stages the 32x32 tile in shared memory, then writes rows of `out` (coalesced both ways);
//           but reading a column of the tile hits one bank 32 times (a 32-way bank conflict).
//   padded  the same tile with one float of padding per row (33 words): a column spans 32 banks.
constexpr int kTile = 32, kRows = 8;

__global__ void transpose_naive(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  const int x = blockIdx.x * kTile + threadIdx.x;
  const int y = blockIdx.y * kTile + threadIdx.y;
  for (int j = 0; j < kTile; j += kRows) out[(long)x * rows + y + j] = in[(long)(y + j) * cols + x];
}

template <int kPad>
__global__ void transpose_tiled(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[kTile][kTile + kPad];
  int x = blockIdx.x * kTile + threadIdx.x;  // column of in
  int y = blockIdx.y * kTile + threadIdx.y;  // row of in
  for (int j = 0; j < kTile; j += kRows) tile[threadIdx.y + j][threadIdx.x] = in[(long)(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * kTile + threadIdx.x;  // column of out = row of in
  y = blockIdx.x * kTile + threadIdx.y;  // row of out = column of in
  for (int j = 0; j < kTile; j += kRows) out[(long)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

enum Mode { kNaive = 0, kTiled, kPadded };

// rows and cols must be multiples of 32.
extern "C" int transpose_run(int mode, const float* in, float* out, int rows, int cols, cudaStream_t s) {
  if (rows % kTile || cols % kTile || rows <= 0 || cols <= 0) return -1;
  const dim3 grid(cols / kTile, rows / kTile), block(kTile, kRows);
  if (mode == kNaive) {
    transpose_naive<<<grid, block, 0, s>>>(in, out, rows, cols);
  } else if (mode == kTiled) {
    transpose_tiled<0><<<grid, block, 0, s>>>(in, out, rows, cols);
  } else if (mode == kPadded) {
    transpose_tiled<1><<<grid, block, 0, s>>>(in, out, rows, cols);
  } else {
    return -1;
  }
  return (int)cudaGetLastError();
}

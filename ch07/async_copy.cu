// async_copy.cu: inclusive prefix sum along each row of a (rows x len) fp32 matrix, one block per row.
//
// A row is scanned tile by tile (1,024 floats), carrying the running total from tile to tile, so a
// row cannot be split across blocks: the grid is the row count (256 here, two blocks per SM), and
// occupancy cannot hide DRAM latency.
//
//   sync       each thread loads its 4 floats of the tile (one 128-bit load), then scans them:
//              the block waits a full DRAM round trip per tile, with at most one tile (4 KiB) in
//              flight: 8 KiB per SM, less than the ~11 KiB of reads per SM that Little's law asks
//              for at ~4 TB/s (read + write) and ~0.7 us of loaded DRAM latency.
//   pipelined  cp.async (LDGSTS) copies tiles into an 8-stage shared-memory ring: while tile t is
//              scanned, tiles t+1..t+7 are in flight. Each thread copies and later reads only its
//              own 16 bytes of a stage, so waiting on its own copies (no barrier) is enough.
//
// Both scan with the same code in the same order: the results agree bit for bit.
#include <cuda_pipeline.h>

constexpr int kThreads = 256, kPer = 4, kTile = kThreads * kPer, kWarps = kThreads / 32, kStages = 8;

// v: this thread's 4 consecutive values (thread t holds tile elements 4t..4t+3). Scans the tile in
// place, adds `carry` to every value, and returns the tile's total.
__device__ float scan_tile(float (&v)[kPer], float carry, float* warp_sums) {
#pragma unroll
  for (int i = 1; i < kPer; ++i) v[i] += v[i - 1];
  const float total = v[kPer - 1];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float incl = total;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const float y = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += y;
  }
  if (lane == 31) warp_sums[warp] = incl;
  __syncthreads();
  float before = 0.f, block_total = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const float s = warp_sums[w];
    if (w < warp) before += s;
    block_total += s;
  }
  __syncthreads();  // warp_sums is rewritten by the next tile
  const float offset = carry + (before + (incl - total));
#pragma unroll
  for (int i = 0; i < kPer; ++i) v[i] += offset;
  return block_total;
}

__device__ void scan_and_store(float4 a, float& carry, float* warp_sums, float4* dst) {
  float v[kPer] = {a.x, a.y, a.z, a.w};
  carry += scan_tile(v, carry, warp_sums);
  *dst = make_float4(v[0], v[1], v[2], v[3]);
}

__global__ __launch_bounds__(kThreads) void cumsum_sync(const float* __restrict__ in, float* __restrict__ out, long len) {
  __shared__ float warp_sums[kWarps];
  const float4* src = reinterpret_cast<const float4*>(in + blockIdx.x * len) + threadIdx.x;
  float4* dst = reinterpret_cast<float4*>(out + blockIdx.x * len) + threadIdx.x;
  float carry = 0.f;
  for (long t = 0; t < len / kTile; ++t) scan_and_store(src[t * kThreads], carry, warp_sums, dst + t * kThreads);
}

__global__ __launch_bounds__(kThreads) void cumsum_pipelined(const float* __restrict__ in, float* __restrict__ out, long len) {
  __shared__ float4 ring[kStages][kThreads];
  __shared__ float warp_sums[kWarps];
  const float4* src = reinterpret_cast<const float4*>(in + blockIdx.x * len) + threadIdx.x;
  float4* dst = reinterpret_cast<float4*>(out + blockIdx.x * len) + threadIdx.x;
  const long tiles = len / kTile;
  auto issue = [&](long t) {  // this thread's 16 bytes of tile t into its stage
    __pipeline_memcpy_async(&ring[t % kStages][threadIdx.x], src + t * kThreads, sizeof(float4));
  };
  for (int t = 0; t < kStages - 1; ++t) {
    if (t < tiles) issue(t);
    __pipeline_commit();
  }
  float carry = 0.f;
  for (long t = 0; t < tiles; ++t) {
    if (t + kStages - 1 < tiles) issue(t + kStages - 1);  // the stage tile t-1 used: read already
    __pipeline_commit();
    __pipeline_wait_prior(kStages - 1);  // tile t has landed
    scan_and_store(ring[t % kStages][threadIdx.x], carry, warp_sums, dst + t * kThreads);
  }
}

// in, out: rows x len fp32, 16-byte aligned; len a multiple of 1024. pipelined: 0 sync, 1 cp.async.
extern "C" int cumsum_rows_run(int pipelined, const float* in, float* out, int rows, long len, cudaStream_t s) {
  if (len % kTile || len <= 0 || rows <= 0 || ((size_t)in | (size_t)out) % 16) return -1;
  if (pipelined) {
    cumsum_pipelined<<<rows, kThreads, 0, s>>>(in, out, len);
  } else {
    cumsum_sync<<<rows, kThreads, 0, s>>>(in, out, len);
  }
  return (int)cudaGetLastError();
}

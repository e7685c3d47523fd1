// gemm_simt.cu: rung 1 of the ladder, C = A @ B^T on the FP32 pipes (no tensor cores).
//
// A register-tiled shared-memory GEMM, the fastest plain-CUDA form of chapter 9: a 256-thread
// block owns a 128x128 tile of C; per 8-wide slice of K it stages A and B (converted to fp32,
// stored k-major so a thread reads 4 consecutive rows as one float4) and each thread accumulates
// an 8x8 patch (two 4-row by two 4-column quads, 64 apart, so a warp's float4 reads hit distinct
// banks) with 64 FFMAs per k. The next slice is fetched into registers while this one is used.
// bf16 x bf16 products are exact in fp32, so only the summation order differs from a tensor-core
// GEMM. Bound: FP32 FMA issue, ~67 TFLOP/s peak on an H100/H200 (cuBLAS SGEMM ~51 measured).
#include "ch10_gemm.cuh"

namespace {
constexpr int kBM = 128, kBN = 128, kBK = 8, kThreads = 256;

struct Slice {  // this thread's share of one K slice: 4 consecutive bf16 of A and of B
  uint2 a, b;
};

__device__ __forceinline__ Slice fetch(const bf16* a, const bf16* b, int k, int kt) {
  const int row = threadIdx.x / 2, col = kt * kBK + (threadIdx.x % 2) * 4;
  return {*reinterpret_cast<const uint2*>(a + (size_t)row * k + col),
          *reinterpret_cast<const uint2*>(b + (size_t)row * k + col)};
}

__device__ __forceinline__ void stage(const Slice& s, float (*as)[kBM], float (*bs)[kBN]) {
  const int row = threadIdx.x / 2, col = (threadIdx.x % 2) * 4;
  const __nv_bfloat162* a2 = reinterpret_cast<const __nv_bfloat162*>(&s.a);
  const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&s.b);
  for (int i = 0; i < 2; ++i) {
    const float2 fa = __bfloat1622float2(a2[i]), fb = __bfloat1622float2(b2[i]);
    as[col + 2 * i][row] = fa.x, as[col + 2 * i + 1][row] = fa.y;
    bs[col + 2 * i][row] = fb.x, bs[col + 2 * i + 1][row] = fb.y;
  }
}

__global__ __launch_bounds__(kThreads) void gemm_simt(const bf16* __restrict__ a, const bf16* __restrict__ b,
                                                      bf16* __restrict__ c, int m, int n, int k) {
  __shared__ alignas(16) float as[kBK][kBM];
  __shared__ alignas(16) float bs[kBK][kBN];
  const Tile tile = grouped_tile(m / kBM, n / kBN);
  a += (size_t)tile.m * kBM * k;
  b += (size_t)tile.n * kBN * k;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[8][8] = {};
  Slice next = fetch(a, b, k, 0);
  for (int kt = 0; kt < k / kBK; ++kt) {
    stage(next, as, bs);
    __syncthreads();
    if (kt + 1 < k / kBK) next = fetch(a, b, k, kt + 1);  // in flight while this slice is used
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      float av[8], bv[8];
      *reinterpret_cast<float4*>(av) = *reinterpret_cast<const float4*>(&as[kk][ty * 4]);
      *reinterpret_cast<float4*>(av + 4) = *reinterpret_cast<const float4*>(&as[kk][64 + ty * 4]);
      *reinterpret_cast<float4*>(bv) = *reinterpret_cast<const float4*>(&bs[kk][tx * 4]);
      *reinterpret_cast<float4*>(bv + 4) = *reinterpret_cast<const float4*>(&bs[kk][64 + tx * 4]);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = tile.m * kBM + (i / 4) * 64 + ty * 4 + i % 4;
#pragma unroll
    for (int j = 0; j < 8; j += 2) {
      const int col = tile.n * kBN + (j / 4) * 64 + tx * 4 + j % 4;
      store_bf16x2(c + (size_t)row * n + col, acc[i][j], acc[i][j + 1]);
    }
  }
}
}  // namespace

extern "C" int gemm_bf16(const bf16* a, const bf16* b, bf16* c, int m, int n, int k, cudaStream_t s) {
  if (!tiles_fit(m, n, k, kBM, kBN, kBK)) return kBadShape;
  gemm_simt<<<(m / kBM) * (n / kBN), kThreads, 0, s>>>(a, b, c, m, n, k);
  return static_cast<int>(cudaGetLastError());
}

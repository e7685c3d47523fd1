// tiled_gemm.cu: C = A @ B on the CUDA cores (row-major, fp32 accumulation), two ways.
//
// smem_tiled_f32: 32x32 tiles of A and B in shared memory, one output per thread. Each FMA needs
//   two shared-memory loads (As[ty][kk] is a broadcast, Bs[kk][tx] one word per lane), so the
//   kernel is bound by shared-memory bandwidth, not by the FMA units.
// reg_tiled<T>: a 128x128 tile per 256-thread block, 8 k-columns at a time; each thread keeps an
//   8x8 block of C in registers and, per k, loads 8 values of A and 8 of B (four 128-bit shared
//   loads) for 64 FMAs: 16x fewer shared-memory loads per FMA. The next k-slab is fetched from
//   global memory into registers while the current one is multiplied. T = float (register_tiling)
//   or __nv_bfloat16 (the baseline of cublaslt_gemm: operands widened to fp32 in shared memory).
// Shapes must be multiples of the tiles (M, N of 128, K of 32); the entry points return 1 otherwise.
// Python: ch09/baseline_register_tiling.py, optimized_register_tiling.py, baseline_cublaslt_gemm.py
#include <cuda_bf16.h>
#include <cuda_runtime.h>

constexpr int kTile = 32;                          // smem_tiled_f32
constexpr int kBM = 128, kBN = 128, kBK = 8;       // reg_tiled: block tile
constexpr int kThreads = 256;                      // 16 x 16 threads, 8x8 outputs each

__global__ void smem_tiled_f32(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                               int n, int k) {
  __shared__ float as[kTile][kTile], bs[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kTile + ty, col = blockIdx.x * kTile + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += kTile) {
    as[ty][tx] = a[(size_t)row * k + k0 + tx];
    bs[ty][tx] = b[(size_t)(k0 + ty) * n + col];
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) acc = fmaf(as[ty][kk], bs[kk][tx], acc);
    __syncthreads();
  }
  c[(size_t)row * n + col] = acc;
}

__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 load4(const __nv_bfloat16* p) {
  uint2 raw = *reinterpret_cast<const uint2*>(p);  // 4 bf16 in 8 bytes
  float2 lo = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.x));
  float2 hi = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}
__device__ __forceinline__ void store4(float* p, const float* v) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store4(__nv_bfloat16* p, const float* v) {
  __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]), hi = __floats2bfloat162_rn(v[2], v[3]);
  uint2 raw;
  raw.x = *reinterpret_cast<unsigned*>(&lo);
  raw.y = *reinterpret_cast<unsigned*>(&hi);
  *reinterpret_cast<uint2*>(p) = raw;
}

// Thread (tx, ty) owns rows ty*4+{0..3} and 64+ty*4+{0..3}, columns tx*4+{0..3} and 64+tx*4+{0..3}
// of the block tile: two float4 per operand per k, contiguous across the warp (no bank conflicts).
template <typename T>
__global__ void __launch_bounds__(kThreads) reg_tiled(const T* __restrict__ a, const T* __restrict__ b,
                                                      T* __restrict__ c, int n, int k) {
  __shared__ __align__(16) float as[kBK][kBM];  // A tile transposed: as[k][m]
  __shared__ __align__(16) float bs[kBK][kBN];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int row0 = blockIdx.y * kBM, col0 = blockIdx.x * kBN;
  const int a_row = tid / 2, a_col = (tid % 2) * 4;   // 128 rows x 8 k: one 4-vector per thread
  const int b_row = tid / 32, b_col = (tid % 32) * 4; // 8 k x 128 columns: one 4-vector per thread
  const T* a_src = a + (size_t)(row0 + a_row) * k + a_col;
  const T* b_src = b + (size_t)b_row * n + col0 + b_col;
  float acc[8][8] = {};
  float4 a_next = load4(a_src), b_next = load4(b_src);
  for (int k0 = 0; k0 < k; k0 += kBK) {
    as[a_col + 0][a_row] = a_next.x;
    as[a_col + 1][a_row] = a_next.y;
    as[a_col + 2][a_row] = a_next.z;
    as[a_col + 3][a_row] = a_next.w;
    *reinterpret_cast<float4*>(&bs[b_row][b_col]) = b_next;
    __syncthreads();
    if (k0 + kBK < k) {  // fetch the next slab while this one is multiplied
      a_next = load4(a_src + k0 + kBK);
      b_next = load4(b_src + (size_t)(k0 + kBK) * n);
    }
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      const float4 a0 = *reinterpret_cast<const float4*>(&as[kk][ty * 4]);
      const float4 a1 = *reinterpret_cast<const float4*>(&as[kk][64 + ty * 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&bs[kk][tx * 4]);
      const float4 b1 = *reinterpret_cast<const float4*>(&bs[kk][64 + tx * 4]);
      const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = row0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
    T* out = c + (size_t)row * n + col0;
    store4(out + tx * 4, acc[i]);
    store4(out + 64 + tx * 4, acc[i] + 4);
  }
}

static bool tiles_fit(int m, int n, int k) { return m % kBM == 0 && n % kBN == 0 && k % kTile == 0; }

extern "C" int smem_gemm_f32(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t s) {
  if (!tiles_fit(m, n, k)) return 1;
  smem_tiled_f32<<<dim3(n / kTile, m / kTile), dim3(kTile, kTile), 0, s>>>(a, b, c, n, k);
  return (int)cudaGetLastError();
}

extern "C" int reg_gemm_f32(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t s) {
  if (!tiles_fit(m, n, k)) return 1;
  reg_tiled<float><<<dim3(n / kBN, m / kBM), kThreads, 0, s>>>(a, b, c, n, k);
  return (int)cudaGetLastError();
}

extern "C" int reg_gemm_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int m, int n,
                             int k, cudaStream_t s) {
  if (!tiles_fit(m, n, k)) return 1;
  reg_tiled<__nv_bfloat16><<<dim3(n / kBN, m / kBM), kThreads, 0, s>>>(a, b, c, n, k);
  return (int)cudaGetLastError();
}

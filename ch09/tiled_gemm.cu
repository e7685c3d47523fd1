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
// warp_tiled: the same 128x128 tile on 128 threads, 8x16 outputs each, for fewer non-FFMA instructions
//   per FFMA and fewer barriers: per k, 24 operands (six 128-bit loads, amortized) feed 128 FFMAs
//   (reg_tiled: four loads per 64); the next 8-k slab is copied global -> shared by cp.async into
//   the idle one of two buffers (no staging registers, no transposing stores), so one __syncthreads
//   per slab instead of two. Each warp owns a 64x64 sub-tile, so a 128-bit shared load reads 8 rows
//   of A or 64 contiguous bytes of B: no bank conflict by construction (not yet profiled).
// Shapes must be multiples of the tiles (M, N of 128, K of 32); the entry points return 1 otherwise.
// Python: ch09/baseline_register_tiling.py, optimized_register_tiling.py,
//   optimized_register_tiling_warptile.py, baseline_cublaslt_gemm.py
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

// warp_tiled: A stays row-major in shared memory (cp.async cannot transpose), rows padded to 12 floats
// so the 8 consecutive rows one load reads sit in distinct 16-byte bank groups. Lane (ty, tx) =
// (lane / 4, lane % 4) of warp (wm, wn) owns rows 64*wm + ty + 8*i (i < 8) and columns
// 64*wn + 4*tx + 16*q + {0..3} (q < 4). Per 4 k it loads its 8 rows of A (4 k each); per k, 16
// values of B. Every output adds its products in k order with fmaf from 0, as reg_tiled does.
constexpr int kWThreads = 128, kWK = 8, kAStride = kWK + 4;

__device__ __forceinline__ void copy16(float* dst, const float* src) {  // cp.async, 16 bytes, L2 only
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src));
}

__device__ __forceinline__ float part(const float4& v, int i) {  // v's element i (i known when unrolled)
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__global__ void __launch_bounds__(kWThreads, 2) warp_tiled(const float* __restrict__ a, const float* __restrict__ b,
                                                           float* __restrict__ c, int n, int k) {
  __shared__ __align__(16) float as[2][kBM][kAStride];  // as[buf][m][k]
  __shared__ __align__(16) float bs[2][kWK][kBN];       // bs[buf][k][n]
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int tm = 64 * (warp / 2) + lane / 4, tn = 64 * (warp % 2) + (lane % 4) * 4;
  const int row0 = blockIdx.y * kBM, col0 = blockIdx.x * kBN;
  const int a_row = tid / 2, a_col = (tid % 2) * 4;   // rows a_row and a_row + 64: 4 k each
  const int b_row = tid / 32, b_col = (tid % 32) * 4; // k rows b_row and b_row + 4: 4 columns each
  const float* a_src = a + (size_t)(row0 + a_row) * k + a_col;
  const float* b_src = b + (size_t)b_row * n + col0 + b_col;
  auto fetch = [&](int buf) {  // one slab's copies into buffer buf, then on to the next slab
    copy16(&as[buf][a_row][a_col], a_src);
    copy16(&as[buf][a_row + 64][a_col], a_src + (size_t)64 * k);
    copy16(&bs[buf][b_row][b_col], b_src);
    copy16(&bs[buf][b_row + 4][b_col], b_src + (size_t)4 * n);
    asm volatile("cp.async.commit_group;\n" ::);
    a_src += kWK;
    b_src += (size_t)kWK * n;
  };
  float acc[8][16] = {};
  fetch(0);
  asm volatile("cp.async.wait_group 0;\n" ::);
  __syncthreads();
  const int slabs = k / kWK;
  for (int s = 0; s < slabs; ++s) {
    const int buf = s & 1;
    if (s + 1 < slabs) fetch(buf ^ 1);  // that buffer's last readers passed the previous barrier
#pragma unroll
    for (int k4 = 0; k4 < kWK; k4 += 4) {
      float4 av[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) av[i] = *reinterpret_cast<const float4*>(&as[buf][tm + 8 * i][k4]);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        float4 bq[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) bq[q] = *reinterpret_cast<const float4*>(&bs[buf][k4 + kk][tn + 16 * q]);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float ai = part(av[i], kk);
#pragma unroll
          for (int j = 0; j < 16; ++j) acc[i][j] = fmaf(ai, part(bq[j / 4], j % 4), acc[i][j]);
        }
      }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);  // the next slab has landed (this thread's copies)
    __syncthreads();                               // ... everyone's, and this slab is read
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float* out = c + (size_t)(row0 + tm + 8 * i) * n + col0 + tn;
#pragma unroll
    for (int q = 0; q < 4; ++q) store4(out + 16 * q, &acc[i][4 * q]);
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

extern "C" int warp_gemm_f32(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t s) {
  if (!tiles_fit(m, n, k)) return 1;
  warp_tiled<<<dim3(n / kBN, m / kBM), kWThreads, 0, s>>>(a, b, c, n, k);
  return (int)cudaGetLastError();
}

// tiled_matmul.cu: C (M x N) = A (M x K) @ B (K x N), fp32, row-major; three kernels that sum the
// K products of each output in the same order (k = 0, 1, ..., K-1, one fmaf each), so all three
// agree bit for bit.
//
//   naive     one output per thread, A and B read from global memory: 2 loads (8 bytes) per FMA.
//             L1/L2 catch much of the reuse, but the kernel waits on loads, not on FMA units.
//   smem      32x32 tiles of A and B staged in shared memory: each global load feeds 32 FMAs,
//             but every FMA still needs two shared-memory loads.
//   regblock  128x128 block tile, 8-deep k slices, 256 threads each owning an 8x8 block of C in
//             registers: per k, a thread loads 8 values of A and 8 of B from shared memory
//             (four 128-bit loads) and does 64 FMAs, which moves the bound to the FMA units.
constexpr int kT = 32;                              // smem tile edge
constexpr int kBM = 128, kBN = 128, kBK = 8;        // regblock block tile
constexpr int kRegThreads = 256;

__global__ void matmul_naive(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                             int M, int N, int K) {
  const int col = blockIdx.x * 32 + threadIdx.x, row = blockIdx.y * 8 + threadIdx.y;
  const float* a = A + (long)row * K;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc = fmaf(a[k], B[(long)k * N + col], acc);
  C[(long)row * N + col] = acc;
}

__global__ void matmul_smem(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                            int M, int N, int K) {
  __shared__ float As[kT][kT], Bs[kT][kT];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kT + ty, col = blockIdx.x * kT + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += kT) {
    As[ty][tx] = A[(long)row * K + k0 + tx];
    Bs[ty][tx] = B[(long)(k0 + ty) * N + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kT; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  C[(long)row * N + col] = acc;
}

// Thread (tr, tc) = (tid / 16, tid % 16) owns rows {4tr..4tr+3, 64+4tr..64+4tr+3} and the same
// columns pattern of the block tile: its 128-bit shared loads of a k row are contiguous across
// the 16 threads of a half-warp (no bank conflicts).
__device__ __forceinline__ int owned(int base, int i) { return (i < 4 ? 0 : 64 - 4) + base * 4 + i; }

__global__ __launch_bounds__(kRegThreads) void matmul_regblock(const float* __restrict__ A, const float* __restrict__ B,
                                                               float* __restrict__ C, int M, int N, int K) {
  __shared__ alignas(16) float As[kBK][kBM];  // A's tile, transposed: As[k][m]
  __shared__ alignas(16) float Bs[kBK][kBN];
  const int tid = threadIdx.x, tr = tid / 16, tc = tid % 16;
  const float* a_src = A + ((long)blockIdx.y * kBM + tid / 2) * K + (tid % 2) * 4;
  const float* b_src = B + (long)(tid / 32) * N + (long)blockIdx.x * kBN + (tid % 32) * 4;
  float acc[8][8] = {};
  for (int k0 = 0; k0 < K; k0 += kBK) {
    const float4 a4 = *reinterpret_cast<const float4*>(a_src + k0);
    const int am = tid / 2, ak = (tid % 2) * 4;
    As[ak + 0][am] = a4.x;
    As[ak + 1][am] = a4.y;
    As[ak + 2][am] = a4.z;
    As[ak + 3][am] = a4.w;
    *reinterpret_cast<float4*>(&Bs[tid / 32][(tid % 32) * 4]) = *reinterpret_cast<const float4*>(b_src + (long)k0 * N);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
      float a[8], b[8];
      *reinterpret_cast<float4*>(a) = *reinterpret_cast<const float4*>(&As[k][tr * 4]);
      *reinterpret_cast<float4*>(a + 4) = *reinterpret_cast<const float4*>(&As[k][64 + tr * 4]);
      *reinterpret_cast<float4*>(b) = *reinterpret_cast<const float4*>(&Bs[k][tc * 4]);
      *reinterpret_cast<float4*>(b + 4) = *reinterpret_cast<const float4*>(&Bs[k][64 + tc * 4]);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  float* c = C + (long)blockIdx.y * kBM * N + (long)blockIdx.x * kBN;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float* row = c + (long)owned(tr, i) * N;
    *reinterpret_cast<float4*>(row + owned(tc, 0)) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    *reinterpret_cast<float4*>(row + owned(tc, 4)) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
}

enum Mode { kNaive = 0, kSmem, kRegBlock };

// M and N must be multiples of 128, K a multiple of 32 (every kernel's tiles divide the matrices).
extern "C" int matmul_run(int mode, const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s) {
  if (M % kBM || N % kBN || K % kT || M <= 0 || N <= 0 || K <= 0) return -1;
  if (mode == kNaive) {
    matmul_naive<<<dim3(N / 32, M / 8), dim3(32, 8), 0, s>>>(A, B, C, M, N, K);
  } else if (mode == kSmem) {
    matmul_smem<<<dim3(N / kT, M / kT), dim3(kT, kT), 0, s>>>(A, B, C, M, N, K);
  } else if (mode == kRegBlock) {
    matmul_regblock<<<dim3(N / kBN, M / kBM), kRegThreads, 0, s>>>(A, B, C, M, N, K);
  } else {
    return -1;
  }
  return (int)cudaGetLastError();
}

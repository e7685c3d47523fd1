// tiled_matmul.cu: C (M x N) = A (M x K) @ B (K x N), fp32, row-major; five kernels that sum the
// K products of each output in the same order (k = 0, 1, ..., K-1, one fmaf each), so all five
// agree bit for bit (async and paired are one template, matmul_async<false> and <true>).
//
//   naive     one output per thread, A and B read from global memory: 2 loads (8 bytes) per FMA.
//             L1/L2 catch much of the reuse, but the kernel waits on loads, not on FMA units.
//   smem      32x32 tiles of A and B staged in shared memory: each global load feeds 32 FMAs,
//             but every FMA still needs two shared-memory loads.
//   regblock  128x128 block tile, 8-deep k slices, 256 threads each owning an 8x8 block of C in
//             registers: per k, a thread loads 8 values of A and 8 of B from shared memory
//             (four 128-bit loads) and does 64 FMAs, which moves the bound to the FMA units.
//   async     regblock's math with its memory movement fixed: regblock loads a slice, waits for it,
//             stores it (A transposed, 4 scalar stores) and syncs twice per slice, with nothing to
//             overlap the global latency. Here cp.async (LDGSTS) copies slice s+1 global -> shared,
//             no staging registers, while slice s is multiplied (two stages, one barrier a slice);
//             the copies read whole 32-byte sectors and transpose A into a padded tile.
//   paired    async with each warp's threads laid out 4 x 8 (CUTLASS's SIMT interleaving) instead of
//             2 x 16: lanes n, n^1 read the same A float4 and n, n^2 the same B float4, so every
//             128-bit shared load returns in 2 wavefronts; async's 2 x 16 warps pair only A (B: 4).
#include <cuda_pipeline.h>

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

// One k of the 8x8 block: a thread's 8 values of A at a[0..3], a[64..67] and of B at b[0..3],
// b[64..67] (four 128-bit shared loads), 64 FMAs into acc.
__device__ __forceinline__ void fma8x8(float (&acc)[8][8], const float* a_k, const float* b_k) {
  float a[8], b[8];
  *reinterpret_cast<float4*>(a) = *reinterpret_cast<const float4*>(a_k);
  *reinterpret_cast<float4*>(a + 4) = *reinterpret_cast<const float4*>(a_k + 64);
  *reinterpret_cast<float4*>(b) = *reinterpret_cast<const float4*>(b_k);
  *reinterpret_cast<float4*>(b + 4) = *reinterpret_cast<const float4*>(b_k + 64);
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
}

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
    for (int k = 0; k < kBK; ++k) fma8x8(acc, &As[k][tr * 4], &Bs[k][tc * 4]);
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

// async: the copies transpose A on the way in. Element e = tid + 256j (j < 4) of A's 128x8 slice is
// row e / 8, k e % 8: each 4-byte cp.async of a warp reads 4 whole 32-byte rows (coalesced) and
// writes As[k][m]; As's rows are padded to 132 floats so those 32 writes land in 32 distinct banks
// (unpadded, the 8 k of one row would share a bank: 8-way conflicts). B's slice is one 16-byte
// cp.async per thread. The math is regblock's, bit for bit: per k, two float4 of A and two of B.
constexpr int kPitch = kBM + 4, kStage = kBK * kPitch;  // B padded alike: one stage offset for both

// Paired lanes: warp w owns thread rows 4(w/2)..+3 and thread columns 8(w%2)..+7 of the 16 x 16 grid
// (tr, tc); a lane's bits b0..b4 give tc = b0 + 2 b2 + 4 b3, tr = b1 + 2 b4. A 128-bit shared load
// returns 128 bytes a cycle, and two lanes' registers share a cycle where lanes n, n^1 (or all n, n^2)
// read one address (NVIDIA's rule for sm_70-75, assumed on sm_90): A's float4 then come in 2
// wavefronts (4 distinct, 64 bytes) and so do B's (8 distinct, 128 bytes). Per warp and 8-k slice:
// 64 load wavefronts, not 96.
__host__ __device__ constexpr int paired_tr(int tid) { return tid / 64 * 4 + (tid >> 1 & 1) + (tid >> 3 & 2); }
__host__ __device__ constexpr int paired_tc(int tid) { return tid / 32 % 2 * 8 + (tid & 1) + (tid >> 1 & 6); }
constexpr bool paired_grid_ok() {  // one thread a grid cell, each warp 4 x 8, the lane pairs as above
  int cells = 0;
  for (int t = 0; t < kRegThreads; ++t) {
    const int r = paired_tr(t), c = paired_tc(t), w0 = t & ~31;
    if (r < 0 || r > 15 || c < 0 || c > 15 || paired_tr(t ^ 1) != r || paired_tc(t ^ 2) != c) return false;
    if (r / 4 != paired_tr(w0) / 4 || c / 8 != paired_tc(w0) / 8) return false;
    for (int u = 0; u < t; ++u) cells += paired_tr(u) == r && paired_tc(u) == c;
  }
  return cells == 0;
}
static_assert(paired_grid_ok(), "paired layout: each of the 16 x 16 thread cells once, 4 x 8 a warp, lanes paired");
template <bool kPaired>
__host__ __device__ constexpr int cell_tr(int tid) { return kPaired ? paired_tr(tid) : tid / 16; }
template <bool kPaired>
__host__ __device__ constexpr int cell_tc(int tid) { return kPaired ? paired_tc(tid) : tid % 16; }

template <bool kPaired>
__global__ __launch_bounds__(kRegThreads, 2) void matmul_async(const float* __restrict__ A, const float* __restrict__ B,
                                                               float* __restrict__ C, int M, int N, int K) {
  __shared__ alignas(16) float As[2 * kStage];  // As[stage][k][m], rows kPitch apart
  __shared__ alignas(16) float Bs[2 * kStage];  // Bs[stage][k][n]
  const int tid = threadIdx.x, tr = cell_tr<kPaired>(tid), tc = cell_tc<kPaired>(tid);
  const float* a_src = A + ((long)blockIdx.y * kBM + tid / 8) * K + tid % 8;
  const float* b_src = B + (long)(tid / 32) * N + (long)blockIdx.x * kBN + (tid % 32) * 4;
  const long a_jump = 32L * K, b_step = (long)kBK * N;
  float* const a_wr = As + (tid % 8) * kPitch + tid / 8;  // stage 0; + 32j for element j
  float* const b_wr = Bs + (tid / 32) * kPitch + (tid % 32) * 4;
  const float* const a_rd = As + tr * 4;  // its fragments, stage 0
  const float* const b_rd = Bs + tc * 4;
  auto fetch = [&](int off) {  // the next slice into the stage at off
#pragma unroll
    for (int j = 0; j < 4; ++j) __pipeline_memcpy_async(a_wr + off + 32 * j, a_src + j * a_jump, 4);
    __pipeline_memcpy_async(b_wr + off, b_src, 16);
    __pipeline_commit();
    a_src += kBK;
    b_src += b_step;
  };
  const int slabs = K / kBK;
  float acc[8][8] = {};
  fetch(0);
  for (int s = 0, off = 0; s < slabs; ++s, off ^= kStage) {  // off: the stage slice s sits in
    __pipeline_wait_prior(0);  // this thread's copies of slice s have landed
    __syncthreads();           // everyone's; and the other stage (slice s - 1) is read
    if (s + 1 < slabs) fetch(off ^ kStage);
#pragma unroll
    for (int k = 0; k < kBK; ++k) fma8x8(acc, a_rd + off + k * kPitch, b_rd + off + k * kPitch);
  }
  float* c = C + (long)blockIdx.y * kBM * N + (long)blockIdx.x * kBN;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float* row = c + (long)owned(tr, i) * N;
    *reinterpret_cast<float4*>(row + owned(tc, 0)) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    *reinterpret_cast<float4*>(row + owned(tc, 4)) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
}

enum Mode { kNaive = 0, kSmem, kRegBlock, kAsync, kAsyncPaired };

// M and N must be multiples of 128, K a multiple of 32 (every kernel's tiles divide the matrices).
extern "C" int matmul_run(int mode, const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s) {
  if (M % kBM || N % kBN || K % kT || M <= 0 || N <= 0 || K <= 0) return -1;
  if (mode == kNaive) {
    matmul_naive<<<dim3(N / 32, M / 8), dim3(32, 8), 0, s>>>(A, B, C, M, N, K);
  } else if (mode == kSmem) {
    matmul_smem<<<dim3(N / kT, M / kT), dim3(kT, kT), 0, s>>>(A, B, C, M, N, K);
  } else if (mode == kRegBlock) {
    matmul_regblock<<<dim3(N / kBN, M / kBM), kRegThreads, 0, s>>>(A, B, C, M, N, K);
  } else if (mode == kAsync) {
    matmul_async<false><<<dim3(N / kBN, M / kBM), kRegThreads, 0, s>>>(A, B, C, M, N, K);
  } else if (mode == kAsyncPaired) {
    matmul_async<true><<<dim3(N / kBN, M / kBM), kRegThreads, 0, s>>>(A, B, C, M, N, K);
  } else {
    return -1;
  }
  return (int)cudaGetLastError();
}

// Host side, for CPU tests: thread tid's cell 16 tr + tc in the 16 x 16 thread grid of the cp.async
// kernel of mode (kAsync or kAsyncPaired), as the kernel computes it; -1 for another mode or tid.
extern "C" int matmul_thread_cell(int mode, int tid) {
  if (tid < 0 || tid >= kRegThreads || (mode != kAsync && mode != kAsyncPaired)) return -1;
  return mode == kAsync ? cell_tr<false>(tid) * 16 + cell_tc<false>(tid) : cell_tr<true>(tid) * 16 + cell_tc<true>(tid);
}

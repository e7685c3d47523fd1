// half2_poly.cu: y = P(clamp(x, -1, 1)) on fp16 data, P the series of ch08_poly.cuh with 128 terms
// (Horner's rule). Each thread handles two neighbouring elements (one 32-bit __half2 load and store).
//
//   fp32   converts both halves to float and runs two chains of 128 FFMAs (fp32 math, rounded to
//          fp16 once at the end): 256 FMA instructions per thread.
//   half2  keeps the pair packed and runs one chain of 128 HFMA2, each instruction two fp16 FMAs:
//          half the instructions; Hopper issues HFMA2 at the FFMA rate, so twice the FLOP/s.
//   half2_ilp  the same packed math, 4 independent __half2 a thread, interleaved: one 16-byte load
//          (a uint4 of packed halves) feeds 4 HFMA2 chains, so each warp has 4 independent HFMA2s
//          back to back where half2 has one dependent chain (each HFMA2 waits ~8 cycles on the
//          one before: ~1,050 stall cycles per 128 HFMA2 in the sm_90 SASS, ~2 per HFMA2 with 4
//          chains). A persistent grid (SMs x resident blocks: whole waves) strides over the
//          vectors, the next one loaded before this one's chains; those left under one round go
//          one __half2 a thread. Same operations per element in the same order as half2: the
//          same bits. ILP is a second technique on top of the packed math (the lesson), the one
//          ilp_vs_occupancy teaches.
// fp16 math rounds at every step: the results differ from the fp32 path by a few fp16 ulps.
#include "ch08_check.cuh"
#include "ch08_poly.cuh"

constexpr int kTerms = 128, kThreads = 256;
constexpr int kChains = 4, kIlpBlocks = 8;  // half2_ilp: 8 x 256 threads, a full SM, at <= 32 registers

__global__ void __launch_bounds__(kThreads) poly_fp32(const __half2* __restrict__ x, __half2* __restrict__ y,
                                                     long n2) {
  const long i = (long)blockIdx.x * kThreads + threadIdx.x;
  if (i >= n2) return;
  const float2 v = __half22float2(x[i]);
  y[i] = __floats2half2_rn(horner<kTerms>(clamp_unit(v.x)), horner<kTerms>(clamp_unit(v.y)));
}

// One __half2's work: clamp, then the 128-HFMA2 chain.
__device__ __forceinline__ __half2 poly2(__half2 v) {
  const __half2 one = __float2half2_rn(1.0f);
  return horner2<kTerms>(__hmin2(__hmax2(v, __hneg2(one)), one));
}

__global__ void __launch_bounds__(kThreads) poly_half2(const __half2* __restrict__ x, __half2* __restrict__ y,
                                                      long n2) {
  const long i = (long)blockIdx.x * kThreads + threadIdx.x;
  if (i >= n2) return;
  y[i] = poly2(x[i]);
}

// The kChains x V chains of V 16-byte vectors (4 __half2 each), unrolled side by side: step k of
// every chain before step k + 1 of any. In place: the vectors in, their results out.
template <int V>
__device__ __forceinline__ void poly2_vectors(uint4 (&io)[V]) {
  constexpr int kAll = kChains * V;
  __half2 v[kAll], acc[kAll];
  memcpy(v, io, sizeof(io));
  const __half2 one = __float2half2_rn(1.0f);
#pragma unroll
  for (int c = 0; c < kAll; ++c) {
    v[c] = __hmin2(__hmax2(v[c], __hneg2(one)), one);
    acc[c] = __float2half2_rn(0.0f);
  }
#pragma unroll
  for (int k = kTerms - 1; k >= 0; --k) {
#pragma unroll
    for (int c = 0; c < kAll; ++c) acc[c] = __hfma2(acc[c], v[c], __float2half2_rn(kCoef.v[k]));
  }
  memcpy(io, acc, sizeof(io));
}

__device__ __forceinline__ uint4 poly2_x4(uint4 in) {
  uint4 io[1] = {in};
  poly2_vectors(io);
  return io[0];
}

// n2 __half2 as n2 / 4 16-byte vectors over a persistent grid: step s of thread t is vector
// t + s * (threads in the grid). Step s + 1's vector is loaded before step s's chains (the last
// step reloads its own, so no `if` guards the load); the vectors under one round and the last
// n2 % 4 __half2 go one __half2 a thread.
__global__ void __launch_bounds__(kThreads, kIlpBlocks) poly_half2_ilp(const __half2* __restrict__ x,
                                                                       __half2* __restrict__ y, long n2) {
  const uint4* __restrict__ xv = reinterpret_cast<const uint4*>(x);
  uint4* __restrict__ yv = reinterpret_cast<uint4*>(y);
  const long round = (long)gridDim.x * kThreads, first = (long)blockIdx.x * kThreads + threadIdx.x;
  const long steps = n2 / kChains / round;
  if (steps > 0) {
    uint4 in = xv[first];
    long i = first;
    for (long s = 1; s <= steps; ++s, i += round) {
      const uint4 cur = in;
      in = xv[i + (s < steps ? round : 0)];
      yv[i] = poly2_x4(cur);
    }
  }
  for (long j = steps * round * kChains + first; j < n2; j += round) y[j] = poly2(x[j]);
}

// Blocks of Kernel resident at once on the whole GPU (SMs x blocks per SM), found once a kernel:
// 0, or the occupancy query's CUDA error.
template <auto Kernel>
int persistent_grid(int* grid) {
  static int blocks = 0;
  if (blocks == 0) {
    int per_sm = 0;
    const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, kThreads, 0);
    if (err != cudaSuccess) return (int)err;
    blocks = per_sm * sm_count();
  }
  *grid = blocks;
  return blocks > 0 ? 0 : -1;
}

// mode 0: fp32 math, 1: packed __half2 math, 2: packed, 4 chains a thread. x, y: n fp16 values
// (n even; 4-byte aligned, 16-byte for mode 2).
extern "C" int half2_run(int mode, const void* x, void* y, long n, cudaStream_t s) {
  if (n <= 0 || n % 2 || ((size_t)x | (size_t)y) % (mode >= 2 ? 16 : 4)) return -1;
  const long n2 = n / 2;
  const unsigned blocks = (unsigned)((n2 + kThreads - 1) / kThreads);
  const __half2* in = static_cast<const __half2*>(x);
  __half2* out = static_cast<__half2*>(y);
  if (mode == 0) {
    poly_fp32<<<blocks, kThreads, 0, s>>>(in, out, n2);
  } else if (mode == 1) {
    poly_half2<<<blocks, kThreads, 0, s>>>(in, out, n2);
  } else if (mode == 2) {
    int grid = 0;
    if (const int err = persistent_grid<poly_half2_ilp>(&grid)) return err;
    poly_half2_ilp<<<grid, kThreads, 0, s>>>(in, out, n2);
  } else {
    return -1;
  }
  return (int)cudaGetLastError();
}

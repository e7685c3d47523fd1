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
//   half2_dyn  half2_ilp's 4 chains a thread, with the work handed out at run time: each warp takes
//          its next 4 tiles (a tile: one vector a lane) from a global counter, one atomic per 4
//          passes, issued 4 passes before its answer is needed. Warps the scheduler favours take
//          more tiles and all finish together, where half2_ilp's static split gives every warp the
//          same share and the favoured ones leave the SM part-empty at the end (Nsight Compute:
//          61% achieved occupancy on its grid of whole waves). Same operations per element in the
//          same order: the same bits.
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

// half2_dyn: a tile is a warp's pass, kDynVectors vectors a lane (4 chains each); a warp takes kGrab
// tiles an atomic. Both counters return to 0 at the end of each launch (the last warp resets them).
constexpr int kDynVectors = 1;
constexpr unsigned kGrab = 4, kTileVectors = 32 * kDynVectors, kTileHalf2 = kTileVectors * kChains;
__device__ unsigned int g_dyn_next = 0, g_dyn_done = 0;

// A warp's tiles: the kGrab from one atomic, then the next kGrab, whose atomic (lane 0's) was issued
// when the last ones were taken, so its latency hides behind kGrab passes. Warp-uniform answers.
class TileQueue {
 public:
  __device__ explicit TileQueue(unsigned lane) : lane_(lane) { pending_ = grab(); }
  // The tile after t (the first tile for t = ~0u: end_ is 0): t + 1 while the range lasts.
  __device__ __forceinline__ unsigned next(unsigned t) {
    if (t + 1 < end_) return t + 1;
    const unsigned first = __shfl_sync(~0u, pending_, 0) * kGrab;
    pending_ = grab();
    end_ = first + kGrab;
    return first;
  }
  // After the warp's last tile: the last warp of the grid to arrive resets both counters. The fence
  // orders this warp's atomics on g_dyn_next (the unread pending one too) before its g_dyn_done one.
  __device__ __forceinline__ void finish() const {
    if (lane_ != 0) return;
    __threadfence();
    if (atomicAdd(&g_dyn_done, 1u) == gridDim.x * (kThreads / 32) - 1) {
      __threadfence();
      atomicExch(&g_dyn_next, 0u);
      atomicExch(&g_dyn_done, 0u);
    }
  }

 private:
  __device__ __forceinline__ unsigned grab() const { return lane_ == 0 ? atomicAdd(&g_dyn_next, 1u) : 0u; }
  unsigned lane_, end_ = 0, pending_;
};

// Lane `lane`'s kDynVectors vectors of tile t: t * kTileVectors + j * 32 + lane (512 bytes a j a warp).
__device__ __forceinline__ size_t dyn_vector(unsigned t, int j, unsigned lane) {
  return (size_t)t * kTileVectors + j * 32 + lane;
}

// n2 __half2 as n2 / kTileHalf2 tiles handed out at run time (TileQueue); the __half2 past the last
// whole tile go one a thread first, so that they overlap the tiles. The next tile's vectors are
// loaded before this tile's chains (the last tile reloads its own, so no `if` guards the load).
__global__ void __launch_bounds__(kThreads, kIlpBlocks) poly_half2_dyn(const __half2* __restrict__ x,
                                                                       __half2* __restrict__ y, long n2) {
  const uint4* __restrict__ xv = reinterpret_cast<const uint4*>(x);
  uint4* __restrict__ yv = reinterpret_cast<uint4*>(y);
  const unsigned lane = threadIdx.x % 32, tiles = (unsigned)(n2 / kTileHalf2);
  for (long j = (long)tiles * kTileHalf2 + (long)blockIdx.x * kThreads + threadIdx.x; j < n2;
       j += (long)gridDim.x * kThreads)
    y[j] = poly2(x[j]);
  TileQueue queue(lane);
  unsigned t = queue.next(~0u);
  if (t < tiles) {
    unsigned next = queue.next(t);
    uint4 in[kDynVectors];
#pragma unroll
    for (int j = 0; j < kDynVectors; ++j) in[j] = xv[dyn_vector(t, j, lane)];
    for (;;) {
      const unsigned load = next < tiles ? next : t;
      uint4 io[kDynVectors];
#pragma unroll
      for (int j = 0; j < kDynVectors; ++j) {
        io[j] = in[j];
        in[j] = xv[dyn_vector(load, j, lane)];
      }
      poly2_vectors(io);
#pragma unroll
      for (int j = 0; j < kDynVectors; ++j) yv[dyn_vector(t, j, lane)] = io[j];
      if (next >= tiles) break;
      t = next;
      next = queue.next(t);
    }
  }
  queue.finish();
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

// mode 0: fp32 math, 1: packed __half2 math, 2: packed, 4 chains a thread, 3: the same, tiles handed
// out at run time. x, y: n fp16 values (n even; 4-byte aligned, 16-byte for
// modes 2 and 3; mode 3: fewer than 2^31 tiles, and one launch at a time, its counters being global).
extern "C" int half2_run(int mode, const void* x, void* y, long n, cudaStream_t s) {
  if (n <= 0 || n % 2 || ((size_t)x | (size_t)y) % (mode >= 2 ? 16 : 4)) return -1;
  if (mode == 3 && n / 2 / kTileHalf2 >= (1L << 31)) return -1;
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
  } else if (mode == 3) {
    int grid = 0;
    if (const int err = persistent_grid<poly_half2_dyn>(&grid)) return err;
    poly_half2_dyn<<<grid, kThreads, 0, s>>>(in, out, n2);
  } else {
    return -1;
  }
  return (int)cudaGetLastError();
}

// launch_bounds.cu: y = p(x) for a degree-47 polynomial (48 coefficients), Horner's rule per
// element, in a grid-stride loop; the same source compiled twice, and two kernels that fit.
//
//   horner_free      no bounds: ptxas keeps all 48 coefficients in registers and uses 64 per
//                    thread, so an SM holds 4 blocks of 256 (1,024 threads, 50% occupancy).
//   horner_bounded   __launch_bounds__(256, 8): "at most 256 threads per block, and I want 8
//                    blocks per SM", so ptxas caps registers at 65,536 / (256 x 8) = 32 (a few
//                    coefficients then live in L1-resident local memory): 2,048 threads per SM,
//                    twice the warps to cover DRAM and FMA latency.
//   horner_fitted    __launch_bounds__(256, 8) with a working set that fits 32 registers: the 48
//                    coefficients, the same for every thread, staged once per block in shared
//                    memory and read in the loop as 12 broadcast 16-byte loads (LDS.128, one
//                    wavefront each); 4 elements per thread (one 16-byte load and store). ptxas:
//                    30 registers, no spill, 8 blocks per SM. (Plain shared reads get hoisted out
//                    of the loop into 48 live values that spill at 32: the reads are volatile.)
//   horner_pipelined horner_fitted with the next float4's load issued before this one's FMAs
//                    (software pipelining): 32 registers, no spill, 8 blocks per SM.
//   horner_async     the same bound and shared coefficients, 8 elements a thread a step (one coefficient
//                    read for two float4s), x staged into shared memory by cp.async two steps ahead
//                    (3 stages, 24 KiB a block): 128 KiB of loads an SM in flight, no register held.
// The arithmetic is identical (same FMAs in the same order); only the register budget differs.
// `cuobjdump -res-usage` shows REG:64 vs REG:32 (tests/test_ch06_sass.py checks it).
// Python: ch06/baseline_launch_bounds.py
#include <cstdint>

#include "ch06_check.cuh"

constexpr int kCoefficients = 48;
constexpr int kBoundThreads = 256;

template <int kTerms>
__device__ __forceinline__ void horner(const float* __restrict__ x, const float* __restrict__ coef,
                                       float* __restrict__ y, long n) {
  float c[kTerms];
#pragma unroll
  for (int k = 0; k < kTerms; ++k) c[k] = coef[k];
  const long stride = (long)gridDim.x * blockDim.x;
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = x[i];
    float acc = c[0];
#pragma unroll
    for (int k = 1; k < kTerms; ++k) acc = fmaf(acc, v, c[k]);
    y[i] = acc;
  }
}

__global__ void horner_free(const float* __restrict__ x, const float* __restrict__ coef,
                            float* __restrict__ y, long n) {
  horner<kCoefficients>(x, coef, y, n);
}

__global__ void __launch_bounds__(kBoundThreads, 8)
    horner_bounded(const float* __restrict__ x, const float* __restrict__ coef, float* __restrict__ y,
                   long n) {
  horner<kCoefficients>(x, coef, y, n);
}

__device__ __forceinline__ float4 horner_step(float4 acc, float4 v, float c) {
  return make_float4(fmaf(acc.x, v.x, c), fmaf(acc.y, v.y, c), fmaf(acc.z, v.z, c), fmaf(acc.w, v.w, c));
}

// A 16-byte shared-memory load the compiler keeps where it is written (volatile).
__device__ __forceinline__ float4 shared_load4(const float4* p) {
  float4 v;
  asm volatile("ld.volatile.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p))));
  return v;
}

// p(v) for 4 elements, the coefficients read from shared memory 4 at a time: the same FMAs as horner().
__device__ __forceinline__ float4 horner4(const float4* cs, float4 v) {
  float4 acc = {};
#pragma unroll
  for (int q = 0; q < kCoefficients / 4; ++q) {
    const float4 c = shared_load4(&cs[q]);
    acc = q == 0 ? make_float4(c.x, c.x, c.x, c.x) : horner_step(acc, v, c.x);
    acc = horner_step(acc, v, c.y);
    acc = horner_step(acc, v, c.z);
    acc = horner_step(acc, v, c.w);
  }
  return acc;
}

// A 16-byte global load that ptxas keeps where it is written: volatile, like shared_load4's reads,
// and volatile accesses keep their order. (A plain or .nc load ptxas sinks under the 32-register cap
// to the middle of the FMA block, behind 7 of its 12 LDS.128.) LDG.E.128.STRONG.SYS: from L2, as any miss.
__device__ __forceinline__ float4 global_load4(const float4* p) {
  float4 v;
  asm volatile("ld.volatile.global.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
}

// One pipelined step: issue the load of the group after i (a predicated LDG: none past the end), then
// group i's 188 FMAs and its store; false when group i was this thread's last.
__device__ __forceinline__ bool horner_step_ahead(const float4* cs, const float4* x4, float4* y4, long& i,
                                                  long stride, long n4, const float4& v, float4& ahead) {
  const long next = i + stride;
  if (next < n4) ahead = global_load4(&x4[next]);
  y4[i] = horner4(cs, v);
  i = next;
  return next < n4;
}

// The shared-coefficient kernels' body: the block stages the coefficients in shared memory, each
// thread evaluates float4 groups in a grid-stride loop, then the n % 4 tail one element at a time.
// kPipelined (horner_pipelined): the next group's LDG.128 goes out before this group's FMAs, so
// while a warp computes, its next 16 bytes a thread are in flight (32 KiB an SM) and the load has
// the whole FMA block (~3,500 cycles with 16 warps a scheduler) to land; unrolled by 2 so the two
// float4s swap roles instead of being copied. Same FMAs in the same order either way.
template <bool kPipelined>
__device__ __forceinline__ void horner_shared(const float* __restrict__ x, const float* __restrict__ coef,
                                              float* __restrict__ y, long n) {
  __shared__ float4 cs[kCoefficients / 4];
  if (threadIdx.x < kCoefficients) reinterpret_cast<float*>(cs)[threadIdx.x] = coef[threadIdx.x];
  __syncthreads();
  const long n4 = n / 4, stride = (long)gridDim.x * blockDim.x, first = (long)blockIdx.x * blockDim.x + threadIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  if constexpr (kPipelined) {
    if (first < n4) {
      float4 a = x4[first], b;
      for (long i = first; horner_step_ahead(cs, x4, y4, i, stride, n4, a, b) &&
                           horner_step_ahead(cs, x4, y4, i, stride, n4, b, a);) {
      }
    }
  } else {
    for (long i = first; i < n4; i += stride) y4[i] = horner4(cs, x4[i]);
  }
  for (long i = 4 * n4 + first; i < n; i += stride) y[i] = horner4(cs, make_float4(x[i], 0.f, 0.f, 0.f)).x;  // n % 4
}

// horner_async's staging, with no register held while the bytes are on their way: cp.async (LDGSTS)
// copies 16 bytes from global to shared memory; a thread commits its copies as one group a step and
// waits until at most kAsyncStages - 1 of its groups are still in flight. Each thread reads back only
// the slots it copied itself, so the wait needs no barrier. volatile asm keeps them in program order
// with the shared reads (and the "memory" clobbers keep plain accesses off them).
constexpr int kAsyncStages = 3;
constexpr int kAsyncTile = 2 * kBoundThreads;  // float4 groups a block evaluates a step: 2 a thread
constexpr unsigned kAsyncSlot = kAsyncTile * sizeof(float4);  // 8 KiB: one stage of a block

__device__ __forceinline__ void copy_async16(unsigned smem, const float4* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(smem), "l"(gmem) : "memory");
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ float4 shared_load4(unsigned smem) {
  float4 v;
  asm volatile("ld.volatile.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(smem));
  return v;
}

// This thread's two groups of a full tile (t and t + 256 of its 512 float4) into the stage at `slot`.
__device__ __forceinline__ void stage_tile(unsigned slot, const float4* xt) {
  copy_async16(slot, xt);
  copy_async16(slot + kAsyncSlot / 2, xt + kBoundThreads);
}

// p(v) for 8 elements in place (two float4s), each coefficient float4 read once from shared memory for
// both: half horner4's LDS.128 per element; per element the same FMAs in the same order.
__device__ __forceinline__ void horner8(const float4* cs, float4& v0, float4& v1) {
  float4 a0 = {}, a1 = {};
#pragma unroll
  for (int q = 0; q < kCoefficients / 4; ++q) {
    const float4 c = shared_load4(&cs[q]);
    if (q == 0) {
      a0 = a1 = make_float4(c.x, c.x, c.x, c.x);
    } else {
      a0 = horner_step(a0, v0, c.x);
      a1 = horner_step(a1, v1, c.x);
    }
    a0 = horner_step(a0, v0, c.y);
    a1 = horner_step(a1, v1, c.y);
    a0 = horner_step(a0, v0, c.z);
    a1 = horner_step(a1, v1, c.z);
    a0 = horner_step(a0, v0, c.w);
    a1 = horner_step(a1, v1, c.w);
  }
  v0 = a0;
  v1 = a1;
}

// horner_async: the same bound, coefficients and FMAs as horner_fitted, 8 elements a thread a step, and
// the x tiles (512 float4, 8 KiB, block-strided) staged through shared memory by cp.async
// kAsyncStages - 1 steps ahead: 64 bytes a thread in flight (128 KiB an SM) without a register spent
// on them. The loop takes full tiles only (no per-thread bounds: the tile index is the block's); the
// partial tile's float4s and the n % 4 elements follow in horner_shared's tail form. n / 4 < 2^31.
__global__ void __launch_bounds__(kBoundThreads, 8)
    horner_async(const float* __restrict__ x, const float* __restrict__ coef, float* __restrict__ y, long n) {
  __shared__ float4 cs[kCoefficients / 4];
  __shared__ float4 xs[kAsyncStages][kAsyncTile];  // 24 KiB: [stage][group * 256 + thread]
  const int n4 = static_cast<int>(n / 4), full = n4 / kAsyncTile, grid = gridDim.x;
  const float4* xt = reinterpret_cast<const float4*>(x) + threadIdx.x;  // this thread's group of tile 0
  float4* yt = reinterpret_cast<float4*>(y) + threadIdx.x;
  const unsigned first = static_cast<unsigned>(__cvta_generic_to_shared(&xs[0][threadIdx.x]));
  const unsigned last = first + (kAsyncStages - 1) * kAsyncSlot;
#pragma unroll
  for (int s = 0; s < kAsyncStages - 1; ++s) {
    const int tile = blockIdx.x + s * grid;
    if (tile < full) stage_tile(first + s * kAsyncSlot, xt + (long)tile * kAsyncTile);
    copy_async_commit();
  }
  if (threadIdx.x < kCoefficients) reinterpret_cast<float*>(cs)[threadIdx.x] = coef[threadIdx.x];
  __syncthreads();
  // this step's stage, and the free one (read back by this thread the step before): refilled 2 tiles ahead
  unsigned slot = first, free = last;
  const long step = (long)grid * kAsyncTile;  // float4s from one of the block's tiles to its next
  const float4* ahead = xt + (blockIdx.x + (kAsyncStages - 1L) * grid) * kAsyncTile;
  float4* out = yt + (long)blockIdx.x * kAsyncTile;
  for (int tile = blockIdx.x; tile < full; tile += grid, ahead += step, out += step) {
    if (tile + (kAsyncStages - 1) * grid < full) stage_tile(free, ahead);
    copy_async_commit();
    asm volatile("cp.async.wait_group %0;" :: "n"(kAsyncStages - 1) : "memory");  // this tile's landed
    float4 v0 = shared_load4(slot), v1 = shared_load4(slot + kAsyncSlot / 2);
    horner8(cs, v0, v1);
    out[0] = v0;
    out[kBoundThreads] = v1;
    free = slot;
    slot = slot == last ? first : slot + kAsyncSlot;
  }
  asm volatile("cp.async.wait_all;" ::: "memory");  // none is left in flight: each staged tile was read
  const long stride = (long)grid * blockDim.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  for (long i = (long)full * kAsyncTile + blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    reinterpret_cast<float4*>(y)[i] = horner4(cs, x4[i]);  // the partial tile
  }
  for (long i = 4L * n4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = horner4(cs, make_float4(x[i], 0.f, 0.f, 0.f)).x;  // n % 4
  }
}

__global__ void __launch_bounds__(kBoundThreads, 8)
    horner_fitted(const float* __restrict__ x, const float* __restrict__ coef, float* __restrict__ y, long n) {
  horner_shared<false>(x, coef, y, n);
}

__global__ void __launch_bounds__(kBoundThreads, 8)
    horner_pipelined(const float* __restrict__ x, const float* __restrict__ coef, float* __restrict__ y, long n) {
  horner_shared<true>(x, coef, y, n);
}

extern "C" int horner_terms() { return kCoefficients; }

enum Kernel { kFree = 0, kBounded, kFitted, kPipelined, kAsync };

static const void* horner_kernel(int kernel) {
  if (kernel == kFree) return (const void*)horner_free;
  if (kernel == kBounded) return (const void*)horner_bounded;
  if (kernel == kFitted) return (const void*)horner_fitted;
  if (kernel == kPipelined) return (const void*)horner_pipelined;
  return kernel == kAsync ? (const void*)horner_async : nullptr;
}

// Blocks that fill every SM once: resident blocks per SM (occupancy API) x SMs; -1 on error.
// kernel = 0: horner_free, 1: horner_bounded, 2: horner_fitted, 3: horner_pipelined, 4: horner_async.
// horner_async's 8 blocks need 8 x 25.2 KiB of shared memory: the largest carveout (228 KiB) is asked for.
extern "C" int horner_grid(int kernel) {
  int per_sm = 0;
  const void* fn = horner_kernel(kernel);
  if (kernel == kAsync &&
      cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared)) {
    return -1;
  }
  if (!fn || cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kBoundThreads, 0) || per_sm < 1) {
    return -1;
  }
  return per_sm * sm_count();
}

// horner_fitted, horner_pipelined and horner_async need x and y 16-byte aligned (else -1); horner_async
// also n / 4 < 2^31 (its tile indices are ints).
extern "C" int horner_run(int kernel, int grid, const float* x, const float* coef, float* y, long n,
                          cudaStream_t s) {
  if (kernel == kFitted || kernel == kPipelined || kernel == kAsync) {
    if (((uintptr_t)x | (uintptr_t)y) % sizeof(float4) || (kernel == kAsync && n / 4 > INT32_MAX)) return -1;
    if (kernel == kAsync) {
      horner_async<<<grid, kBoundThreads, 0, s>>>(x, coef, y, n);
    } else {
      (kernel == kFitted ? horner_fitted : horner_pipelined)<<<grid, kBoundThreads, 0, s>>>(x, coef, y, n);
    }
  } else if (kernel == kFree || kernel == kBounded) {
    (kernel == kBounded ? horner_bounded : horner_free)<<<grid, kBoundThreads, 0, s>>>(x, coef, y, n);
  } else {
    return -1;
  }
  return launch_status();
}

// ch10_gemm.cuh: what every kernel of chapter 10's GEMM ladder shares, on any GPU from sm_80 on.
//
// The problem: C = A @ B^T, A (M x K) and B (N x K) row-major bf16 (B as nn.Linear stores its
// weight: both operands K-major, the layout tensor cores read without a transpose), fp32
// accumulation, C (M x N) row-major bf16. Each .cu file exports the same C entry point:
//
//   extern "C" int gemm_bf16(const bf16* a, const bf16* b, bf16* c, int m, int n, int k, cudaStream_t s)
//
// returning 0, a CUDA error, or kBadShape when the sizes are not multiples of the kernel's tiles.
//
// The PTX wrappers for Ampere-era instructions live here (cp.async, ldmatrix, mma.sync); the
// Hopper-only ones (mbarriers, TMA, warpgroup MMA, register reallocation) live in ch10_wgmma.cuh,
// so that this file's users still build for plain sm_90 (and for sm_80/sm_89).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

using bf16 = __nv_bfloat16;

constexpr int kBadShape = -1;

// Whether m, n, k are positive multiples of the tile sizes and every row start is 16-byte aligned.
inline bool tiles_fit(int m, int n, int k, int bm, int bn, int bk) {
  return m > 0 && n > 0 && k > 0 && m % bm == 0 && n % bn == 0 && k % bk == 0 && k % 8 == 0;
}

// The output tile of this block (1-D grid of m_tiles * n_tiles blocks), in grouped order: blocks
// run down 16 tile rows before moving one tile column right, so the ~132 tiles in flight at once
// share 16 row panels of A and ~9 column panels of B in L2 instead of 2 panels of A and all of B.
struct Tile {
  int m, n;
};
__device__ __forceinline__ Tile grouped_tile(int m_tiles, int n_tiles) {
  constexpr int kGroup = 16;
  const int per_group = kGroup * n_tiles, first_m = (blockIdx.x / per_group) * kGroup;
  const int rows = min(m_tiles - first_m, kGroup), in_group = blockIdx.x % per_group;
  return {first_m + in_group % rows, in_group / rows};
}

// The 32-bit shared-memory address of a generic pointer into shared memory (what PTX wants).
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// cp.async: 16 bytes global -> shared without passing through registers (LDGSTS in SASS).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Wait until at most `kPending` of this thread's committed cp.async groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// ldmatrix.x4: four 8x8 bf16 matrices from shared memory, lane l giving the address of row l % 8 of
// matrix l / 8; register i receives this lane's two elements of matrix i (the mma fragment layout).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d += a @ b for one warp: a 16x16 (row-major), b 16x8 (K-major), d 16x8 fp32 (HMMA in SASS).
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two fp32 values rounded to bf16 and stored as one 4-byte word at c (4-byte aligned).
__device__ __forceinline__ void store_bf16x2(bf16* c, float x, float y) {
  *reinterpret_cast<__nv_bfloat162*>(c) = __floats2bfloat162_rn(x, y);
}

// Allow a kernel more than 48 KB of dynamic shared memory, then report the launch's status.
template <typename Kernel>
inline int opt_in_smem(Kernel kernel, int bytes) {
  return static_cast<int>(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

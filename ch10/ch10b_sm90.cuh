// ch10b_sm90.cuh: the Hopper PTX that cluster_multicast.cu uses, one small wrapper each:
// mbarriers (init, expect bytes, wait on a phase, arrive locally or on a cluster peer's barrier),
// the cluster barrier and rank, TMA tile loads (plain and .multicast::cluster), 128-byte-swizzle
// addressing, ldmatrix and bf16 mma.sync, and the driver's cuTensorMapEncodeTiled reached through
// the runtime (no -lcuda).
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void bar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count));
}

__device__ __forceinline__ void bar_expect_bytes(uint64_t* bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void bar_wait(uint64_t* bar, int parity) {
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}" ::"r"(smem_u32(bar)), "r"(parity) : "memory");
}

// Arrive on the barrier at `bar`'s offset in the shared memory of cluster block `rank` (itself included).
// The default semantics (release at CTA scope), as CUTLASS's ClusterBarrier::arrive(cta_id) uses:
// a consumer frees a stage of its own block's shared memory, whose reads (ldmatrix into the mma
// operands issued before the arrive) are done. Spelled .release.cluster, ptxas puts MEMBAR.ALL.GPU
// (+ ERRBAR, CGAERRBAR) before every such arrive: two GPU-wide fences per warp and K step.
__device__ __forceinline__ void bar_arrive_cluster(uint64_t* bar, uint32_t rank) {
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}" ::"r"(smem_u32(bar)), "r"(rank)
      : "memory");
}

__device__ __forceinline__ void bar_arrive_local(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// TMA: box (k0, row0) of `map` into dst, completing bytes on bar; with a mask, into every masked block.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, int k0, int row0, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          smem_u32(dst)), "l"(map), "r"(k0), "r"(row0), "r"(smem_u32(bar))
      : "memory");
}

__device__ __forceinline__ void tma_load_multicast(void* dst, const CUtensorMap* map, int k0, int row0, uint64_t* bar,
                                                   uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_u32(dst)), "l"(map), "r"(k0), "r"(row0), "r"(smem_u32(bar)),
      "h"(mask)
      : "memory");
}

// The shared address of element (row, col) of a tile of 64-element (128-byte) rows written by TMA
// with CU_TENSOR_MAP_SWIZZLE_128B: 16-byte chunk c of row r lies at chunk c ^ (r % 8).
__device__ __forceinline__ uint32_t swizzled(uint32_t tile, int row, int col) {
  return tile + row * 128 + ((((col >> 3) ^ row) & 7) << 4);
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  if (!fn) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found) ==
            cudaSuccess && found == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }
  return fn;
}

// A map of a row-major (rows x k) bf16 matrix whose box is box_rows x box_k, 128-byte swizzled
// (box_k * 2 bytes must be at most 128).
static int make_bf16_map(CUtensorMap* map, const void* base, int rows, int k, int box_k, int box_rows) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled();
  if (!encode) return -3;
  const cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)k * 2};  // innermost first
  const cuuint32_t box[2] = {(cuuint32_t)box_k, (cuuint32_t)box_rows}, step[2] = {1, 1};
  const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box, step,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : 1000 + (int)r;
}

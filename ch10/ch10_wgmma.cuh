// ch10_wgmma.cuh: the Hopper-only pieces of chapter 10's GEMM ladder (sm_90a): the 128-byte swizzled
// shared-memory tile that TMA writes and wgmma reads, wgmma itself, mbarriers, TMA and setmaxnreg.
//
// The tile layout every wgmma kernel here uses: a K-major operand tile of R rows x 64 bf16 (one
// 128-byte row per M or N index), 1024-byte aligned, in the 128B swizzle: 16-byte chunk j of row
// r sits at r * 128 + ((j ^ (r % 8)) * 16). TMA with CU_TENSOR_MAP_SWIZZLE_128B writes exactly this;
// rung 3 writes it by hand with cp.async. The wgmma descriptor of such a tile says "128B swizzle,
// 8-row groups 1024 bytes apart" (SBO = 1024; LBO is unused for swizzled K-major tiles), and the
// k-th 16-wide K step of the 64-wide tile starts 32 * k bytes further (the hardware applies the
// XOR to the final address, so the start address moves as if the tile were unswizzled).
#pragma once

#include <cuda.h>          // CUtensorMap
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include "ch10_gemm.cuh"

constexpr int kTileK = 64;           // bf16 per swizzled row: 128 bytes
constexpr int kRowBytes = kTileK * 2;

__device__ __forceinline__ uint32_t swizzled_offset(int row, int chunk) { return row * kRowBytes + ((chunk ^ (row % 8)) * 16); }

// The wgmma shared-memory descriptor of a 128B-swizzled K-major tile starting at `addr`.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
  const uint64_t start = (addr & 0x3FFFF) >> 4, lbo = 1, sbo = 1024 >> 4, swizzle_128b = 1;
  return start | lbo << 16 | sbo << 32 | swizzle_128b << 62;
}

// ---- wgmma: one warpgroup (128 threads), D (64 x 256, fp32, 128 registers per thread) += A @ B^T,
// A 64 x 16 and B 256 x 16 read from shared memory through descriptors. Asynchronous: issued
// after wgmma_fence(), grouped by wgmma_commit(), complete after wgmma_wait<N>() leaves <= N groups.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory"); }

// Tell the compiler every accumulator may change here, so it neither reads one before the
// wgmma that writes it has completed nor moves its use across a wgmma_wait.
__device__ __forceinline__ void fence_accumulators(float (&d)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define CH10_F8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
                   "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, 0, 0;\n}\n"  // scale-d = 1 (accumulate), no negation, both K-major
      : CH10_F8(0), CH10_F8(8), CH10_F8(16), CH10_F8(24), CH10_F8(32), CH10_F8(40), CH10_F8(48), CH10_F8(56),
        CH10_F8(64), CH10_F8(72), CH10_F8(80), CH10_F8(88), CH10_F8(96), CH10_F8(104), CH10_F8(112), CH10_F8(120)
      : "l"(desc_a), "l"(desc_b));
}
#undef CH10_F8

// One warpgroup's 64 x 64 x 256 step: A tile rows at a_tile (64 x 64), B tile at b_tile (256 x 64),
// both 128B-swizzled; four k16 wgmmas, committed as one group. Every warp must arrive converged
// (.sync.aligned): after a barrier spin or a one-thread branch, __syncwarp() makes sure it is.
__device__ __forceinline__ void wgmma_tile(float (&d)[128], uint32_t a_tile, uint32_t b_tile) {
  __syncwarp();
  wgmma_fence();
#pragma unroll
  for (int k = 0; k < kTileK / 16; ++k) wgmma_m64n256k16(d, smem_desc(a_tile + 32 * k), smem_desc(b_tile + 32 * k));
  wgmma_commit();
}

// Write one warpgroup's 64 x 256 accumulators as bf16 at C[row0.., col0..] (row stride ldc).
// Warp w holds rows 16w..16w+15; lane l holds rows l/4 and l/4 + 8, columns 8j + 2(l%4) + {0, 1}.
__device__ __forceinline__ void store_accumulators(bf16* c, int ldc, int row0, int col0, const float (&d)[128]) {
  const int t = threadIdx.x % 128, row = row0 + (t / 32) * 16 + (t % 32) / 4, col = col0 + 2 * (t % 4);
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    store_bf16x2(c + (size_t)row * ldc + col + 8 * j, d[4 * j], d[4 * j + 1]);
    store_bf16x2(c + (size_t)(row + 8) * ldc + col + 8 * j, d[4 * j + 2], d[4 * j + 3]);
  }
}

// ---- mbarriers (64-bit, in shared memory): a count of arrivals plus a count of bytes in flight.
__device__ __forceinline__ void mbar_init(uint64_t* bar, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(arrivals) : "memory");
}
// Make barrier initialisation and generic-proxy shared writes visible to the async proxy (TMA, wgmma).
__device__ __forceinline__ void fence_barrier_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
// Arrive, and tell the barrier that `bytes` more will land (TMA completes them) before the phase ends.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
// Wait until the phase with this parity has completed (phases alternate 0, 1, 0, ...).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(smem_u32(bar)), "r"(parity)
                 : "memory");
  }
}

// ---- TMA: the copy engine moves the box at (x = K index, y = row) of the map into shared memory
// at dst (1024-byte aligned for the 128B swizzle) and completes the bytes on `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint64_t* bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(smem_u32(bar))
      : "memory");
}

// ---- setmaxnreg: a warpgroup gives registers back to the block's pool, or takes them from it.
template <int kRegs>
__device__ __forceinline__ void release_registers() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs)); }
template <int kRegs>
__device__ __forceinline__ void claim_registers() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs)); }

// ---- host: a tensor map of a row-major (rows x k) bf16 matrix whose box is box_rows x 64, 128B-swizzled.
// cuTensorMapEncodeTiled is a driver API call, reached through the runtime (no -lcuda at link time).
inline void* tensor_map_encoder() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found;
  const bool ok = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) ==
                      cudaSuccess && found == cudaDriverEntryPointSuccess;
  return ok ? fn : nullptr;
}
inline int encode_tile_map(CUtensorMap* map, const bf16* base, int rows, int k, int box_rows) {
  static void* const fn = tensor_map_encoder();  // looked up once per process
  if (!fn) return -3;
  const cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)rows};  // innermost first
  const cuuint64_t strides[1] = {(cuuint64_t)k * sizeof(bf16)};  // bytes between rows
  const cuuint32_t box[2] = {kTileK, (cuuint32_t)box_rows}, step[2] = {1, 1};
  const CUresult r = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn)(
      map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(base), dims, strides, box, step,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : 1000 + static_cast<int>(r);
}

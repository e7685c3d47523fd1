// w4a16_stream.cu: y = x @ w^T for x (m <= 16 tokens, bf16) and 4-bit weights w (ch19_w4's format),
// the packed bytes streamed from HBM with a whole step of lead, decoded in registers, one launch.
//
// Work split: the packed K range is cut into `slices` slices of up to 16 steps (a step: 128 bytes
// of a row, one scale group of low and one of high nibbles). A persistent CTA of 16 warps (one per
// SM) stages its slice of x in shared memory once (8 KB a step, in the order the mma reads it);
// each warp then walks units of 32 rows. Per step a lane owns 8 x 16 bytes (rows g, g + 8 of two
// 16-row blocks; bytes 16t and 64 + 16t: each warp instruction reads 64 contiguous bytes of 8 rows),
// copied global -> shared with cp.async into 8 slots of its own (4 KB a warp, no barrier: a lane
// reads back only what it copied). When a half of the step has landed the lane moves it into
// registers and at once refills those slots with the next step's half: 64 KB per SM always in
// flight, a step ahead. Per 4-byte word: and (+ shr), 2 prmt and 2 HADD2 per nibble half give the
// A registers of two mma (16 tokens = two n8 halves); each group's products are scaled once.
// Split-K sum: each warp adds its unit's fp32 partials into a workspace with vector reductions
// (red.global.add.v2.f32); the unit's last slice to arrive (a ticket counter) writes the bf16
// outputs and clears the workspace and its counter for the next call. The host emulation at the end
// runs the same helpers (w4a16_stream.cuh) lane by lane on a CPU.
// Two stored formats, one kernel (template <int kFormat>): ch19_w4's row-major bytes and scales
// (w4a16_stream_gemm) and ch19_w4.tile_w4's, the same reordered into the lanes' load order
// (w4a16_tiled_gemm: a warp's copy reads 512 contiguous bytes); only the addresses and the scale load differ.
#include <cuda_runtime.h>

#include <vector>

#include "w4a16_stream.cuh"

using namespace w4s;

constexpr int kBadShape = -1;

// The launch plan for these sizes, or false when they do not fit the kernel (the tiled format holds
// whole units only: N a multiple of 32).
static bool make_plan(int m, int n, int k, int slices, int ctas_per_slice, bool tiled, Plan* p) {
  if (m < 1 || m > kTokens || n < kRows || k < 256 || k % 256 || slices < 1 || ctas_per_slice < 1) return false;
  if (tiled && n % kRows) return false;
  if ((k / 256) % slices || (k / 256) / slices > kMaxSteps) return false;
  *p = Plan{m, n, k, slices, (k / 256) / slices, ctas_per_slice, (n + kRows - 1) / kRows};
  return true;
}

namespace {

// 16 bytes of packed weights global -> shared, asynchronously (LDGSTS: no register waits for them;
// not kept in L1; L2 fetches the row's next 128 bytes too).
__device__ __forceinline__ void copy_async(uint4* dst, const uint8_t* src) {
  const uint32_t to = (uint32_t)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(to), "l"(src) : "memory");
}

__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// This lane's 4 copies of half h of a step (rows g, g + 8 of both 16-row blocks; bytes 64h + 16t) into
// its slots of the warp's buffer (slot (r, rh, h) at slots[32 * (4r + 2rh + h)]); `at`: the lane's first
// copy of the step (lane_start), null for none. Then a commit, always: two groups a step, so wait_group 1
// finds the right one.
template <int kFormat>
__device__ __forceinline__ void copy_half(uint4* slots, int h, const uint8_t* at, const Plan& p) {
  if (at != nullptr) {
#pragma unroll
    for (int rows = 0; rows < 4; ++rows)  // 16r + 8rh
      copy_async(slots + 32 * (2 * rows + h), at + block_offset<kFormat>(rows, p) + half_offset<kFormat>(h));
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// Waits for this lane's copies of all but the latest group: the half of the step about to be decoded.
__device__ __forceinline__ void wait_half() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }

// Where lane (g, t) starts in `packed` and `scale` for a unit: (row-major) row g of its window, the
// slice's first step.
struct Start {
  const uint8_t* w;
  const __nv_bfloat16* s;
};
template <int kFormat>
__device__ __forceinline__ Start unit_start(int unit, int slice, const uint8_t* packed, const __nv_bfloat16* scale,
                                            const Plan& p) {
  const int lane = threadIdx.x & 31;
  return {packed + lane_start<kFormat>(unit, lane, slice, p), scale + scale_start<kFormat>(unit, lane, slice, p)};
}

// The CTA's slice of x into shared memory, piece by piece in the mma's order (tokens >= m are zeros):
// thread i stages piece i of every step, all its loads issued before the first store.
__device__ __forceinline__ void stage_x(uint4* xs, const __nv_bfloat16* x, int slice, const Plan& p) {
  static_assert(kPieces == kWarps * 32, "one piece of each step per thread");
  uint4 v[kMaxSteps];
#pragma unroll
  for (int step = 0; step < kMaxSteps; ++step) {
    const Source s = piece_source(step * kPieces + threadIdx.x, slice, p);
    v[step] = step < p.steps && s.token < p.m
                  ? __ldg(reinterpret_cast<const uint4*>(x + (size_t)s.token * p.k + s.col))
                  : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int step = 0; step < kMaxSteps; ++step)
    if (step < p.steps) xs[step * kPieces + threadIdx.x] = v[step];
}

// part += the products of words 2cp, 2cp + 1 of this lane's half-step registers `w` (both 16-row
// blocks, low and high nibbles) with x's matching pieces: 16 mma.sync, each A from one decoded word pair.
__device__ __forceinline__ void multiply_word_pair(float (&part)[2][2][2][4], const uint4 (&w)[2][2], const uint4* xs,
                                                   int step, int cp, int lane) {
  uint4 xf[2][2];  // [low or high][token half]: 8 bf16 of x, the B registers of two words
#pragma unroll
  for (int lohi = 0; lohi < 2; ++lohi)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) xf[lohi][hh] = xs[piece_index(step, lohi, cp, hh, lane)];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int cc = 0; cc < 2; ++cc) {
      const int c = 2 * cp + cc;
      const uint32_t wg = word(w[r][0], c & 3), wg8 = word(w[r][1], c & 3);
#pragma unroll
      for (int lohi = 0; lohi < 2; ++lohi) {
        uint32_t a_g[2], a_g8[2];
        decode(wg, lohi, a_g);
        decode(wg8, lohi, a_g8);
        const uint32_t a[4] = {a_g[0], a_g8[0], a_g[1], a_g8[1]};
#pragma unroll
        for (int hh = 0; hh < 2; ++hh)
          mma(part[r][lohi][hh], a, word(xf[lohi][hh], 2 * cc), word(xf[lohi][hh], 2 * cc + 1));
      }
    }
}

// Adds the warp's partial sums of a unit into the workspace; the unit's last slice writes y.
__device__ void finish_unit(const float (&acc)[2][2][4], int unit, __nv_bfloat16* y, float* ws, unsigned* count,
                            const Plan& p) {
  const int lane = threadIdx.x & 31, g = lane / 4, t = lane & 3;
  float* sums = ws + (size_t)unit * kRows * kTokens;  // [32 rows][16 tokens]
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int rh = 0; rh < 2; ++rh)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
        atomicAdd(reinterpret_cast<float2*>(sums + (16 * r + 8 * rh + g) * kTokens + 8 * hh + 2 * t),
                  make_float2(acc[r][hh][2 * rh], acc[r][hh][2 * rh + 1]));
  // The ticket: a release by lane 0 after the warp's barrier orders every lane's adds before it; only
  // the last slice pays for an acquire fence (which also invalidates L1: the scales cached there).
  __syncwarp();
  unsigned ticket = 0;
  if (lane == 0) asm volatile("atom.add.release.gpu.u32 %0, [%1], 1;" : "=r"(ticket) : "l"(count + unit) : "memory");
  if (!last_arrival(__shfl_sync(0xFFFFFFFFu, ticket, 0), p.slices)) return;
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
  float4* mine = reinterpret_cast<float4*>(sums + lane * kTokens);
  float v[kTokens];
#pragma unroll
  for (int i = 0; i < kTokens / 4; ++i) {
    const float4 q = __ldcg(mine + i);
    v[4 * i] = q.x, v[4 * i + 1] = q.y, v[4 * i + 2] = q.z, v[4 * i + 3] = q.w;
    __stcg(mine + i, make_float4(0.f, 0.f, 0.f, 0.f));
  }
  const int row = window_row0(unit, p) + lane;
#pragma unroll
  for (int tok = 0; tok < kTokens; ++tok)
    if (row >= unit * kRows && tok < p.m) y[(size_t)tok * p.n + row] = __float2bfloat16(v[tok]);
  if (lane == 0) count[unit] = 0;
}

// The kernel's body for one stored format (the kernels below: one per format, the first two unchanged).
template <int kFormat>
__device__ __forceinline__ void stream_body(const __nv_bfloat16* __restrict__ x, const uint8_t* __restrict__ packed,
                                            const __nv_bfloat16* __restrict__ scale, __nv_bfloat16* __restrict__ y,
                                            float* ws, unsigned* count, const Plan p) {
  extern __shared__ uint4 xs[];  // x's slice (steps x 512 pieces), then 8 x 32 weight slots per warp
  const int slice = blockIdx.x % p.slices, lane = threadIdx.x & 31;
  const int stride = p.ctas_per_slice * kWarps;
  int unit = first_unit(threadIdx.x / 32, blockIdx.x / p.slices, p);
  uint4* slots = xs + p.steps * kPieces + (threadIdx.x / 32) * 8 * 32 + lane;
  Start at = unit_start<kFormat>(unit, slice, packed, scale, p);
  copy_half<kFormat>(slots, 0, unit < p.units ? at.w : nullptr, p);
  copy_half<kFormat>(slots, 1, unit < p.units ? at.w : nullptr, p);
  stage_x(xs, x, slice, p);
  __syncthreads();
  for (; unit < p.units; unit += stride) {
    float acc[2][2][4] = {};  // [block][token half][mma output]: rows g, g + 8 x tokens 2t, 2t + 1
    for (int step = 0; step < p.steps; ++step) {
      float s[2][2][2];  // [block][row g or g + 8][low or high nibbles]
      step_scales<kFormat>(at.s, step, p, s);
      const uint8_t* ahead = step + 1 < p.steps && kFormat == kSwept ? at.w + swept_step_bytes(p) * (step + 1)
                             : step + 1 < p.steps ? at.w + (step + 1) * step_bytes<kFormat>()
                             : unit + stride < p.units ? unit_start<kFormat>(unit + stride, slice, packed, scale, p).w
                                                       : nullptr;
      uint4 w[2][2];  // [16-row block][row g or g + 8]: the half of the step being decoded
      float part[2][2][2][4] = {};  // [block][low or high][token half][mma output]: this step's groups
#pragma unroll
      for (int cp = 0; cp < 4; ++cp) {  // word pairs: words 2cp, 2cp + 1 of each 16-byte load
        if (cp % 2 == 0) {  // this half's bytes have landed: into registers, and the slots refilled at once
          wait_half();
#pragma unroll
          for (int rows = 0; rows < 4; ++rows) w[rows >> 1][rows & 1] = slots[32 * (2 * rows + cp / 2)];
          // Refilled at once, in flight for a whole step: the copies write what this lane just read,
          // after it in program order (same thread, same addresses), and land hundreds of clocks later.
          copy_half<kFormat>(slots, cp / 2, ahead, p);
        }
        multiply_word_pair(part, w, xs, step, cp, lane);
      }
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int lohi = 0; lohi < 2; ++lohi)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh)
#pragma unroll
            for (int d = 0; d < 4; ++d) acc[r][hh][d] += s[r][d >> 1][lohi] * part[r][lohi][hh][d];
    }
    finish_unit(acc, unit, y, ws, count, p);
    if (unit + stride < p.units) at = unit_start<kFormat>(unit + stride, slice, packed, scale, p);
  }
}

// The row-major (kTiled false) and tiled (true) formats.
template <bool kTiled>
__global__ __launch_bounds__(kWarps * 32, 1) void w4a16_stream(const __nv_bfloat16* __restrict__ x,
                                                               const uint8_t* __restrict__ packed,
                                                               const __nv_bfloat16* __restrict__ scale,
                                                               __nv_bfloat16* __restrict__ y, float* ws,
                                                               unsigned* count, const Plan p) {
  stream_body<kTiled ? kTiledFormat : kRowMajor>(x, packed, scale, y, ws, count, p);
}

// The swept format (optimized_w4a16_gemm_swept): the same loop, each step's copies one front further on.
__global__ __launch_bounds__(kWarps * 32, 1) void w4a16_swept(const __nv_bfloat16* __restrict__ x,
                                                              const uint8_t* __restrict__ packed,
                                                              const __nv_bfloat16* __restrict__ scale,
                                                              __nv_bfloat16* __restrict__ y, float* ws,
                                                              unsigned* count, const Plan p) {
  stream_body<kSwept>(x, packed, scale, y, ws, count, p);
}

}  // namespace

// Launch on `stream`: ws (units x 32 x 16 fp32) and count (units) must be zeros on the first call;
// every call leaves them zeros. Returns 0, a CUDA error, or kBadShape.
template <int kFormat>
static int launch(const void* x, const void* packed, const void* scale, void* y, float* ws, unsigned* count, int m,
                  int n, int k, int slices, int ctas_per_slice, cudaStream_t stream) {
  Plan p;
  if (!make_plan(m, n, k, slices, ctas_per_slice, kFormat != kRowMajor, &p)) return kBadShape;
  const int smem = (p.steps * kPieces + kWarps * 8 * 32) * (int)sizeof(uint4);
  auto* kernel = kFormat == kSwept ? w4a16_swept : w4a16_stream<kFormat == kTiledFormat>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return (int)err;
  kernel<<<slices * ctas_per_slice, kWarps * 32, smem, stream>>>(
      static_cast<const __nv_bfloat16*>(x), static_cast<const uint8_t*>(packed),
      static_cast<const __nv_bfloat16*>(scale), static_cast<__nv_bfloat16*>(y), ws, count, p);
  return (int)cudaGetLastError();
}

// The row-major format (ch19_w4.quantize_w4's packed and scale).
extern "C" int w4a16_stream_gemm(const void* x, const void* packed, const void* scale, void* y, float* ws,
                                 unsigned* count, int m, int n, int k, int slices, int ctas_per_slice,
                                 cudaStream_t stream) {
  return launch<false>(x, packed, scale, y, ws, count, m, n, k, slices, ctas_per_slice, stream);
}

// The tiled format (ch19_w4.tile_w4's packed and scale; N a multiple of 32).
extern "C" int w4a16_tiled_gemm(const void* x, const void* packed, const void* scale, void* y, float* ws,
                                unsigned* count, int m, int n, int k, int slices, int ctas_per_slice,
                                cudaStream_t stream) {
  return launch<true>(x, packed, scale, y, ws, count, m, n, k, slices, ctas_per_slice, stream);
}

// The swept format (optimized_w4a16_gemm_swept.swept_w4's packed and scale; N a multiple of 32).
extern "C" int w4a16_swept_gemm(const void* x, const void* packed, const void* scale, void* y, float* ws,
                                unsigned* count, int m, int n, int k, int slices, int ctas_per_slice,
                                cudaStream_t stream) {
  return launch<kSwept>(x, packed, scale, y, ws, count, m, n, k, slices, ctas_per_slice, stream);
}

// ---- CPU emulation: the kernel's loop, lane by lane, through the same helpers ----

namespace {

float bf16_value(uint32_t bits16) {
  const uint32_t f = bits16 << 16;
  float v;
  memcpy(&v, &f, 4);
  return v;
}

// d += A B for one mma.sync.m16n8k16 (bf16 in, fp32 out), from the 32 lanes' registers (PTX ISA layout).
void mma_lanes(const uint32_t (&a)[32][4], const uint32_t (&b)[32][2], float (&d)[32][4]) {
  float am[16][16], bm[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int e = 0; e < 2; ++e) {
      am[g][2 * t + e] = bf16_value(a[lane][0] >> 16 * e & 0xFFFF);
      am[g + 8][2 * t + e] = bf16_value(a[lane][1] >> 16 * e & 0xFFFF);
      am[g][2 * t + 8 + e] = bf16_value(a[lane][2] >> 16 * e & 0xFFFF);
      am[g + 8][2 * t + 8 + e] = bf16_value(a[lane][3] >> 16 * e & 0xFFFF);
      bm[2 * t + e][g] = bf16_value(b[lane][0] >> 16 * e & 0xFFFF);
      bm[2 * t + 8 + e][g] = bf16_value(b[lane][1] >> 16 * e & 0xFFFF);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
      for (int kk = 0; kk < 16; ++kk) d[lane][i] += am[row][kk] * bm[kk][col];
    }
  }
}

struct Emulated {
  const uint8_t* packed;
  const __nv_bfloat16* scale;
  uint16_t* y;
  float* ws;
  unsigned* count;
  Plan p;
};

// One step of one warp at (unit, slice): the kernel's loop body for all 32 lanes.
template <int kFormat>
void emulate_step(const Emulated& e, const std::vector<uint4>& xs, int unit, int slice, int step,
                  float (&acc)[32][2][2][4]) {
  uint4 w[32][2][2][2];
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 2; ++r)
      for (int rh = 0; rh < 2; ++rh)
        for (int h = 0; h < 2; ++h)
          memcpy(&w[lane][r][rh][h], e.packed + lane_start<kFormat>(unit, lane, slice, e.p) + (kFormat == kSwept ? swept_step_bytes(e.p) : step_bytes<kFormat>()) * step +
                                         block_offset<kFormat>(2 * r + rh, e.p) + half_offset<kFormat>(h), 16);
  static float part[32][2][2][2][4];
  memset(part, 0, sizeof(part));
  for (int cp = 0; cp < 4; ++cp)
    for (int r = 0; r < 2; ++r)
      for (int cc = 0; cc < 2; ++cc)
        for (int lohi = 0; lohi < 2; ++lohi)
          for (int hh = 0; hh < 2; ++hh) {
            uint32_t a[32][4], b[32][2];
            float d[32][4];
            const int c = 2 * cp + cc;
            for (int lane = 0; lane < 32; ++lane) {
              uint32_t a_g[2], a_g8[2];
              decode(word(w[lane][r][0][c >> 2], c & 3), lohi, a_g);
              decode(word(w[lane][r][1][c >> 2], c & 3), lohi, a_g8);
              a[lane][0] = a_g[0], a[lane][1] = a_g8[0], a[lane][2] = a_g[1], a[lane][3] = a_g8[1];
              const uint4 xf = xs[piece_index(step, lohi, cp, hh, lane)];
              b[lane][0] = word(xf, 2 * cc), b[lane][1] = word(xf, 2 * cc + 1);
              memcpy(d[lane], part[lane][r][lohi][hh], sizeof(d[lane]));
            }
            mma_lanes(a, b, d);
            for (int lane = 0; lane < 32; ++lane) memcpy(part[lane][r][lohi][hh], d[lane], sizeof(d[lane]));
          }
  for (int lane = 0; lane < 32; ++lane) {
    float s[2][2][2];
    step_scales<kFormat>(e.scale + scale_start<kFormat>(unit, lane, slice, e.p), step, e.p, s);
    for (int r = 0; r < 2; ++r)
      for (int lohi = 0; lohi < 2; ++lohi)
        for (int hh = 0; hh < 2; ++hh)
          for (int d = 0; d < 4; ++d) acc[lane][r][hh][d] += s[r][d >> 1][lohi] * part[lane][r][lohi][hh][d];
  }
}

// finish_unit for all 32 lanes: the adds into the workspace, the ticket, the last slice's output.
void emulate_finish(const Emulated& e, int unit, const float (&acc)[32][2][2][4]) {
  float* sums = e.ws + (size_t)unit * kRows * kTokens;
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 2; ++r)
      for (int rh = 0; rh < 2; ++rh)
        for (int hh = 0; hh < 2; ++hh)
          for (int i = 0; i < 2; ++i)
            sums[(16 * r + 8 * rh + lane / 4) * kTokens + 8 * hh + 2 * (lane & 3) + i] += acc[lane][r][hh][2 * rh + i];
  if (!last_arrival(e.count[unit]++, e.p.slices)) return;
  for (int lane = 0; lane < 32; ++lane) {
    const int row = window_row0(unit, e.p) + lane;
    for (int tok = 0; tok < kTokens; ++tok) {
      const __nv_bfloat16 out = __float2bfloat16(sums[lane * kTokens + tok]);
      if (row >= unit * kRows && tok < e.p.m) memcpy(e.y + (size_t)tok * e.p.n + row, &out, 2);
      sums[lane * kTokens + tok] = 0.f;
    }
  }
  e.count[unit] = 0;
}

}  // namespace

// The kernel's computation on a CPU, CTA by CTA and warp by warp, same arguments as
// w4a16_stream_gemm (host pointers; x, scale and y as bf16 bit patterns). Returns 0 or kBadShape.
template <int kFormat>
static int emulate(const uint16_t* x, const uint8_t* packed, const uint16_t* scale, uint16_t* y, float* ws,
                  unsigned* count, int m, int n, int k, int slices, int ctas_per_slice) {
  Emulated e{packed, reinterpret_cast<const __nv_bfloat16*>(scale), y, ws, count, {}};
  if (!make_plan(m, n, k, slices, ctas_per_slice, kFormat != kRowMajor, &e.p)) return kBadShape;
  std::vector<uint4> xs(e.p.steps * kPieces);
  for (int cta = 0; cta < slices * ctas_per_slice; ++cta) {
    const int slice = cta % slices;
    for (int i = 0; i < (int)xs.size(); ++i) {
      const Source s = piece_source(i, slice, e.p);
      xs[i] = make_uint4(0, 0, 0, 0);
      if (s.token < m) memcpy(&xs[i], x + (size_t)s.token * k + s.col, 16);
    }
    for (int warp = 0; warp < kWarps; ++warp)
      for (int unit = first_unit(warp, cta / slices, e.p); unit < e.p.units; unit += ctas_per_slice * kWarps) {
        static float acc[32][2][2][4];
        memset(acc, 0, sizeof(acc));
        for (int step = 0; step < e.p.steps; ++step) emulate_step<kFormat>(e, xs, unit, slice, step, acc);
        emulate_finish(e, unit, acc);
      }
  }
  return 0;
}

extern "C" int w4a16_stream_emulate(const uint16_t* x, const uint8_t* packed, const uint16_t* scale, uint16_t* y,
                                    float* ws, unsigned* count, int m, int n, int k, int slices, int ctas_per_slice) {
  return emulate<false>(x, packed, scale, y, ws, count, m, n, k, slices, ctas_per_slice);
}

extern "C" int w4a16_tiled_emulate(const uint16_t* x, const uint8_t* packed, const uint16_t* scale, uint16_t* y,
                                   float* ws, unsigned* count, int m, int n, int k, int slices, int ctas_per_slice) {
  return emulate<true>(x, packed, scale, y, ws, count, m, n, k, slices, ctas_per_slice);
}

extern "C" int w4a16_swept_emulate(const uint16_t* x, const uint8_t* packed, const uint16_t* scale, uint16_t* y,
                                   float* ws, unsigned* count, int m, int n, int k, int slices, int ctas_per_slice) {
  return emulate<kSwept>(x, packed, scale, y, ws, count, m, n, k, slices, ctas_per_slice);
}

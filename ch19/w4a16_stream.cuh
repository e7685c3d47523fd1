// w4a16_stream.cuh: what the streaming w4a16 kernel (w4a16_stream.cu) and its CPU emulation share:
// the work split, which bytes a lane loads, how a packed word becomes mma operands, where each piece
// of x is staged. All __host__ __device__, so the CPU test runs the kernel's own index and decode code.
//
// The format (ch19_w4.py): packed[n][j] (N x K/2 bytes) holds weight (n, j) in its low nibble and
// (n, j + K/2) in its high nibble, value scale[n][group] * (code - 8), one bf16 scale per 128 of K.
//
// One mma.sync.m16n8k16 multiplies 16 weight rows (A, 16 x 16 k) by x^T (B, 16 k x 8 tokens). Lane
// (g = lane / 4, t = lane % 4) holds A[g][2t, 2t+1], A[g+8][2t, 2t+1], A[g][2t+8, 2t+9],
// A[g+8][2t+8, 2t+9] and B[2t, 2t+1][g], B[2t+8, 2t+9][g]. The 16 k of one mma may be any 16 k, as
// long as A and B agree: here lane t's four k slots are four consecutive bytes of its own loads,
// so a 4-byte word of row g decodes into that lane's A registers, and x needs no shuffle (its B
// registers are x[g][j..j+3], two consecutive bf16 pairs).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

namespace w4s {

constexpr int kWarps = 16;         // warps per CTA: 512 threads, 128 registers each, one CTA per SM
constexpr int kRows = 32;          // weight rows per unit of work: 2 blocks of 16 (the mma's M)
constexpr int kStep = 128;         // packed bytes per row per step: one group of low and one of high nibbles
constexpr int kMaxSteps = 16;      // steps per K slice at most: x's slice takes 8 KB of shared memory a step
                                   // (128 KB), the warps' weight slots 64 KB
constexpr int kPieces = 512;       // 16-byte pieces of x per step: lo/hi x 4 word pairs x 2 token halves x 32 lanes
constexpr int kTokens = 16;        // tokens at most (the mma's N, twice)

// The launch: m tokens (<= 16) x k inputs (a multiple of 256) times n x k weights, the packed K range
// cut into `slices` slices of `steps` steps; ctas_per_slice CTAs walk the units of 32 rows of each slice.
struct Plan {
  int m, n, k, slices, steps, ctas_per_slice, units;
};

// Byte offset, inside a row's 128-byte step, of word c (0..7) of lane t: the lane loads 16 bytes at
// 16t and 16 at 64 + 16t, so each load instruction of a warp reads 64 contiguous bytes of 8 rows.
__host__ __device__ inline int word_offset(int t, int c) { return 64 * (c >> 2) + 16 * t + 4 * (c & 3); }

// Index of the 16-byte piece of staged x that lane `lane` reads for (step, lohi, word pair cp, token half hh).
__host__ __device__ inline int piece_index(int step, int lohi, int cp, int hh, int lane) {
  return (((step * 2 + lohi) * 4 + cp) * 2 + hh) * 32 + lane;
}

// Where staged piece `piece` of slice `slice` comes from: 8 consecutive bf16 of x[token][col..].
struct Source {
  int token, col;
};
__host__ __device__ inline Source piece_source(int piece, int slice, const Plan& p) {
  const int lane = piece & 31, hh = (piece >> 5) & 1, cp = (piece >> 6) & 3, lohi = (piece >> 8) & 1;
  const int step = piece >> 9;
  return {8 * hh + lane / 4, lohi * (p.k / 2) + (slice * p.steps + step) * kStep + word_offset(lane & 3, 2 * cp)};
}

// The first unit of warp `warp` of the CTA `cta` of a slice; a warp then takes every
// (ctas_per_slice * kWarps)-th unit. Warp-major, so that when units run out, every SM loses a warp
// or two rather than a few SMs all of theirs.
__host__ __device__ inline int first_unit(int warp, int cta, const Plan& p) { return warp * p.ctas_per_slice + cta; }

// First row of unit `unit`'s 32-row window: the unit's own rows, or for a tail unit the last 32 rows
// (the rows before unit * 32 are an earlier unit's: read again, never written twice).
__host__ __device__ inline int window_row0(int unit, const Plan& p) {
  return unit * kRows < p.n - kRows ? unit * kRows : p.n - kRows;
}

// Byte offset in `packed` of the 16 bytes lane t loads of row `row` at a step of a slice, half h.
__host__ __device__ inline size_t weight_offset(int row, int slice, int step, int h, int t, const Plan& p) {
  return (size_t)row * (p.k / 2) + (size_t)(slice * p.steps + step) * kStep + 64 * h + 16 * t;
}

// Index in `scale` of row `row`'s scale for the step's low (lohi 0) or high (1) nibbles.
__host__ __device__ inline size_t scale_index(int row, int slice, int step, int lohi, const Plan& p) {
  return (size_t)row * (p.k / 128) + lohi * (p.k / 256) + slice * p.steps + step;
}

// ---- the tiled format (optimized_w4a16_gemm_tiled.py; ch19_w4.tile_w4 writes it once, when the weights
// are packed) ----
// The same bytes and scales, reordered so that a warp's copies of a step are one 4 KB run in the order
// its lanes take them: unit u (rows 32u..32u + 31; N a multiple of 32), global step s (K / 256 of them),
// half h, row block b (rows 8b + g), lane (g, t): the 16 bytes the row-major format holds at
// weight_offset(32u + 8b + g, step s, h, t) sit at (((u * K/256 + s) * 2 + h) * 4 + b) * 512 + 16 * lane.
// A warp's copy instruction then reads 512 contiguous bytes (4 whole 128-byte lines, where the row-major
// format gives 64 bytes of each of 8 rows 8 KB apart) and a warp's K slice of a unit is one 64 KB run.
// Scales: lane g's 8 of step s, (block b, low or high) at ((u * 8 + g) * K/256 + s) * 8 + 2b + lohi: one
// 16-byte load a step, and a 128-byte line holds 8 steps' (L1 hits after the first, as in the row-major
// format, where a row's 32-byte sector holds 16 steps' scales of one nibble half). The swept format keeps these.
constexpr int kTiledStep = kRows * kStep;  // bytes of one unit's step: 4 KB

// The swept format (optimized_w4a16_gemm_swept.py): tile_w4's 4 KB unit steps with the unit and step
// orders swapped: unit u's global step s at (s * units + u) * 4 KB, the scales as tiled. At any moment
// the warps of a slice, all near the same step of consecutive units, read one compact front of memory
// (as a plain front-to-back read does) instead of ~2,100 separate 64 KB runs.
// Formats, the kernel's template argument (a bool true/false still names the tiled/row-major one).
constexpr int kRowMajor = 0;
constexpr int kTiledFormat = 1;
constexpr int kSwept = 2;

// Byte offset in `packed` of the lane's first copy (block 0, half 0) of a unit at its slice's first step.
template <int kFormat>
__host__ __device__ inline size_t lane_start(int unit, int lane, int slice, const Plan& p) {
  if constexpr (kFormat == kSwept) return ((size_t)slice * p.steps * p.units + unit) * kTiledStep + 16 * lane;
  if constexpr (kFormat != kRowMajor) return ((size_t)unit * (p.k / 256) + slice * p.steps) * kTiledStep + 16 * lane;
  return weight_offset(window_row0(unit, p) + lane / 4, slice, 0, 0, lane & 3, p);
}

// Bytes from a lane's copy of block 0 to block b (8b rows down), of half 0 to half h, of a step to the next:
// step_bytes (row-major, tiled) or swept_step_bytes (swept: one front, a step of every unit).
template <int kFormat>
__host__ __device__ inline size_t block_offset(int b, const Plan& p) {
  return kFormat != kRowMajor ? (size_t)512 * b : (size_t)(8 * b) * (p.k / 2);
}
template <int kFormat>
__host__ __device__ constexpr int half_offset(int h) { return (kFormat != kRowMajor ? 4 * 512 : 64) * h; }
template <int kFormat>
__host__ __device__ constexpr int step_bytes() { return kFormat != kRowMajor ? kTiledStep : kStep; }
__host__ __device__ inline size_t swept_step_bytes(const Plan& p) { return (size_t)p.units * kTiledStep; }  // a front

// Index in `scale` of the lane's first scale of a unit at its slice's first step.
template <int kFormat>
__host__ __device__ inline size_t scale_start(int unit, int lane, int slice, const Plan& p) {
  if constexpr (kFormat != kRowMajor) return (((size_t)unit * 8 + lane / 4) * (p.k / 256) + slice * p.steps) * 8;
  return scale_index(window_row0(unit, p) + lane / 4, slice, 0, 0, p);
}

__host__ __device__ inline uint32_t word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

__host__ __device__ inline float float_bits(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float f;
  memcpy(&f, &bits, 4);
  return f;
#endif
}

// The lane's 8 scales of a step, s[block r][row g or g + 8][low or high nibbles] in fp32, from `at`
// (scale_start's element): 8 two-byte loads (row-major) or one 16-byte load (tiled, swept).
template <int kFormat>
__host__ __device__ inline void step_scales(const __nv_bfloat16* at, int step, const Plan& p, float (&s)[2][2][2]) {
  if constexpr (kFormat != kRowMajor) {
    const uint4* v16 = reinterpret_cast<const uint4*>(at + 8 * step);
#ifdef __CUDA_ARCH__
    const uint4 v = __ldg(v16);
#else
    const uint4 v = *v16;
#endif
#pragma unroll
    for (int i = 0; i < 8; ++i)  // element i = 4r + 2rh + lohi: bf16 (i & 1) of word i / 2
      s[i >> 2][(i >> 1) & 1][i & 1] = float_bits(i & 1 ? word(v, i >> 1) & 0xFFFF0000u : word(v, i >> 1) << 16);
  } else {
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int rh = 0; rh < 2; ++rh)
#pragma unroll
        for (int lohi = 0; lohi < 2; ++lohi)
          s[r][rh][lohi] = __bfloat162float(at[(size_t)(16 * r + 8 * rh) * (p.k / 128) + lohi * (p.k / 256) + step]);
  }
}

__host__ __device__ inline uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t selector) {
#ifdef __CUDA_ARCH__
  return __byte_perm(a, b, selector);
#else
  const uint64_t pool = (uint64_t)b << 32 | a;
  uint32_t out = 0;
  for (int i = 0; i < 4; ++i) out |= (uint32_t)(pool >> 8 * ((selector >> 4 * i) & 7) & 0xFF) << 8 * i;
  return out;
#endif
}

// (a - 136, b - 136) of a bf16 pair holding 128 + code: code - 8, exact (HADD2.BF16 on the GPU).
__host__ __device__ inline uint32_t minus_136(uint32_t pair) {
  const uint32_t minus_136_bits = 0xC308C308u;  // bf16 -136 twice
  __nv_bfloat162 v, offset;
  memcpy(&v, &pair, 4);
  memcpy(&offset, &minus_136_bits, 4);
  v = __hadd2(v, offset);
  memcpy(&pair, &v, 4);
  return pair;
}

// code - 8 of the four low (high = false) or high nibbles of word w, as bf16 pairs: out[0] = bytes 0, 1,
// out[1] = bytes 2, 3. A prmt puts each nibble under the exponent byte 0x43: bf16 0x43XY is 128 + XY
// for XY < 128 (bf16's step at 128 is 1), so no conversion instruction is needed.
__host__ __device__ inline void decode(uint32_t w, bool high, uint32_t out[2]) {
#if W4_FAULT == 1  // planted fault for the tests: the nibble order swapped
  high = !high;
#endif
  const uint32_t nibbles = (high ? w >> 4 : w) & 0x0F0F0F0Fu;
  out[0] = minus_136(byte_perm(nibbles, 0x43434343u, 0x4140));
  out[1] = minus_136(byte_perm(nibbles, 0x43434343u, 0x4342));
}

// Whether the warp that drew ticket `ticket` (0-based arrival) at a unit is its last slice's: it
// turns the unit's fp32 sums into bf16 outputs and clears them for the next call.
__host__ __device__ inline bool last_arrival(unsigned ticket, int slices) {
#if W4_FAULT == 2  // planted fault for the tests: the output written before the last slice has added its part
  return ticket + 2 == (unsigned)slices;
#else
  return ticket + 1 == (unsigned)slices;
#endif
}

}  // namespace w4s

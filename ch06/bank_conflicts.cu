// bank_conflicts.cu: S = Q K^T for a batch of 32x32 fp32 tiles (attention scores of 32 queries
// against 32 keys, head dimension 32), one tile per 256-thread block.
//
// Shared memory has 32 banks of 4 bytes: word w lives in bank w % 32, and a warp's load takes
// one pass per distinct address within a bank. Lane j of a warp computes S[i][j] = sum_k Q[i][k]
// K[j][k], so at step k the 32 lanes read K[0..31][k]: a column of the K tile.
//   kPad = 0   K tile [32][32]: the column's words are 32 apart, all in bank k % 32: 32 passes
//              (a 32-way bank conflict) per load.
//   kPad = 1   K tile [32][33]: word j*33 + k is in bank (j + k) % 32: 32 different banks, one
//              pass. One unused float per row (128 bytes per tile) buys a 32x cheaper load.
// Q[i][k..k+3] is the same address for the whole warp (a broadcast, one pass).
// Same loads, same FMAs in the same order: bitwise the same answer. ptxas turns the unpadded
// column reads into 128-bit loads (4 steps each; still 32 passes per load), which costs it 42
// registers (5 blocks of 256 per SM) against 32 (8 blocks) padded; capping both at 32 spills.
//   scores_swizzled (layout 2)  fewer shared loads per FMA, still conflict-free: 64 threads per tile,
//              each computes a 4 x 4 block of S from 16-byte reads (4 Q rows and 4 K rows, 4 steps
//              of d each): 8 LDS.128 per 64 FMAs instead of 2 loads per 8. Rows 4 apart read the
//              same 16-byte chunk, so no row padding separates them (a pad keeping the 16-byte
//              alignment moves a row by a multiple of 4 banks: rows 4 apart land 0 or 16 banks
//              apart); an XOR swizzle does: chunk c of row r is stored at chunk c ^ (r / 4 % 8).
// Python: ch06/baseline_bank_conflicts.py
#include <cstdint>

#include "ch06_check.cuh"

constexpr int kTile = 32;
constexpr int kRowsPerThread = 4;  // 32 rows / 8 warps

template <int kPad>
__global__ void __launch_bounds__(256) scores(const float* __restrict__ q, const float* __restrict__ k,
                                              float* __restrict__ s) {
  __shared__ __align__(16) float qs[kTile][kTile];
  __shared__ float ks[kTile][kTile + kPad];
  const int lane = threadIdx.x % kTile, warp = threadIdx.x / kTile;
  const long base = (long)blockIdx.x * kTile * kTile;
  for (int r = warp; r < kTile; r += 8) {  // coalesced row loads, conflict-free row stores
    qs[r][lane] = q[base + r * kTile + lane];
    ks[r][lane] = k[base + r * kTile + lane];
  }
  __syncthreads();
  float acc[kRowsPerThread] = {};
#pragma unroll
  for (int d = 0; d < kTile; d += 4) {
    float kcol[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) kcol[e] = ks[lane][d + e];  // the column read
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const float4 qrow = *reinterpret_cast<const float4*>(&qs[warp + 8 * r][d]);  // broadcast
      acc[r] = fmaf(qrow.x, kcol[0], acc[r]);
      acc[r] = fmaf(qrow.y, kcol[1], acc[r]);
      acc[r] = fmaf(qrow.z, kcol[2], acc[r]);
      acc[r] = fmaf(qrow.w, kcol[3], acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) s[base + (warp + 8 * r) * kTile + lane] = acc[r];
}

constexpr int kChunks = kTile / 4;  // 16-byte chunks per tile row
constexpr int kTileThreads = 64;    // 8 x 8 threads per tile, a 4 x 4 block of S each
constexpr int kTilesPerBlock = 2;
constexpr int kSwizzledBlocks = 10;  // per SM: 48 registers x 128 threads (ptxas -v: 0 spill)

// Where chunk `chunk` of row `row` lives in a [32][8] float4 tile: rows 4 apart (row / 4 differs)
// get different chunks, rows of one group of 4 keep theirs in a permutation (stores stay whole rows).
__device__ __forceinline__ int swizzled(int row, int chunk) { return chunk ^ ((row >> 2) & (kChunks - 1)); }

__global__ void __launch_bounds__(kTileThreads * kTilesPerBlock, kSwizzledBlocks)
    scores_swizzled(const float4* __restrict__ q, const float4* __restrict__ k, float4* __restrict__ s, int tiles) {
  __shared__ float4 qs[kTilesPerBlock][kTile][kChunks];
  __shared__ float4 ks[kTilesPerBlock][kTile][kChunks];
  const int slot = threadIdx.x / kTileThreads, t = threadIdx.x % kTileThreads;
  const long tile = (long)blockIdx.x * kTilesPerBlock + slot;
  const bool valid = tile < tiles;
  const long base = tile * kTile * kChunks;
  if (valid) {  // a warp reads 512 contiguous bytes and stores 4 whole rows (a chunk permutation each)
#pragma unroll
    for (int m = 0; m < kTile * kChunks / kTileThreads; ++m) {
      const int f = t + m * kTileThreads, row = f / kChunks, chunk = swizzled(row, f % kChunks);
      qs[slot][row][chunk] = q[base + f];
      ks[slot][row][chunk] = k[base + f];
    }
  }
  __syncthreads();
  if (!valid) return;
  const int tx = t % 8, ty = t / 8;  // S rows 4ty..4ty+3, columns 4tx..4tx+3; swizzled(4ty + a, c) = c ^ ty
  float acc[4][4] = {};
#pragma unroll 1  // unrolled, ptxas hoists all 64 loads: 62 registers, 8 blocks per SM
  for (int c = 0; c < kChunks; ++c) {
    float4 kv[4];  // 8 lanes x 8 rows 4 apart: chunks c ^ 0..7, all 32 banks once
#pragma unroll
    for (int b = 0; b < 4; ++b) kv[b] = ks[slot][4 * tx + b][c ^ tx];
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const float4 qv = qs[slot][4 * ty + a][c ^ ty];  // 4 rows per warp, each a broadcast to 8 lanes
#pragma unroll
      for (int b = 0; b < 4; ++b) {  // d = 4c..4c+3 in order: the same FMAs as scores<>
        acc[a][b] = fmaf(qv.x, kv[b].x, acc[a][b]);
        acc[a][b] = fmaf(qv.y, kv[b].y, acc[a][b]);
        acc[a][b] = fmaf(qv.z, kv[b].z, acc[a][b]);
        acc[a][b] = fmaf(qv.w, kv[b].w, acc[a][b]);
      }
    }
  }
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    s[base + (4 * ty + a) * kChunks + tx] = make_float4(acc[a][0], acc[a][1], acc[a][2], acc[a][3]);
  }
}

// layout 0: [32][32] K tile, 1: [32][33], 2: scores_swizzled (q, k, s 16-byte aligned, else -1).
// q, k, s: tiles x 32 x 32 floats, row-major.
extern "C" int scores_run(int layout, const float* q, const float* k, float* s, int tiles, cudaStream_t st) {
  if (layout == 2) {
    if (((uintptr_t)q | (uintptr_t)k | (uintptr_t)s) % sizeof(float4)) return -1;
    scores_swizzled<<<(tiles + kTilesPerBlock - 1) / kTilesPerBlock, kTileThreads * kTilesPerBlock, 0, st>>>(
        reinterpret_cast<const float4*>(q), reinterpret_cast<const float4*>(k), reinterpret_cast<float4*>(s), tiles);
  } else {
    (layout ? scores<1> : scores<0>)<<<tiles, 256, 0, st>>>(q, k, s);
  }
  return launch_status();
}

// Resident blocks per SM of scores_swizzled (occupancy API), -1 on error.
extern "C" int scores_swizzled_blocks_per_sm() {
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, scores_swizzled, kTileThreads * kTilesPerBlock, 0)) {
    return -1;
  }
  return per_sm;
}

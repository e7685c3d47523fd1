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
// Python: ch06/baseline_bank_conflicts.py
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

// padded = 0: [32][32] K tile, 1: [32][33]. q, k, s: tiles x 32 x 32 floats, row-major.
extern "C" int scores_run(int padded, const float* q, const float* k, float* s, int tiles, cudaStream_t st) {
  (padded ? scores<1> : scores<0>)<<<tiles, 256, 0, st>>>(q, k, s);
  return launch_status();
}

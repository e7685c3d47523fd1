// cooperative_persistent.cu: `steps` explicit time steps of 1-D heat diffusion,
// u[i] <- u[i] + k (u[i-1] - 2 u[i] + u[i+1]), zero outside [0, n). Each step needs the whole
// previous step, so the steps are dependent.
//
//   launches    one heat_step kernel per step, ping-ponging between two global buffers: `steps`
//               launches, and every step reads and writes all n values through L2/HBM.
//   persistent  one cooperative kernel (cudaLaunchCooperativeKernel, one block per SM: all blocks
//               are resident at once, so grid.sync() cannot deadlock). Block b keeps its chunk of u
//               in shared memory for all steps; per step it publishes only its two edge values to
//               a global halo array and waits at grid.sync() for its neighbours' edges. No launches
//               between steps, and the field never leaves the SMs until the last step.
// Both evaluate heat() on the same operands, so the results should agree bit for bit.
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

constexpr int kStepThreads = 256, kThreads = 1024, kPer = 16;  // persistent: up to 16,384 points a block

__device__ __forceinline__ float heat(float left, float centre, float right, float k) {
  return centre + k * (left - 2.f * centre + right);
}

__global__ __launch_bounds__(kStepThreads) void heat_step(const float* __restrict__ u, float* __restrict__ v, int n,
                                                          float k) {
  const int i = blockIdx.x * kStepThreads + threadIdx.x;
  if (i >= n) return;
  const float left = i > 0 ? u[i - 1] : 0.f, right = i + 1 < n ? u[i + 1] : 0.f;
  v[i] = heat(left, u[i], right, k);
}

// halo holds 2 x gridDim.x pairs (first, last value of each block's chunk), double-buffered by step parity.
__global__ __launch_bounds__(kThreads) void heat_persistent(const float* __restrict__ u0, float* __restrict__ out,
                                                            float* halo, int n, int steps, float k, int chunk) {
  extern __shared__ float s[];
  cg::grid_group grid = cg::this_grid();
  const int b = blockIdx.x, nb = gridDim.x, first = b * chunk;
  const int len = max(0, min(chunk, n - first));
  for (int i = threadIdx.x; i < len; i += kThreads) s[i] = u0[first + i];
  if (threadIdx.x == 0 && len > 0) {
    __stcg(&halo[2 * b], u0[first]);
    __stcg(&halo[2 * b + 1], u0[first + len - 1]);
  }
  grid.sync();
  for (int t = 0; t < steps; ++t) {
    const float* in = halo + (t & 1) * 2 * nb;  // neighbours' edges after step t-1 (L2, never a stale L1 line)
    float* next = halo + ((t + 1) & 1) * 2 * nb;
    const float left = b > 0 ? __ldcg(&in[2 * (b - 1) + 1]) : 0.f;
    const float right = first + len < n ? __ldcg(&in[2 * (b + 1)]) : 0.f;
    float v[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int i = threadIdx.x + j * kThreads;
      if (i < len) v[j] = heat(i > 0 ? s[i - 1] : left, s[i], i + 1 < len ? s[i + 1] : right, k);
    }
    __syncthreads();  // every old value read before any is overwritten
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int i = threadIdx.x + j * kThreads;
      if (i < len) s[i] = v[j];
    }
    __syncthreads();
    if (threadIdx.x == 0 && len > 0) {
      __stcg(&next[2 * b], s[0]);
      __stcg(&next[2 * b + 1], s[len - 1]);
    }
    grid.sync();  // all edges of step t published; nobody still reads the buffer step t+1 writes
  }
  for (int i = threadIdx.x; i < len; i += kThreads) out[first + i] = s[i];
}

static int run_launches(const float* u0, float* out, float* tmp, int n, int steps, float k, cudaStream_t s) {
  const float* src = u0;
  for (int t = 0; t < steps; ++t) {
    float* dst = (steps - 1 - t) % 2 == 0 ? out : tmp;  // the last step lands in out
    heat_step<<<(n + kStepThreads - 1) / kStepThreads, kStepThreads, 0, s>>>(src, dst, n, k);
    src = dst;
  }
  return (int)cudaGetLastError();
}

static int run_persistent(const float* u0, float* out, float* halo, int n, int steps, float k, cudaStream_t s) {
  int dev = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&dev) || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) return -2;
  int chunk = (n + sms - 1) / sms;
  const size_t smem = (size_t)chunk * sizeof(float);
  if (chunk > kThreads * kPer) return -3;  // too many points for the SMs' shared memory as configured
  if (cudaFuncSetAttribute(heat_persistent, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)) return -4;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, heat_persistent, kThreads, smem) || per_sm < 1) return -5;
  void* args[] = {(void*)&u0, (void*)&out, (void*)&halo, (void*)&n, (void*)&steps, (void*)&k, (void*)&chunk};
  return (int)cudaLaunchCooperativeKernel((void*)heat_persistent, dim3(sms), dim3(kThreads), args, smem, s);
}

// u0, out, tmp: n floats; halo: 4 x (SM count) floats. persistent: 0 one launch per step, 1 cooperative kernel.
extern "C" int heat_run(int persistent, const float* u0, float* out, float* tmp, float* halo, int n, int steps,
                        float k, cudaStream_t s) {
  if (n <= 0 || steps <= 0) return -1;
  return persistent ? run_persistent(u0, out, halo, n, steps, k, s) : run_launches(u0, out, tmp, n, steps, k, s);
}

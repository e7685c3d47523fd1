// Dependent-FMA latency floor of `aisp peak` (aisp/peak/fma_latency.py): one warp runs one chain of
// dependent fp32 FMAs (x = x * a + b, each waiting for the one before), the loop of ch11's fma_chain.
// One warp on one SM and nothing else to issue: the time per FMA is the FFMA's dependent-issue latency
// (~4 cycles on Hopper), not the FMA pipes' throughput (simt_fma.cu's 16 independent chains a thread).
// a and b are kernel arguments (the compiler cannot fold the chain, and fp32 FMAs are never
// reassociated), nothing is loaded inside the loop, and each thread writes its result (the chain
// cannot be dropped). The inner loop is unrolled UNROLL times, so the loop counter and the branch
// issue in the chain's wait slots instead of adding to it.

constexpr int UNROLL = 64;
constexpr int THREADS = 32;

__global__ void __launch_bounds__(THREADS) ffma_dependent(float* out, float a, float b, int rounds) {
  float x = threadIdx.x;
  for (int i = 0; i < rounds; ++i) {
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) x = fmaf(x, a, b);
  }
  out[threadIdx.x] = x;
}

// Dependent FMAs of one chain per round.
extern "C" int fma_dependent_unroll() { return UNROLL; }

extern "C" int fma_dependent_threads() { return THREADS; }

// One warp (one block of THREADS threads) runs rounds x UNROLL dependent FFMAs into out[THREADS].
extern "C" int fma_dependent_run(void* out, int rounds, float a, float b, cudaStream_t s) {
  ffma_dependent<<<1, THREADS, 0, s>>>(static_cast<float*>(out), a, b, rounds);
  return static_cast<int>(cudaGetLastError());
}

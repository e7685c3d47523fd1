// cublaslt_gemm.cu: C = A @ B in bf16 (fp32 accumulation) through cuBLASLt, planned once.
//
// lt_plan(m, n, k, workspace_bytes) builds the operation and matrix-layout descriptors and asks the
// heuristic for the best algorithm that fits the workspace (tensor-core kernels on Hopper: wgmma,
// TMA, warp specialization, split-K or stream-K where the shape wants it); lt_gemm runs it on the
// caller's stream with the caller's workspace. Row-major C = A @ B is column-major C^T = B^T A^T,
// so B goes first and m and n swap (as in ch01's cuBLAS calls). Link with -lcublasLt.
// Python: ch09/optimized_cublaslt_gemm.py
#include <cublasLt.h>
#include <cuda_runtime.h>

struct Plan {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t lay_b = nullptr, lay_a = nullptr, lay_c = nullptr;
  cublasLtMatmulAlgo_t algo;
  size_t workspace = 0;
  int m = 0, n = 0, k = 0;
};
static Plan plan;

static void release() {
  if (plan.lay_c) cublasLtMatrixLayoutDestroy(plan.lay_c);
  if (plan.lay_a) cublasLtMatrixLayoutDestroy(plan.lay_a);
  if (plan.lay_b) cublasLtMatrixLayoutDestroy(plan.lay_b);
  if (plan.op) cublasLtMatmulDescDestroy(plan.op);
  plan.lay_c = plan.lay_a = plan.lay_b = nullptr;
  plan.op = nullptr;
  plan.m = plan.n = plan.k = 0;
}

static int describe(int m, int n, int k) {
  int s = cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  // column-major: B^T is n x k (ld n), A^T is k x m (ld k), C^T is n x m (ld n)
  if (!s) s = cublasLtMatrixLayoutCreate(&plan.lay_b, CUDA_R_16BF, n, k, n);
  if (!s) s = cublasLtMatrixLayoutCreate(&plan.lay_a, CUDA_R_16BF, k, m, k);
  if (!s) s = cublasLtMatrixLayoutCreate(&plan.lay_c, CUDA_R_16BF, n, m, n);
  return s;
}

// Returns 0, a cuBLAS status, or -1 when the heuristic offers no algorithm.
extern "C" int lt_plan(int m, int n, int k, size_t workspace_bytes) {
  if (!plan.handle && cublasLtCreate(&plan.handle)) return -2;
  release();
  int s = describe(m, n, k);
  cublasLtMatmulPreference_t pref = nullptr;
  if (!s) s = cublasLtMatmulPreferenceCreate(&pref);
  uint64_t limit = workspace_bytes;
  if (!s) s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit,
                                                   sizeof(limit));
  cublasLtMatmulHeuristicResult_t best = {};
  int found = 0;
  if (!s) s = cublasLtMatmulAlgoGetHeuristic(plan.handle, plan.op, plan.lay_b, plan.lay_a, plan.lay_c, plan.lay_c,
                                             pref, 1, &best, &found);
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (!s && found == 0) s = -1;
  if (s) {
    release();
    return s;
  }
  plan.algo = best.algo;
  plan.workspace = workspace_bytes;
  plan.m = m, plan.n = n, plan.k = k;
  return 0;
}

// Runs the planned product; -3 when the shape is not the planned one.
extern "C" int lt_gemm(const void* a, const void* b, void* c, int m, int n, int k, void* workspace,
                       cudaStream_t stream) {
  if (m != plan.m || n != plan.n || k != plan.k) return -3;
  const float one = 1.0f, zero = 0.0f;
  return cublasLtMatmul(plan.handle, plan.op, &one, b, plan.lay_b, a, plan.lay_a, &zero, c, plan.lay_c, c,
                        plan.lay_c, &plan.algo, workspace, plan.workspace, stream);
}

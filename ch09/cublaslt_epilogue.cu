// cublaslt_epilogue.cu: Y = gelu_tanh(X @ W^T + b) in bf16 (fp32 accumulation) through cuBLASLt's
// GELU_BIAS epilogue, with the algorithm chosen among several of the heuristic's candidates.
//
// epi_plan(m, n, k, workspace_bytes, wanted, &found) builds the operation (epilogue GELU_BIAS, bias
// per output feature) and layout descriptors once and keeps up to `wanted` algorithms that
// cublasLtMatmulAlgoGetHeuristic offers, best first (candidate 0 is the one torch._addmm_activation
// gets); epi_choose(i) selects one; epi_gemm runs the selected one on the caller's stream.
// Layout as torch's Linear: row-major Y (m x n) is column-major Y^T (n x m) = W (n x k, stored
// row-major, so op T) times X^T (k x m, op N); the bias runs along Y^T's rows. Link with -lcublasLt.
// Python: ch09/optimized_gemm_epilogue_lt.py
#include <cublasLt.h>
#include <cuda_runtime.h>

constexpr int kMaxAlgos = 32;

struct EpiPlan {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t lay_w = nullptr, lay_x = nullptr, lay_y = nullptr;
  cublasLtMatmulAlgo_t algos[kMaxAlgos];
  int count = 0, chosen = 0;
  size_t workspace = 0;
  int m = 0, n = 0, k = 0;
};
static EpiPlan plan;

static void release() {
  if (plan.lay_y) cublasLtMatrixLayoutDestroy(plan.lay_y);
  if (plan.lay_x) cublasLtMatrixLayoutDestroy(plan.lay_x);
  if (plan.lay_w) cublasLtMatrixLayoutDestroy(plan.lay_w);
  if (plan.op) cublasLtMatmulDescDestroy(plan.op);
  plan.lay_y = plan.lay_x = plan.lay_w = nullptr;
  plan.op = nullptr;
  plan.count = plan.chosen = 0;
  plan.m = plan.n = plan.k = 0;
}

static int describe(int m, int n, int k, const void* bias) {
  int s = cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const cublasOperation_t t = CUBLAS_OP_T;
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;  // tanh GELU of (acc + bias), fp32
  if (!s) s = cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
  if (!s) s = cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
  if (!s) s = cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  // column-major: W stored k x n (ld k, op T), X^T is k x m (ld k), Y^T is n x m (ld n)
  if (!s) s = cublasLtMatrixLayoutCreate(&plan.lay_w, CUDA_R_16BF, k, n, k);
  if (!s) s = cublasLtMatrixLayoutCreate(&plan.lay_x, CUDA_R_16BF, k, m, k);
  if (!s) s = cublasLtMatrixLayoutCreate(&plan.lay_y, CUDA_R_16BF, n, m, n);
  return s;
}

// Returns 0 (with *found candidates, at least 1), a cuBLAS status, or -1 when the heuristic offers none.
extern "C" int epi_plan(int m, int n, int k, const void* bias, size_t workspace_bytes, int wanted, int* found) {
  *found = 0;
  if (!plan.handle && cublasLtCreate(&plan.handle)) return -2;
  release();
  if (wanted < 1 || wanted > kMaxAlgos) wanted = kMaxAlgos;
  int s = describe(m, n, k, bias);
  cublasLtMatmulPreference_t pref = nullptr;
  if (!s) s = cublasLtMatmulPreferenceCreate(&pref);
  uint64_t limit = workspace_bytes;
  if (!s) s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit,
                                                   sizeof(limit));
  cublasLtMatmulHeuristicResult_t results[kMaxAlgos] = {};
  int returned = 0;
  if (!s) s = cublasLtMatmulAlgoGetHeuristic(plan.handle, plan.op, plan.lay_w, plan.lay_x, plan.lay_y, plan.lay_y,
                                             pref, wanted, results, &returned);
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  for (int i = 0; !s && i < returned; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS) plan.algos[plan.count++] = results[i].algo;
  if (!s && plan.count == 0) s = -1;
  if (s) {
    release();
    return s;
  }
  plan.workspace = workspace_bytes;
  plan.m = m, plan.n = n, plan.k = k;
  *found = plan.count;
  return 0;
}

// Selects candidate i of the plan; -4 when there is no such candidate.
extern "C" int epi_choose(int i) {
  if (i < 0 || i >= plan.count) return -4;
  plan.chosen = i;
  return 0;
}

// Runs the planned GEMM + bias + GELU with the chosen algorithm; -3 when the shape is not the planned one.
extern "C" int epi_gemm(const void* x, const void* w, const void* bias, void* y, int m, int n, int k, void* workspace,
                        cudaStream_t stream) {
  if (m != plan.m || n != plan.n || k != plan.k || plan.count == 0) return -3;
  int s = cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  if (s) return s;
  const float one = 1.0f, zero = 0.0f;
  return cublasLtMatmul(plan.handle, plan.op, &one, w, plan.lay_w, x, plan.lay_x, &zero, y, plan.lay_y, y,
                        plan.lay_y, &plan.algos[plan.chosen], workspace, plan.workspace, stream);
}

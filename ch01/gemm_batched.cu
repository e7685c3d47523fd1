// gemm_batched.cu: 40 small GEMMs as 40 cublasSgemm calls, one cublasSgemmBatched call, or one
// cublasSgemmStridedBatched call.
//
// Each 128x128x128 product is ~4 MFLOP: a few microseconds of GPU work, about what one launch
// costs. Forty separate calls pay forty launches (and forty under-filled grids); a batched call
// launches one kernel whose grid covers all forty products.
// Build and run: make && ./bin/gemm_batched_sm$(arch)   (Python: ch01/baseline_gemm.py)
#include <cublas_v2.h>

#include <cmath>
#include <vector>

#include "ch01_check.cuh"

// Row-major C = A @ B (m x k times k x n) is column-major C^T = B^T A^T, and a row-major
// buffer read column-major is its transpose: so pass B first and swap m and n.
static const float kOne = 1.0f, kZero = 0.0f;

static cublasHandle_t handle() {
  static cublasHandle_t h = nullptr;
  if (!h && cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) h = nullptr;
  return h;
}

extern "C" int gemm_init() { return handle() ? 0 : -1; }

extern "C" int gemm_loop(const float* a, const float* b, float* c, int batch, int m, int n, int k,
                         cudaStream_t stream) {
  cublasHandle_t h = handle();
  int status = h ? cublasSetStream(h, stream) : -1;
  for (int i = 0; i < batch && status == 0; ++i) {
    status = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &kOne, b + (size_t)i * k * n, n,
                         a + (size_t)i * m * k, k, &kZero, c + (size_t)i * m * n, n);
  }
  return status;
}

// a_ptrs, b_ptrs, c_ptrs: device arrays of `batch` device pointers.
extern "C" int gemm_batched(const float* const* a_ptrs, const float* const* b_ptrs, float* const* c_ptrs,
                            int batch, int m, int n, int k, cudaStream_t stream) {
  cublasHandle_t h = handle();
  if (!h || cublasSetStream(h, stream)) return -1;
  return cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &kOne, b_ptrs, n, a_ptrs, k, &kZero,
                            c_ptrs, n, batch);
}

extern "C" int gemm_strided(const float* a, const float* b, float* c, int batch, int m, int n, int k,
                            cudaStream_t stream) {
  cublasHandle_t h = handle();
  if (!h || cublasSetStream(h, stream)) return -1;
  return cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &kOne, b, n, (long long)k * n, a,
                                   k, (long long)m * k, &kZero, c, n, (long long)m * n, batch);
}

#ifndef CH01_LIBRARY
static bool matches(const std::vector<float>& got, const std::vector<double>& ref) {
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::fabs(got[i] - ref[i]) > 1e-4 + 1e-4 * std::fabs(ref[i])) return false;
  }
  return true;
}

int main() {
  const int batch = 40, m = 128, n = 128, k = 128;
  const size_t na = (size_t)batch * m * k, nb = (size_t)batch * k * n, nc = (size_t)batch * m * n;
  std::vector<float> ha(na), hb(nb);
  unsigned state = 12345u;
  auto uniform = [&state] { state = state * 1664525u + 1013904223u; return (state >> 8) / 8388608.0f - 1.0f; };
  for (auto& v : ha) v = uniform();
  for (auto& v : hb) v = uniform();
  std::vector<double> ref(nc, 0.0);
  for (int i = 0; i < batch; ++i)
    for (int r = 0; r < m; ++r)
      for (int t = 0; t < k; ++t)
        for (int col = 0; col < n; ++col)
          ref[(size_t)i * m * n + r * n + col] +=
              (double)ha[(size_t)i * m * k + r * k + t] * hb[(size_t)i * k * n + t * n + col];

  float *a, *b, *c;
  CUDA_CHECK(cudaMalloc(&a, na * 4));
  CUDA_CHECK(cudaMalloc(&b, nb * 4));
  CUDA_CHECK(cudaMalloc(&c, nc * 4));
  CUDA_CHECK(cudaMemcpy(a, ha.data(), na * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(b, hb.data(), nb * 4, cudaMemcpyHostToDevice));
  std::vector<const float*> pa(batch), pb(batch);
  std::vector<float*> pc(batch);
  for (int i = 0; i < batch; ++i) {
    pa[i] = a + (size_t)i * m * k;
    pb[i] = b + (size_t)i * k * n;
    pc[i] = c + (size_t)i * m * n;
  }
  const float **da, **db;
  float** dc;
  CUDA_CHECK(cudaMalloc(&da, batch * sizeof(float*)));
  CUDA_CHECK(cudaMalloc(&db, batch * sizeof(float*)));
  CUDA_CHECK(cudaMalloc(&dc, batch * sizeof(float*)));
  CUDA_CHECK(cudaMemcpy(da, pa.data(), batch * sizeof(float*), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(db, pb.data(), batch * sizeof(float*), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dc, pc.data(), batch * sizeof(float*), cudaMemcpyHostToDevice));
  if (gemm_init()) { std::fprintf(stderr, "cublasCreate failed\n"); return 1; }

  auto check_status = [](int s) { if (s) { std::fprintf(stderr, "cuBLAS status %d\n", s); std::exit(1); } };
  auto loop = [&] { check_status(gemm_loop(a, b, c, batch, m, n, k, 0)); };
  auto batched = [&] { check_status(gemm_batched(da, db, dc, batch, m, n, k, 0)); };
  auto strided = [&] { check_status(gemm_strided(a, b, c, batch, m, n, k, 0)); };

  std::printf("Batched GEMM demo: %d products of %dx%d @ %dx%d (fp32)\n\n", batch, m, k, k, n);
  bool ok = true;
  std::vector<float> got(nc);
  float times[3];
  int idx = 0;
  auto measure = [&](auto& fn) {
    CUDA_CHECK(cudaMemset(c, 0, nc * 4));
    fn();
    CUDA_CHECK(cudaMemcpy(got.data(), c, nc * 4, cudaMemcpyDeviceToHost));
    ok = ok && matches(got, ref);
    times[idx++] = time_ms(fn, 10, 200);
  };
  measure(loop);
  measure(batched);
  measure(strided);
  double gflop = 2.0 * batch * m * n * k / 1e9;
  std::printf("Individual GEMMs: %.4f ms  (%d cublasSgemm calls, %.1f TFLOP/s)\n", times[0], batch,
              gflop / times[0]);
  std::printf("Batched GEMM:     %.4f ms  (1 cublasSgemmBatched call, %.1f TFLOP/s)\n", times[1],
              gflop / times[1]);
  std::printf("Strided batched:  %.4f ms  (1 cublasSgemmStridedBatched call, %.1f TFLOP/s)\n", times[2],
              gflop / times[2]);
  std::printf("Speedup:          %.2fx (batched), %.2fx (strided batched)\n", times[0] / times[1],
              times[0] / times[2]);
  std::printf("%s\n", ok ? "All results match the CPU reference." : "MISMATCH against the CPU reference!");
  return ok ? 0 : 1;
}
#endif

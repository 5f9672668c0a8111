// Tensor cores through the wmma API (nvcuda::wmma, m16n16k16): a tiled f16 GEMM with f32
// accumulators, a bf16 one, and an f16-accumulator product stored column-major, checked against
// host references. Inputs are small multiples of 1/4, so every product and sum is exact in f32
// and the results must match bit for bit whatever order the hardware adds in.
#include <cstdio>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;

template <typename T>
__global__ void gemm(const T *a, const T *b, const float *c, float *d, int M, int N, int K) {
  int wm = blockIdx.y * 16, wn = blockIdx.x * 16;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(acc, c + wm * N + wn, N, wmma::mem_row_major);
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(fa, a + wm * K + k, K);
    wmma::load_matrix_sync(fb, b + wn * K + k, K);  // B column-major: column j at b + j*K
    wmma::mma_sync(acc, fa, fb, acc);
  }
  for (int i = 0; i < acc.num_elements; i++) acc.x[i] *= 2.0f;  // element-wise: any layout
  wmma::store_matrix_sync(d + wm * N + wn, acc, N, wmma::mem_row_major);
}

__global__ void half_acc(const half *a, const half *b, half *d) {  // one 16x16x16 tile, f16 accumulators
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::col_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, half> acc;
  wmma::fill_fragment(acc, __float2half(1.0f));
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_col_major);
}

static float value(int i, int m, float scale) { return (i % m) * 0.25f - scale; }

template <typename T, typename F>
static int run_gemm(const char *what, F to_t) {
  const int M = 32, N = 48, K = 64;
  T *a, *b;
  float *c, *d;
  cudaMallocManaged(&a, M * K * sizeof(T));
  cudaMallocManaged(&b, N * K * sizeof(T));
  cudaMallocManaged(&c, M * N * 4);
  cudaMallocManaged(&d, M * N * 4);
  for (int i = 0; i < M * K; i++) a[i] = to_t(value(i, 7, 0.5f));
  for (int i = 0; i < N * K; i++) b[i] = to_t(value(i, 5, 1.0f));
  for (int i = 0; i < M * N; i++) c[i] = value(i, 11, 1.25f);
  gemm<T><<<dim3(N / 16, M / 16), 32>>>(a, b, c, d, M, N, K);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    return 1;
  }
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float s = c[i * N + j];
      for (int k = 0; k < K; k++) s += value(i * K + k, 7, 0.5f) * value(j * K + k, 5, 1.0f);
      if (d[i * N + j] != 2 * s) {
        fprintf(stderr, "%s: d[%d][%d] = %g, expected %g\n", what, i, j, d[i * N + j], 2 * s);
        return 1;
      }
    }
  return 0;
}

int main() {
  int failed = run_gemm<half>("f16", [](float x) { return __float2half(x); });
  failed |= run_gemm<__nv_bfloat16>("bf16", [](float x) { return __float2bfloat16(x); });
  half *a, *b, *d;
  cudaMallocManaged(&a, 512);
  cudaMallocManaged(&b, 512);
  cudaMallocManaged(&d, 512);
  for (int i = 0; i < 256; i++) {
    a[i] = __float2half(value(i, 3, 0.25f));  // column-major: a[k*16 + i] is A[i][k]
    b[i] = __float2half(value(i, 9, 1.0f));   // row-major: b[k*16 + j] is B[k][j]
  }
  half_acc<<<1, 32>>>(a, b, d);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    fprintf(stderr, "half_acc: %s\n", cudaGetErrorString(e));
    failed = 1;
  }
  for (int i = 0; i < 16 && !failed; i++)
    for (int j = 0; j < 16; j++) {
      float s = 1.0f;
      for (int k = 0; k < 16; k++) s += value(k * 16 + i, 3, 0.25f) * value(k * 16 + j, 9, 1.0f);
      if (__half2float(d[j * 16 + i]) != s) {
        fprintf(stderr, "half_acc: d[%d][%d] = %g, expected %g\n", i, j, __half2float(d[j * 16 + i]), s);
        failed = 1;
        break;
      }
    }
  if (!failed) printf("tensor_cores: PASSED\n");
  return failed;
}

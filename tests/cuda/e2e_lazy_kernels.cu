// Lazy loading: one module of many kernels, of which the program launches one (argv[1], default
// 3). A __constant__ and a __device__ variable are written before any launch and read after it,
// so module variables must exist before any kernel is built.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__constant__ int bias;
__device__ int launched;

template <int N> __global__ void add(int *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += N + bias;
  if (i == 0) atomicAdd(&launched, 1);
}

typedef void (*Kernel)(int *, int);
static const Kernel kernels[] = {add<0>, add<1>, add<2>, add<3>, add<4>,  add<5>,
                                 add<6>, add<7>, add<8>, add<9>, add<10>, add<11>};
static const int count = sizeof kernels / sizeof kernels[0];

#define CHECK(call)                                                                     \
  do {                                                                                  \
    cudaError_t e = (call);                                                             \
    if (e != cudaSuccess) {                                                             \
      printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e));      \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

int main(int argc, char **argv) {
  int k = argc > 1 ? atoi(argv[1]) : 3;
  if (k < 0 || k >= count) return 2;
  const int n = 1000;
  int h_bias = 100, zero = 0, h[n], ran = 0;
  CHECK(cudaMemcpyToSymbol(bias, &h_bias, sizeof h_bias));
  CHECK(cudaMemcpyToSymbol(launched, &zero, sizeof zero));
  CHECK(cudaMemcpyFromSymbol(&ran, bias, sizeof ran));
  if (ran != 100) { printf("bias reads %d before any launch\n", ran); return 1; }
  int *d;
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  CHECK(cudaMemset(d, 0, n * sizeof(int)));
  kernels[k]<<<(n + 127) / 128, 128>>>(d, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpyFromSymbol(&ran, launched, sizeof ran));
  for (int i = 0; i < n; i++)
    if (h[i] != k + 100) { printf("h[%d] = %d, expected %d\n", i, h[i], k + 100); return 1; }
  if (ran != 1) { printf("launched = %d\n", ran); return 1; }
  printf("lazy_kernels %d: PASSED\n", k);
  return 0;
}

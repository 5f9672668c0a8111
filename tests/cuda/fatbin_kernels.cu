// Kernels for the fatbin extraction tests: built into executables (with -DFATBIN_MAIN) and
// shared libraries under every compression mode, and compared with `nvcc -ptx`.
#include <cuda_runtime.h>

__device__ float fatbin_scale = 2.0f;

__device__ float fatbin_poly(float x) { return x * x * fatbin_scale + 1.0f; }

__global__ void fatbin_saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + fatbin_poly(y[i]);
}

__global__ void fatbin_reduce(const int* in, int* out, int n) {
    __shared__ int partial[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = i < n ? in[i] : 0;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

extern "C" int fatbin_kernels_launch(float* x, float* y, int n) {
    fatbin_saxpy<<<(n + 255) / 256, 256>>>(3.0f, x, y, n);
    return (int)cudaGetLastError();
}

#ifdef FATBIN_MAIN
int main() { return 0; }
#endif

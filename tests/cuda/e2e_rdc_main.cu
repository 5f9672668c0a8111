// A two-file -rdc=true program: this kernel calls a __device__ function and reads a
// __device__ variable defined in e2e_rdc_lib.cu, so the driver links the two modules.
#include <cstdio>
#include <cuda_runtime.h>

static int failures = 0;
#define EXPECT(cond)                                                                                   \
    do {                                                                                               \
        if (!(cond) && failures++ < 10) fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); \
    } while (0)
#define OK(call) EXPECT((call) == cudaSuccess)

extern __device__ int rdc_scale;
extern __device__ unsigned long long rdc_calls;
__device__ int rdc_transform(int x);
__global__ void rdc_set_scale(int scale);

__global__ void apply(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = rdc_transform(in[i]) + rdc_scale;
}

int main() {
    const int n = 1000;
    int h[n], back[n];
    for (int i = 0; i < n; i++) h[i] = i - 300;
    int *din, *dout;
    OK(cudaMalloc(&din, n * sizeof(int)));
    OK(cudaMalloc(&dout, n * sizeof(int)));
    OK(cudaMemcpy(din, h, sizeof h, cudaMemcpyHostToDevice));
    apply<<<(n + 255) / 256, 256>>>(din, dout, n);
    OK(cudaMemcpy(back, dout, sizeof back, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT(back[i] == h[i] * 3 + 1 + 3);
    rdc_set_scale<<<1, 1>>>(-2);
    apply<<<(n + 127) / 128, 128>>>(din, dout, n);
    OK(cudaMemcpy(back, dout, sizeof back, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT(back[i] == h[i] * -2 + 1 - 2);
    unsigned long long calls = 0;
    OK(cudaMemcpyFromSymbol(&calls, rdc_calls, sizeof calls));
    EXPECT(calls == 2 * n);
    int scale = 0;
    OK(cudaMemcpyFromSymbol(&scale, rdc_scale, sizeof scale));
    EXPECT(scale == -2);
    OK(cudaFree(din));
    OK(cudaFree(dout));
    printf("rdc: %s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}

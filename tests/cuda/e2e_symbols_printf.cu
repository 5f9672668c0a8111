// Module symbols (__constant__ and __device__ data, initialized and not) through
// cudaMemcpyToSymbol/FromSymbol/GetSymbolAddress/GetSymbolSize; device printf (the test
// checks the exact text and order); recursive device functions.
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

static int failures = 0;
#define EXPECT(cond)                                                                                   \
    do {                                                                                               \
        if (!(cond) && failures++ < 10) fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); \
    } while (0)
#define OK(call) EXPECT((call) == cudaSuccess)

__constant__ float coeffs[8];
__constant__ int bias = 5;
__device__ int table[6] = {3, 1, 4, 1, 5, 9};
__device__ unsigned long long counter;

// y = bias + table[i % 6] + sum_k coeffs[k] * x^k, counting calls in `counter`
__global__ void poly(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0;
    for (int k = 7; k >= 0; k--) acc = acc * x[i] + coeffs[k];
    y[i] = acc + bias + table[i % 6];
    atomicAdd(&counter, 1ull);
}

__global__ void bump_table(int delta) { table[threadIdx.x] += delta; }

__global__ void say(int launch, const char* word) {
    printf("launch %d thread %d: %s %5.2f %x %lld %c\n", launch, threadIdx.x, word, threadIdx.x * 1.25,
           255 + threadIdx.x, -1234567890123ll * (threadIdx.x + 1), 'a' + threadIdx.x);
    if (threadIdx.x == 0) printf("launch %d second line of thread 0\n", launch);
}

__device__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

__device__ unsigned long long ackermann_like(unsigned depth, unsigned long long acc) {
    // deep, non-tail recursion with live values across the call
    if (depth == 0) return acc;
    unsigned long long below = ackermann_like(depth - 1, acc * 3 + depth);
    return below ^ (acc << (depth % 7));
}

__global__ void recursion(int* fibs, unsigned long long* deep) {
    int t = threadIdx.x;
    fibs[t] = fib(t);
    deep[t] = ackermann_like(40 + t, t);
}

static unsigned long long ackermann_like_host(unsigned depth, unsigned long long acc) {
    if (depth == 0) return acc;
    unsigned long long below = ackermann_like_host(depth - 1, acc * 3 + depth);
    return below ^ (acc << (depth % 7));
}

int main() {
    // symbols
    float c[8] = {1.0f, -0.5f, 0.25f, 0, 0, 0, 0, 0};
    OK(cudaMemcpyToSymbol(coeffs, c, sizeof c));
    float tail[2] = {0.125f, -0.0625f};
    OK(cudaMemcpyToSymbol(coeffs, tail, sizeof tail, 3 * sizeof(float)));  // coeffs[3..4]
    c[3] = tail[0];
    c[4] = tail[1];
    float back[8];
    OK(cudaMemcpyFromSymbol(back, coeffs, sizeof back));
    for (int k = 0; k < 8; k++) EXPECT(back[k] == c[k]);
    size_t size = 0;
    OK(cudaGetSymbolSize(&size, table));
    EXPECT(size == 6 * sizeof(int));
    int* table_ptr = nullptr;
    OK(cudaGetSymbolAddress((void**)&table_ptr, table));
    int initial[6];
    OK(cudaMemcpy(initial, table_ptr, sizeof initial, cudaMemcpyDeviceToHost));
    EXPECT(initial[0] == 3 && initial[2] == 4 && initial[5] == 9);
    int b = 0;
    OK(cudaMemcpyFromSymbol(&b, bias, sizeof b));
    EXPECT(b == 5);
    EXPECT(cudaMemcpyToSymbol(coeffs, c, sizeof c + 4) == cudaErrorInvalidValue);  // past the symbol
    EXPECT(cudaMemcpyToSymbol(coeffs, c, 8, 7 * sizeof(float)) == cudaErrorInvalidValue);
    EXPECT(cudaGetLastError() == cudaErrorInvalidValue);  // non-sticky: cleared by reading it

    const int n = 1000;
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; i++) x[i] = (i % 17) * 0.25f - 2.0f;
    float *dx, *dy;
    OK(cudaMalloc(&dx, n * sizeof(float)));
    OK(cudaMalloc(&dy, n * sizeof(float)));
    OK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    bump_table<<<1, 6>>>(10);
    poly<<<(n + 127) / 128, 128>>>(dx, dy, n);
    poly<<<(n + 255) / 256, 256>>>(dx, dy, n);
    OK(cudaGetLastError());
    OK(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    int hosttable[6] = {3, 1, 4, 1, 5, 9};
    for (int i = 0; i < n; i++) {
        float acc = 0;
        for (int k = 7; k >= 0; k--) acc = acc * x[i] + c[k];
        EXPECT(y[i] == acc + 5 + hosttable[i % 6] + 10);
    }
    unsigned long long calls = 0;
    OK(cudaMemcpyFromSymbol(&calls, counter, sizeof calls));
    EXPECT(calls == 2 * n);

    // recursion
    const int rt = 20;
    int* dfib;
    unsigned long long* ddeep;
    OK(cudaDeviceSetLimit(cudaLimitStackSize, 16384));
    OK(cudaMalloc(&dfib, rt * sizeof(int)));
    OK(cudaMalloc(&ddeep, rt * sizeof(unsigned long long)));
    recursion<<<1, rt>>>(dfib, ddeep);
    OK(cudaGetLastError());
    int fibs[rt];
    unsigned long long deep[rt];
    OK(cudaMemcpy(fibs, dfib, sizeof fibs, cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(deep, ddeep, sizeof deep, cudaMemcpyDeviceToHost));
    int f0 = 0, f1 = 1;
    for (int t = 0; t < rt; t++) {
        EXPECT(fibs[t] == f0);
        int next = f0 + f1;
        f0 = f1;
        f1 = next;
        EXPECT(deep[t] == ackermann_like_host(40 + t, t));
    }

    // printf: each launch's output is complete at the synchronization, in launch order
    char* word;
    OK(cudaMalloc(&word, 8));
    OK(cudaMemcpy(word, "gpu", 4, cudaMemcpyHostToDevice));
    printf("host before\n");
    fflush(stdout);
    say<<<1, 3>>>(1, word);
    OK(cudaDeviceSynchronize());
    printf("host between\n");
    fflush(stdout);
    say<<<1, 1>>>(2, word);
    OK(cudaDeviceSynchronize());

    for (void* p : {(void*)dx, (void*)dy, (void*)dfib, (void*)ddeep, (void*)word}) OK(cudaFree(p));
    printf("symbols printf recursion: %s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}

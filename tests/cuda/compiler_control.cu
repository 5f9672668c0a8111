// Divergence and calls for the CPU target's compiler tests.
#include <cstdio>

// Per-lane trip counts: collatz steps, with an early exit for negative input.
__global__ void collatz(const int* in, int* steps, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long x = in[i];
    if (x <= 0) { steps[i] = -1; return; }
    int s = 0;
    while (x != 1) {
        x = (x & 1) ? 3 * x + 1 : x / 2;
        s++;
    }
    steps[i] = s;
}

// if / else if / else with a value computed in every branch.
__global__ void branches(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = in[i];
        int r;
        if (v % 3 == 0) r = v * 2;
        else if (v % 3 == 1) r = -v;
        else r = v + 100;
        out[i] = r;
    }
}

__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

__device__ __noinline__ int sum_local(int n) {
    int buf[16];
    for (int k = 0; k < 16; k++) buf[k] = k * n;
    int s = 0;
    for (int k = 0; k < 16; k += (n % 3) + 1) s += buf[k];
    return s;
}

__global__ void calls(int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fib(i % 12) * 1000 + sum_local(i);
}

__global__ void hello(int n) {
    int i = threadIdx.x;
    if (i < n) printf("hello from thread %d of block %d: %f %s\n", i, blockIdx.x, i * 0.5, "ok");
}

__global__ void failing_assert(const int* in) {
    assert(in[threadIdx.x] >= 0);
}

__global__ void trapping(int when) {
    if (threadIdx.x == when) __trap();
}

typedef int (*unary_t)(int);
__device__ __noinline__ int twice(int x) { return 2 * x; }
__device__ __noinline__ int square(int x) { return x * x; }
__device__ __noinline__ int negate(int x) { return -x; }
__device__ unary_t table[3] = {twice, square, negate};
__device__ int counter_init[4] = {5, 6, 7, 8};
__device__ int* counter_ptr = counter_init;  // an address initializer

// Indirect calls through a table of function pointers; lanes of one warp call different targets.
__global__ void indirect(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = table[i % 3](in[i]) + counter_ptr[2];
}

// Recursion whose frames live in .local memory: overflows the default 1 KiB per-thread stack.
__device__ __noinline__ int deep(int d) {
    volatile int buf[16];
    for (int k = 0; k < 16; k++) buf[k] = d + k;
    return d == 0 ? buf[3] : deep(d - 1) + buf[d & 15];
}

__global__ void recurse(int* out, int depth) { out[threadIdx.x] = deep(depth + threadIdx.x % 4); }

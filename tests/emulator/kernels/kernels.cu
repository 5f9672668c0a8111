// Kernels the emulator tests run (tests/emulator/test_emulator.py). kernels.ptx is
// `nvcc -ptx -arch=sm_80 kernels.cu -o kernels.ptx`, checked in so the tests need no nvcc.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

// if/else divergence inside a wave
extern "C" __global__ void diverge(const int* x, int* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = x[i];
    if (v & 1) y[i] = v * 3 + 1;
    else y[i] = v >> 1;
}

// a loop whose trip count differs per lane (Collatz steps)
extern "C" __global__ void collatz(const unsigned* x, unsigned* steps, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned v = x[i], s = 0;
    while (v != 1) { v = (v & 1) ? 3 * v + 1 : v / 2; s++; }
    steps[i] = s;
}

// shared memory across the waves of a block: reverse the block's elements
extern "C" __global__ void block_reverse(const int* x, int* y) {
    __shared__ int tile[256];
    int t = threadIdx.x, base = blockIdx.x * blockDim.x;
    tile[t] = x[base + t];
    __syncthreads();
    y[base + t] = tile[blockDim.x - 1 - t];
}

// tree reduction in shared memory: one barrier per level
extern "C" __global__ void block_sum(const float* x, float* out) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

// warp shuffles and votes
extern "C" __global__ void warp_ops(const int* x, int* shfl_down, int* xor_sum, unsigned* ballot) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = x[i];
    shfl_down[i] = __shfl_down_sync(0xffffffffu, v, 1);
    int s = v;
    for (int m = 16; m > 0; m >>= 1) s += __shfl_xor_sync(0xffffffffu, s, m);
    xor_sum[i] = s;
    ballot[i] = __ballot_sync(0xffffffffu, v > 0);
}

// a global atomic: histogram
extern "C" __global__ void histogram(const int* x, unsigned* bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[x[i]], 1u);
}

// a per-thread array indexed by data: lives in scratch
extern "C" __global__ void local_array(const int* a, int* c) {
    int buf[16];
    int i = threadIdx.x;
    for (int k = 0; k < 16; k++) buf[k] = a[i] + k;
    c[i] = buf[a[i] & 15];
}

// Several kernels with large __shared__ arrays in one module (nvcc hoists them all to
// module-scope .shared), a non-inlined helper with its own __shared__ array called from two
// of them, and a kernel with dynamic shared memory.
#define N_A 10240  // 40 KB of float
#define N_B 5120   // 40 KB of double

__device__ __noinline__ int helper(int v) {
    __shared__ int scratch[256];
    scratch[threadIdx.x] = v * 3;
    return scratch[threadIdx.x] + 1;
}

// out[j] = 2*in[N_A-1-j] for j < N_A; then out[N_A + t] = helper(t) = 3t + 1
extern "C" __global__ void kernel_a(const float* in, float* out) {
    __shared__ float a[N_A];
    for (int j = threadIdx.x; j < N_A; j += blockDim.x) a[j] = 2.0f * in[j];
    __syncthreads();
    int h = helper(threadIdx.x);  // writes the helper's array while a[] is live
    __syncthreads();
    for (int j = threadIdx.x; j < N_A; j += blockDim.x) out[j] = a[N_A - 1 - j];
    out[N_A + threadIdx.x] = (float)h;
}

// out[j] = in[N_B-1-j] + 0.5 for j < N_B; then out[N_B + t] = helper(t + 1000)
extern "C" __global__ void kernel_b(const double* in, double* out) {
    __shared__ double b[N_B];
    for (int j = threadIdx.x; j < N_B; j += blockDim.x) b[j] = in[j] + 0.5;
    __syncthreads();
    int h = helper(threadIdx.x + 1000);
    __syncthreads();
    for (int j = threadIdx.x; j < N_B; j += blockDim.x) out[j] = b[N_B - 1 - j];
    out[N_B + threadIdx.x] = (double)h;
}

// out[t] = in[t] * 10 + tag[t % 4], through dynamic shared memory of blockDim.x ints
extern "C" __global__ void kernel_dyn(const int* in, int* out) {
    extern __shared__ int dyn[];
    __shared__ int tag[4];
    if (threadIdx.x < 4) tag[threadIdx.x] = 100 * (threadIdx.x + 1);
    dyn[threadIdx.x] = in[threadIdx.x] * 10;
    __syncthreads();
    out[threadIdx.x] = dyn[blockDim.x - 1 - threadIdx.x] + tag[threadIdx.x % 4];
}

// Shared memory, barriers, atomics and warp collectives for the CPU target's compiler tests.

__global__ void block_sum(const float* in, float* out, int n) {
    __shared__ float s[256];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

// Dynamic shared memory: reverse a block's slice.
__global__ void reverse_dyn(int* data) {
    extern __shared__ int buf[];
    int t = threadIdx.x;
    int base = blockIdx.x * blockDim.x;
    buf[t] = data[base + t];
    __syncthreads();
    data[base + t] = buf[blockDim.x - 1 - t];
}

__global__ void atomics(const int* in, int* counters, float* fsum, unsigned* wrap, int n) {
    __shared__ int local_max;
    if (threadIdx.x == 0) local_max = -2147483647 - 1;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = in[i];
        atomicAdd(&counters[0], v);
        atomicMax(&local_max, v);
        atomicAdd(fsum, 1.0f);
        atomicInc(wrap, 9u);
        atomicCAS(&counters[2], 0, i + 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) atomicMax(&counters[1], local_max);
}

__global__ void warp_ops(const int* in, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    int s = v;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffff, s, o);
    int x = __shfl_xor_sync(0xffffffff, v, 5);
    int idx = __shfl_sync(0xffffffff, v, (threadIdx.x * 7) & 31);
    unsigned ballot = __ballot_sync(0xffffffff, v & 1);
    int any = __any_sync(0xffffffff, v > 90);
    int all = __all_sync(0xffffffff, v >= 0);
    out[i * 6 + 0] = s;
    out[i * 6 + 1] = x;
    out[i * 6 + 2] = idx;
    out[i * 6 + 3] = (int)ballot;
    out[i * 6 + 4] = any;
    out[i * 6 + 5] = all;
}

// A divergent shuffle: only the even lanes take part; partial member mask.
__global__ void warp_partial(const int* in, int* out) {
    int t = threadIdx.x;
    int v = in[t];
    int r = -1;
    if ((t & 1) == 0) {
        unsigned m = __activemask();
        r = __shfl_sync(0x55555555, v, (t + 2) & 31) + (int)(m == 0x55555555u) * 1000;
    }
    out[t] = r;
}

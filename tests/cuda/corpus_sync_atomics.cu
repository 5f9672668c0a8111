// PTX front-end corpus: barriers, static and dynamic shared memory, every atomic,
// warp shuffles, vote, match, printf, recursion, function pointers and templates.
// Compiled to PTX at test time; never run.
#include <cstdio>

__device__ int g_counter;
__device__ unsigned long long g_big;
__device__ float g_f;
__device__ double g_d;
__constant__ float c_table[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
__device__ int g_array[4][8];

__global__ void block_reduce(const float* in, float* out, int n) {
    __shared__ float tile[256];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    tile[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) tile[t] += tile[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = tile[0];
}

__global__ void dynamic_shared(int* data) {
    extern __shared__ int dyn[];
    dyn[threadIdx.x] = data[threadIdx.x];
    __syncthreads();
    int v = __syncthreads_count(dyn[threadIdx.x] > 0) + __syncthreads_and(dyn[0]) + __syncthreads_or(dyn[1]);
    data[threadIdx.x] = dyn[blockDim.x - 1 - threadIdx.x] + v;
    __threadfence();
    __threadfence_block();
    __threadfence_system();
}

__global__ void all_atomics(int* pi, unsigned* pu, unsigned long long* pl, float* pf, double* pd) {
    int x = threadIdx.x;
    atomicAdd(pi, x); atomicSub(pi, x); atomicExch(pi, x); atomicMin(pi, x); atomicMax(pi, x);
    atomicAnd(pi, x); atomicOr(pi, x); atomicXor(pi, x); atomicCAS(pi, x, x + 1);
    atomicInc(pu, 17u); atomicDec(pu, 17u); atomicMin(pu, (unsigned)x); atomicMax(pu, (unsigned)x);
    atomicAdd(pl, 1ull); atomicExch(pl, 2ull); atomicCAS(pl, 1ull, 3ull); atomicMin(pl, 5ull);
    atomicMax(pl, 6ull); atomicAnd(pl, 7ull); atomicOr(pl, 8ull); atomicXor(pl, 9ull);
    atomicMin((long long*)pl, -5ll); atomicMax((long long*)pl, -6ll);
    atomicAdd(pf, 1.5f); atomicExch(pf, 2.5f); atomicAdd(pd, 3.5);
    atomicAdd_block(pi, 1); atomicAdd_system(pi, 2); atomicCAS_block(pi, 1, 2);
    atomicAdd(&g_counter, 1); atomicAdd(&g_big, 1ull); atomicAdd(&g_f, 1.0f); atomicAdd(&g_d, 1.0);
    __shared__ int sh;
    if (x == 0) sh = 0;
    __syncthreads();
    atomicAdd(&sh, 1); atomicCAS(&sh, 0, 1);
    __syncthreads();
    if (x == 0) atomicAdd(pi, sh);
    pi[1] = atomicAdd(pi, 0) + (int)atomicExch(pu, 1u);
}

__global__ void warp_ops(int* out, float* fout, double* dout) {
    int lane = threadIdx.x & 31;
    int v = out[threadIdx.x];
    float f = fout[threadIdx.x];
    double d = dout[threadIdx.x];
    unsigned mask = __activemask();
    v += __shfl_sync(mask, v, 3);
    v += __shfl_up_sync(mask, v, 1);
    v += __shfl_down_sync(mask, v, 2, 16);
    v += __shfl_xor_sync(mask, v, 4);
    f += __shfl_xor_sync(0xffffffff, f, 1);
    d += __shfl_down_sync(0xffffffff, d, 1);
    unsigned b = __ballot_sync(mask, v > 0);
    int a = __all_sync(mask, v > 1) + __any_sync(mask, v > 2) + __uni_sync(mask, v);
    unsigned m1 = __match_any_sync(mask, v);
    int pred;
    unsigned m2 = __match_all_sync(mask, (long long)v, &pred);
#if __CUDA_ARCH__ >= 800
    unsigned r = __reduce_add_sync(mask, (unsigned)v) + __reduce_min_sync(mask, (unsigned)v) + __reduce_max_sync(mask, v)
               + __reduce_and_sync(mask, (unsigned)v) + __reduce_or_sync(mask, (unsigned)v) + __reduce_xor_sync(mask, (unsigned)v);
#else
    unsigned r = 0;
#endif
    __syncwarp(mask);
    out[threadIdx.x] = v + b + a + m1 + m2 + pred + lane + r + __popc(b) + __ffs(v) + __clz(v);
    fout[threadIdx.x] = f;
    dout[threadIdx.x] = d;
}

__device__ __noinline__ int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }
__device__ __noinline__ float twice(float x) { return 2.0f * x; }
__device__ __noinline__ float square(float x) { return x * x; }
typedef float (*unary_fn)(float);
__device__ unary_fn g_table[2] = {twice, square};

__global__ void calls_and_printf(float* out, int which, int n) {
    unary_fn fn = g_table[which & 1];
    out[threadIdx.x] = fn(out[threadIdx.x]) + fact(n) + c_table[threadIdx.x & 15] + g_array[1][threadIdx.x & 7];
    if (threadIdx.x == 0) printf("block %d: n=%d fact=%d f=%f d=%g s=%s\n", blockIdx.x, n, fact(n), out[0], 2.5, "str");
}

template <typename T, int N>
__global__ void templated(T* data) {
    T acc = T(0);
#pragma unroll
    for (int i = 0; i < N; i++) acc += data[threadIdx.x * N + i];
    data[threadIdx.x] = acc;
}
template __global__ void templated<int, 4>(int*);
template __global__ void templated<double, 3>(double*);
template __global__ void templated<unsigned char, 8>(unsigned char*);
template __global__ void templated<short, 2>(short*);

__global__ void __launch_bounds__(128, 4) bounded(float4* v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float4 x = v[i]; v[i] = make_float4(x.w, x.z, x.y, x.x); }
}

__global__ void local_array(int* out, int k) {
    int local[32];
    for (int i = 0; i < 32; i++) local[i] = out[i] * k;
    out[threadIdx.x] = local[(threadIdx.x * 7 + k) & 31];
    if (k < 0) __trap();
    if (k == 7) asm volatile("exit;");
    __nanosleep(100);
    unsigned lt; asm volatile("mov.u32 %0, %%lanemask_lt;" : "=r"(lt)); out[1] = lt;
    unsigned long long gt; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt)); out[2] = (int)gt;
    out[0] += (int)clock() + (int)clock64();
}

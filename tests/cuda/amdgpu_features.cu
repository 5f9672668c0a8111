// Device features the AMDGPU target lowers specially: printf, assert, dynamic shared memory,
// warp collectives, block barriers, atomics and module globals looked up by name.
#include <cassert>
#include <cstdio>

__device__ int g_counter;
__constant__ float c_scale[4] = {1.0f, 2.0f, 3.0f, 4.0f};

__global__ void features_printf(int n) {
    printf("thread %d of %d: %f %s\n", threadIdx.x, n, 1.5, "ok");
}

__global__ void features_assert(const int* in) {
    assert(in[threadIdx.x] >= 0);
}

__global__ void features_dynamic_shared(const float* in, float* out) {
    extern __shared__ float buf[];
    buf[threadIdx.x] = in[threadIdx.x] * c_scale[threadIdx.x & 3];
    __syncthreads();
    out[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

__global__ void features_warp(const int* in, int* out) {
    int v = in[threadIdx.x];
    int s = v;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    unsigned b = __ballot_sync(0xffffffff, v & 1);
    int up = __shfl_up_sync(0xffffffff, v, 3, 16);
    out[threadIdx.x] = s + (int)b + up + __any_sync(__activemask(), v > 7) + __syncthreads_count(v > 2);
}

__global__ void features_atomics(float* f, unsigned* u) {
    atomicAdd(f, 1.0f);
    atomicCAS(u, 0u, threadIdx.x);
    atomicMax(u + 1, threadIdx.x);
    atomicAdd(&g_counter, 1);
    __shared__ int s;
    if (threadIdx.x == 0) s = 0;
    __syncthreads();
    atomicAdd(&s, 1);
    __syncthreads();
    if (threadIdx.x == 0) u[2] = s;
}

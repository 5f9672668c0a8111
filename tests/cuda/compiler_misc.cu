// Special registers, module globals, generic addressing of .local/.shared, and -rdc linking.

__device__ int scale_factor = 3;            // module global, read and written by the host
__constant__ float coeffs[4] = {1.5f, -2.0f, 0.25f, 8.0f};

__global__ void ids(unsigned* out) {
    unsigned t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    unsigned b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    unsigned* o = out + (b * blockDim.x * blockDim.y * blockDim.z + t) * 8;
    unsigned lane, warp;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    asm("mov.u32 %0, %%warpid;" : "=r"(warp));
    o[0] = threadIdx.x; o[1] = threadIdx.y; o[2] = threadIdx.z;
    o[3] = blockIdx.x; o[4] = blockIdx.y; o[5] = blockIdx.z;
    o[6] = lane; o[7] = gridDim.x * 1000000 + blockDim.z * 10000 + blockDim.y * 100 + blockDim.x;
}

__device__ __noinline__ int pick(const int* p, int k) { return p[k]; }

__global__ void spaces(const int* in, int* out, float* fout) {
    __shared__ int sh[64];
    int t = threadIdx.x;
    int loc[8];
    for (int k = 0; k < 8; k++) loc[k] = in[t] * (k + 1);
    sh[t] = in[t] + 1;
    int factor = scale_factor;  // every read happens before the barrier, the write after it
    __syncthreads();
    const int* which = (t & 1) ? sh : loc;   // a generic pointer into .shared or .local
    out[t * 3 + 0] = pick(which, (t & 1) ? (t ^ 1) : (t & 7));
    out[t * 3 + 1] = __isShared(which) * 2 + __isLocal(which);
    out[t * 3 + 2] = factor * t;
    fout[t] = coeffs[t & 3] * t;
    if (t == 0) scale_factor += 1;
}

// Barrier-heavy kernels for bench/compile.py: a shared-memory reduction and a tiled matmul,
// the shapes that compile slowest on the CPU target (resume points at every __syncthreads).
#define BLOCK 256
#define TILE 16

// Two elements per thread, tree reduction in shared memory, unrolled last warp (as in the
// CUDA samples' reduce kernels), then one atomic per block.
__global__ void shared_reduce(const float* in, float* out, unsigned n) {
    __shared__ float s[BLOCK];
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * (BLOCK * 2) + t;
    float v = 0.0f;
    while (i < n) {
        v += in[i];
        if (i + BLOCK < n) v += in[i + BLOCK];
        i += gridDim.x * BLOCK * 2;
    }
    s[t] = v;
    __syncthreads();
    for (unsigned stride = BLOCK / 2; stride > 32; stride >>= 1) {
        if (t < stride) s[t] = v = v + s[t + stride];
        __syncthreads();
    }
    if (t < 32) {
        volatile float* w = s;
        w[t] = v = v + w[t + 32];
        w[t] = v = v + w[t + 16];
        w[t] = v = v + w[t + 8];
        w[t] = v = v + w[t + 4];
        w[t] = v = v + w[t + 2];
        w[t] = v = v + w[t + 1];
    }
    if (t == 0) atomicAdd(out, v);
}

// C = A * B, n x n, TILE x TILE tiles through shared memory; handles ragged edges.
__global__ void tiled_matmul(const float* a, const float* b, float* c, int n) {
    __shared__ float sa[TILE][TILE];
    __shared__ float sb[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < n; k0 += TILE) {
        sa[ty][tx] = row < n && k0 + tx < n ? a[row * n + k0 + tx] : 0.0f;
        sb[ty][tx] = col < n && k0 + ty < n ? b[(k0 + ty) * n + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; k++) acc += sa[ty][k] * sb[k][tx];
        __syncthreads();
    }
    if (row < n && col < n) c[row * n + col] = acc;
}

// bench/kernels.py's OpenCL side: bench/cuda/suite.cu's kernels in OpenCL C, line for line.
#define TILE 16

__kernel void saxpy(int n, float a, __global const float* x, __global float* y) {
    int i = get_global_id(0);
    if (i < n) y[i] = a * x[i] + y[i];
}

__kernel void saxpy_grid(int n, float a, __global const float* x, __global float* y) {
    for (int i = get_global_id(0); i < n; i += get_global_size(0)) y[i] = a * x[i] + y[i];
}

__kernel void sgemm(int n, __global const float* a, __global const float* b, __global float* c) {
    __local float sa[TILE][TILE], sb[TILE][TILE];
    int tx = get_local_id(0), ty = get_local_id(1);
    int row = get_group_id(1) * TILE + ty, col = get_group_id(0) * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < n; k0 += TILE) {
        sa[ty][tx] = a[row * n + k0 + tx];
        sb[ty][tx] = b[(k0 + ty) * n + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TILE; k++) acc += sa[ty][k] * sb[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    c[row * n + col] = acc;
}

__kernel void block_reduce(int n, __global const float* in, __global float* out) {
    __local float s[256];
    int t = get_local_id(0), i = get_global_id(0);
    s[t] = i < n ? in[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int stride = get_local_size(0) / 2; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) out[get_group_id(0)] = s[0];
}

// OpenCL 1.2/2.0 has no shuffle, and POCL 3.1's CPU device lacks cl_khr_subgroups: the CUDA
// kernel's five __shfl_down_sync steps become the same steps through local memory, each after a
// barrier (what an OpenCL programmer writes for a per-32-lane reduction).
__kernel void warp_reduce(int n, __global const float* in, __global float* out) {
    __local float s[256];
    int t = get_local_id(0), i = get_global_id(0);
    float v = i < n ? in[i] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) {
        s[t] = v;
        barrier(CLK_LOCAL_MEM_FENCE);
        if ((t & 31) + o < 32) v += s[t + o];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if ((t & 31) == 0) out[i >> 5] = v;
}

__kernel void stencil(int w, __global const float* in, __global float* out) {
    int x = get_global_id(0), y = get_global_id(1);
    int i = y * w + x;
    if (x == 0 || y == 0 || x == w - 1 || y == w - 1) out[i] = in[i];
    else out[i] = 0.2f * (in[i] + in[i - 1] + in[i + 1] + in[i - w] + in[i + w]);
}

__kernel void histogram(int n, __global const uint* in, __global uint* bins) {
    __local uint s[256];
    int t = get_local_id(0);
    s[t] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    int stride = get_global_size(0);
    for (int i = get_global_id(0); i < n; i += stride) atomic_inc(&s[in[i] & 255u]);
    barrier(CLK_LOCAL_MEM_FENCE);
    atomic_add(&bins[t], s[t]);
}

__kernel void nbody(int n, __global const float4* pos, __global float4* acc) {
    int i = get_global_id(0);
    float4 p = pos[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int j = 0; j < n; j++) {
        float4 q = pos[j];
        float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
        float d2 = dx * dx + dy * dy + dz * dz + 0.01f;
        float inv = 1.0f / sqrt(d2);
        float s = q.w * inv * inv * inv;
        ax += dx * s; ay += dy * s; az += dz * s;
    }
    acc[i] = (float4)(ax, ay, az, 0.0f);
}

__kernel void scan(int n, __global const float* in, __global float* out) {
    __local float s[2][256];
    int t = get_local_id(0), i = get_global_id(0), cur = 0;
    s[0][t] = i < n ? in[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int d = 1; d < 256; d <<= 1) {
        s[cur ^ 1][t] = t >= d ? s[cur][t] + s[cur][t - d] : s[cur][t];
        cur ^= 1;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i < n) out[i] = s[cur][t];
}

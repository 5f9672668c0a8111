// bench/kernels.py's CUDA side: the suite's kernels and a host that times them through cudart
// (so under `zluda run` every call takes the real driver path).
//   suite REPS KERNEL:SIZE ...   prints "KERNEL BEST_SECONDS CHECKSUM" per kernel
//   suite REPS launch:COUNT      prints "launch SECONDS_PER_EMPTY_LAUNCH 0"
//   suite REPS memcpy:BYTES      prints "h2d|d2h|d2d|memcpy BEST_SECONDS BYTES"
// Inputs follow bench/suite_inputs (the same formulas in the OpenCL and C versions), and the
// first launch, not timed, gives the checksum (sum of |value| * (index % 7 + 1): no cancellation,
// so results that differ in rounding, e.g. by FMA contraction, still agree closely); later
// launches only repeat the work.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

static float in_f(unsigned i) { return (float)((i * 37u) % 101u) * 0.01f - 0.5f; }
static float in_g(unsigned i) { return (float)((int)((i * 37u) % 17u) - 8); }
static unsigned in_h(unsigned i) { return (i * 2654435761u) >> 8; }

__global__ void saxpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// saxpy as CuPy's elementwise kernels and most real code write it: a grid-stride loop over a
// grid of at most GRID_STRIDE_BLOCKS blocks
#define GRID_STRIDE_BLOCKS 1024
__global__ void saxpy_grid(int n, float a, const float* x, float* y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}

#define TILE 16
__global__ void sgemm(int n, const float* a, const float* b, float* c) {
    __shared__ float sa[TILE][TILE], sb[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < n; k0 += TILE) {
        sa[ty][tx] = a[row * n + k0 + tx];
        sb[ty][tx] = b[(k0 + ty) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; k++) acc += sa[ty][k] * sb[k][tx];
        __syncthreads();
    }
    c[row * n + col] = acc;
}

__global__ void block_reduce(int n, const float* in, float* out) {
    __shared__ float s[256];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

__global__ void warp_reduce(int n, const float* in, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? in[i] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) out[i >> 5] = v;
}

__global__ void stencil(int w, const float* in, float* out) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    int i = y * w + x;
    if (x == 0 || y == 0 || x == w - 1 || y == w - 1) out[i] = in[i];
    else out[i] = 0.2f * (in[i] + in[i - 1] + in[i + 1] + in[i - w] + in[i + w]);
}

#define HIST_ITEMS 16
__global__ void histogram(int n, const unsigned* in, unsigned* bins) {
    __shared__ unsigned s[256];
    s[threadIdx.x] = 0;
    __syncthreads();
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) atomicAdd(&s[in[i] & 255u], 1u);
    __syncthreads();
    atomicAdd(&bins[threadIdx.x], s[threadIdx.x]);
}

__global__ void nbody(int n, const float4* pos, float4* acc) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 p = pos[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int j = 0; j < n; j++) {
        float4 q = pos[j];
        float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
        float d2 = dx * dx + dy * dy + dz * dz + 0.01f;
        float inv = 1.0f / sqrtf(d2);
        float s = q.w * inv * inv * inv;
        ax += dx * s; ay += dy * s; az += dz * s;
    }
    acc[i] = make_float4(ax, ay, az, 0.0f);
}

// Inclusive scan of each block's 256 elements (Hillis-Steele, double-buffered in shared memory).
__global__ void scan(int n, const float* in, float* out) {
    __shared__ float s[2][256];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t, cur = 0;
    s[0][t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int d = 1; d < 256; d <<= 1) {
        s[cur ^ 1][t] = t >= d ? s[cur][t] + s[cur][t - d] : s[cur][t];
        cur ^= 1;
        __syncthreads();
    }
    if (i < n) out[i] = s[cur][t];
}

__global__ void empty() {}

static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best wall time of `reps` runs of `launch` (each followed by a synchronize), after the first.
static double best(int reps, const std::function<void()>& launch) {
    launch();
    CHECK(cudaDeviceSynchronize());
    double b = 1e30;
    for (int r = 0; r < reps; r++) {
        double t = now();
        launch();
        CHECK(cudaDeviceSynchronize());
        b = std::min(b, now() - t);
    }
    CHECK(cudaGetLastError());
    return b;
}

template <class T> static T* upload(const std::vector<T>& h) {
    T* d;
    CHECK(cudaMalloc(&d, h.size() * sizeof(T)));
    CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

// Checksum of the first launch's output: the launch runs once, outside `best`'s timing.
template <class T> static double first(int reps, T* d, size_t count, const std::function<void()>& launch,
                                       double* seconds) {
    launch();
    CHECK(cudaDeviceSynchronize());
    std::vector<T> h(count);
    CHECK(cudaMemcpy(h.data(), d, count * sizeof(T), cudaMemcpyDeviceToHost));
    double sum = 0;
    for (size_t k = 0; k < count; k++) sum += fabs((double)h[k]) * (double)(k % 7 + 1);
    *seconds = best(reps, launch);
    return sum;
}

static void run(const char* name, int size, int reps) {
    double secs = 0, sum = 0;
    int n = size;
    if (!strcmp(name, "saxpy") || !strcmp(name, "saxpy_grid")) {
        std::vector<float> x(n), y(n);
        for (int i = 0; i < n; i++) x[i] = in_f(i), y[i] = in_g(i);
        float *dx = upload(x), *dy = upload(y);
        int blocks = (n + 255) / 256;
        int grid = blocks < GRID_STRIDE_BLOCKS ? blocks : GRID_STRIDE_BLOCKS;
        if (!strcmp(name, "saxpy")) sum = first(reps, dy, n, [&] { saxpy<<<blocks, 256>>>(n, 2.0f, dx, dy); }, &secs);
        else sum = first(reps, dy, n, [&] { saxpy_grid<<<grid, 256>>>(n, 2.0f, dx, dy); }, &secs);
    } else if (!strcmp(name, "sgemm")) {
        std::vector<float> a(n * n), b(n * n);
        for (int i = 0; i < n * n; i++) a[i] = in_f(i), b[i] = in_g(i) * 0.125f;
        float *da = upload(a), *db = upload(b), *dc;
        CHECK(cudaMalloc(&dc, sizeof(float) * n * n));
        dim3 grid(n / TILE, n / TILE), block(TILE, TILE);
        sum = first(reps, dc, (size_t)n * n, [&] { sgemm<<<grid, block>>>(n, da, db, dc); }, &secs);
    } else if (!strcmp(name, "block_reduce") || !strcmp(name, "warp_reduce") || !strcmp(name, "scan")) {
        std::vector<float> x(n);
        for (int i = 0; i < n; i++) x[i] = in_g(i);
        float *dx = upload(x), *dout;
        int blocks = (n + 255) / 256;
        size_t count = name[0] == 'b' ? blocks : name[0] == 'w' ? (size_t)n / 32 : n;
        CHECK(cudaMalloc(&dout, sizeof(float) * count));
        auto launch = [&] {
            if (name[0] == 'b') block_reduce<<<blocks, 256>>>(n, dx, dout);
            else if (name[0] == 'w') warp_reduce<<<blocks, 256>>>(n, dx, dout);
            else scan<<<blocks, 256>>>(n, dx, dout);
        };
        sum = first(reps, dout, count, launch, &secs);
    } else if (!strcmp(name, "stencil")) {
        std::vector<float> x((size_t)n * n);
        for (int i = 0; i < n * n; i++) x[i] = in_f(i);
        float *dx = upload(x), *dy;
        CHECK(cudaMalloc(&dy, sizeof(float) * n * n));
        dim3 grid(n / 16, n / 16), block(16, 16);
        sum = first(reps, dy, (size_t)n * n, [&] { stencil<<<grid, block>>>(n, dx, dy); }, &secs);
    } else if (!strcmp(name, "histogram")) {
        std::vector<unsigned> x(n);
        for (int i = 0; i < n; i++) x[i] = in_h(i);
        unsigned *dx = upload(x), *bins;
        CHECK(cudaMalloc(&bins, 256 * sizeof(unsigned)));
        CHECK(cudaMemset(bins, 0, 256 * sizeof(unsigned)));
        int blocks = (n + 256 * HIST_ITEMS - 1) / (256 * HIST_ITEMS);
        sum = first(reps, bins, 256, [&] { histogram<<<blocks, 256>>>(n, dx, bins); }, &secs);
    } else if (!strcmp(name, "nbody")) {
        std::vector<float4> p(n);
        for (int i = 0; i < n; i++) p[i] = make_float4(in_f(4 * i), in_f(4 * i + 1), in_f(4 * i + 2), 1.0f + in_f(4 * i + 3));
        float4 *dp = upload(p), *da;
        CHECK(cudaMalloc(&da, sizeof(float4) * n));
        sum = first(reps, (float*)da, (size_t)n * 4, [&] { nbody<<<n / 256, 256>>>(n, dp, da); }, &secs);
    } else if (!strcmp(name, "launch")) {
        empty<<<1, 32>>>();
        CHECK(cudaDeviceSynchronize());
        double t = now();
        for (int k = 0; k < n; k++) empty<<<1, 32>>>();
        CHECK(cudaDeviceSynchronize());
        secs = (now() - t) / n;
    } else if (!strcmp(name, "memcpy")) {
        size_t bytes = (size_t)n;
        char *h = (char*)malloc(bytes), *h2 = (char*)malloc(bytes), *d, *d2;
        memset(h, 1, bytes);
        memset(h2, 2, bytes);
        CHECK(cudaMalloc(&d, bytes));
        CHECK(cudaMalloc(&d2, bytes));
        double t;
        t = best(reps, [&] { CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice)); });
        printf("h2d %.9g %zu\n", t, bytes);
        t = best(reps, [&] { CHECK(cudaMemcpy(h2, d, bytes, cudaMemcpyDeviceToHost)); });
        printf("d2h %.9g %zu\n", t, bytes);
        t = best(reps, [&] { CHECK(cudaMemcpy(d2, d, bytes, cudaMemcpyDeviceToDevice)); });
        printf("d2d %.9g %zu\n", t, bytes);
        t = best(reps, [&] { memcpy(h2, h, bytes); });
        printf("memcpy %.9g %d\n", t, h2[bytes - 1]);
        return;
    } else {
        fprintf(stderr, "unknown kernel %s\n", name);
        exit(2);
    }
    printf("%s %.9g %.17g\n", name, secs, sum);
    fflush(stdout);
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s REPS KERNEL:SIZE...\n", argv[0]);
        return 2;
    }
    int reps = atoi(argv[1]);
    for (int k = 2; k < argc; k++) {
        char name[64];
        int size;
        if (sscanf(argv[k], "%63[^:]:%d", name, &size) != 2) return 2;
        run(name, size, reps);
    }
    return 0;
}

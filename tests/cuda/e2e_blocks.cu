// Barriers, static and dynamic shared memory (including the >48 KiB opt-in), barrier
// reductions, and 2D/3D grids. Every result is checked against a host computation.
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

static int failures = 0;
#define EXPECT(cond)                                                                             \
    do {                                                                                         \
        if (!(cond) && failures++ < 10) fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); \
    } while (0)
#define OK(call) EXPECT((call) == cudaSuccess)

// Each block reverses its slice through shared memory: correct only if the barrier holds.
__global__ void reverse_blocks(const int* in, int* out) {
    __shared__ int tile[256];
    int base = blockIdx.x * blockDim.x;
    tile[threadIdx.x] = in[base + threadIdx.x];
    __syncthreads();
    out[base + threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}

// Tree sum in dynamic shared memory sized at launch.
__global__ void block_sums(const unsigned* in, unsigned* out, int n) {
    extern __shared__ unsigned partial[];
    unsigned tid = threadIdx.x, i = blockIdx.x * blockDim.x + tid;
    partial[tid] = i < n ? in[i] : 0;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (tid < stride) partial[tid] += partial[tid + stride];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = partial[0];
}

// 64 KiB of dynamic shared memory (needs cudaFuncAttributeMaxDynamicSharedMemorySize):
// every thread fills a strided part, then reads words another thread wrote.
__global__ void big_shared(unsigned* out, int words) {
    extern __shared__ unsigned big[];
    for (int j = threadIdx.x; j < words; j += blockDim.x) big[j] = j * 7u + blockIdx.x;
    __syncthreads();
    unsigned acc = 0;
    for (int k = 0; k < 8; k++) acc += big[(threadIdx.x * 131 + k * 2053) % words];
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// __syncthreads_count/_and/_or over a predicate.
__global__ void barrier_votes(const int* in, int* out) {
    int v = in[blockIdx.x * blockDim.x + threadIdx.x];
    int count = __syncthreads_count(v % 3 == 0);
    int all = __syncthreads_and(v >= 0);
    int any = __syncthreads_or(v == 77);
    if (threadIdx.x == 0) {
        out[blockIdx.x * 3 + 0] = count;
        out[blockIdx.x * 3 + 1] = all;
        out[blockIdx.x * 3 + 2] = any;
    }
}

// Transpose through a padded 2D shared tile on a 2D grid of 2D blocks.
#define TILE 16
__global__ void transpose(const float* in, float* out, int width, int height) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    if (x < width && y < height) tile[threadIdx.y][threadIdx.x] = in[y * width + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    if (x < height && y < width) out[y * height + x] = tile[threadIdx.x][threadIdx.y];
}

// Every thread of a 3D grid of 3D blocks writes its coordinates and ids.
__global__ void coords3d(unsigned* out) {
    unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned y = blockIdx.y * blockDim.y + threadIdx.y;
    unsigned z = blockIdx.z * blockDim.z + threadIdx.z;
    unsigned w = gridDim.x * blockDim.x, h = gridDim.y * blockDim.y;
    unsigned flat_block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    unsigned flat_thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    out[(z * h + y) * w + x] = x + 100 * y + 10000 * z + 1000000 * (flat_block * 64 + flat_thread);
}

int main() {
    // reverse within blocks
    const int nb = 8, bs = 256, n = nb * bs;
    std::vector<int> h(n), back(n);
    for (int i = 0; i < n; i++) h[i] = i * 7 - 3;
    int *din, *dout;
    OK(cudaMalloc(&din, n * sizeof(int)));
    OK(cudaMalloc(&dout, n * sizeof(int)));
    OK(cudaMemcpy(din, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    reverse_blocks<<<nb, bs>>>(din, dout);
    OK(cudaGetLastError());
    OK(cudaMemcpy(back.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int b = 0; b < nb; b++)
        for (int t = 0; t < bs; t++) EXPECT(back[b * bs + t] == h[b * bs + bs - 1 - t]);

    // dynamic shared sums, several block sizes
    const int m = 5000;
    std::vector<unsigned> hu(m);
    for (int i = 0; i < m; i++) hu[i] = (i * 2654435761u) >> 20;
    unsigned *du, *dsum;
    OK(cudaMalloc(&du, m * sizeof(unsigned)));
    OK(cudaMalloc(&dsum, m * sizeof(unsigned)));
    OK(cudaMemcpy(du, hu.data(), m * sizeof(unsigned), cudaMemcpyHostToDevice));
    for (int threads : {64, 128, 512}) {
        int blocks = (m + threads - 1) / threads;
        block_sums<<<blocks, threads, threads * sizeof(unsigned)>>>(du, dsum, m);
        OK(cudaGetLastError());
        std::vector<unsigned> sums(blocks);
        OK(cudaMemcpy(sums.data(), dsum, blocks * sizeof(unsigned), cudaMemcpyDeviceToHost));
        for (int b = 0; b < blocks; b++) {
            unsigned ref = 0;
            for (int i = b * threads; i < (b + 1) * threads && i < m; i++) ref += hu[i];
            EXPECT(sums[b] == ref);
        }
    }

    // 64 KiB dynamic shared memory after opting in
    const int words = 16384, bigthreads = 128, bigblocks = 3;
    OK(cudaFuncSetAttribute(big_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, words * 4));
    unsigned* dbig;
    OK(cudaMalloc(&dbig, bigblocks * bigthreads * sizeof(unsigned)));
    big_shared<<<bigblocks, bigthreads, words * 4>>>(dbig, words);
    OK(cudaGetLastError());
    std::vector<unsigned> hbig(bigblocks * bigthreads);
    OK(cudaMemcpy(hbig.data(), dbig, hbig.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (int b = 0; b < bigblocks; b++)
        for (int t = 0; t < bigthreads; t++) {
            unsigned acc = 0;
            for (int k = 0; k < 8; k++) acc += ((t * 131 + k * 2053) % words) * 7u + b;
            EXPECT(hbig[b * bigthreads + t] == acc);
        }

    // barrier reductions
    std::vector<int> hv(n);
    for (int i = 0; i < n; i++) hv[i] = (i / bs) == 2 ? -(i % 5) : (i * 13) % 101;
    OK(cudaMemcpy(din, hv.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    barrier_votes<<<nb, bs>>>(din, dout);
    OK(cudaGetLastError());
    OK(cudaMemcpy(back.data(), dout, nb * 3 * sizeof(int), cudaMemcpyDeviceToHost));
    for (int b = 0; b < nb; b++) {
        int count = 0, all = 1, any = 0;
        for (int t = 0; t < bs; t++) {
            int v = hv[b * bs + t];
            count += v % 3 == 0;
            all &= v >= 0;
            any |= v == 77;
        }
        EXPECT(back[b * 3] == count && (back[b * 3 + 1] != 0) == (all != 0) && (back[b * 3 + 2] != 0) == (any != 0));
    }

    // 2D: transpose of a non-square matrix whose sides are not tile multiples
    const int width = 70, height = 45;
    std::vector<float> mat(width * height), tr(width * height);
    for (int i = 0; i < width * height; i++) mat[i] = i * 0.5f - 100.0f;
    float *dm, *dt;
    OK(cudaMalloc(&dm, mat.size() * sizeof(float)));
    OK(cudaMalloc(&dt, mat.size() * sizeof(float)));
    OK(cudaMemcpy(dm, mat.data(), mat.size() * sizeof(float), cudaMemcpyHostToDevice));
    dim3 grid2((width + TILE - 1) / TILE, (height + TILE - 1) / TILE), block2(TILE, TILE);
    transpose<<<grid2, block2>>>(dm, dt, width, height);
    OK(cudaGetLastError());
    OK(cudaMemcpy(tr.data(), dt, tr.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++) EXPECT(tr[x * height + y] == mat[y * width + x]);

    // 3D grid of 3D blocks (4 x 4 x 4 threads = 64 per block)
    dim3 grid3(3, 2, 4), block3(4, 4, 4);
    const unsigned w = 12, hh = 8, d = 16;
    unsigned* dc;
    OK(cudaMalloc(&dc, w * hh * d * sizeof(unsigned)));
    coords3d<<<grid3, block3>>>(dc);
    OK(cudaGetLastError());
    std::vector<unsigned> hc(w * hh * d);
    OK(cudaMemcpy(hc.data(), dc, hc.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (unsigned z = 0; z < d; z++)
        for (unsigned y = 0; y < hh; y++)
            for (unsigned x = 0; x < w; x++) {
                unsigned fb = ((z / 4) * 2 + y / 4) * 3 + x / 4;
                unsigned ft = ((z % 4) * 4 + y % 4) * 4 + x % 4;
                EXPECT(hc[(z * hh + y) * w + x] == x + 100 * y + 10000 * z + 1000000 * (fb * 64 + ft));
            }

    for (void* p : {(void*)din, (void*)dout, (void*)du, (void*)dsum, (void*)dbig, (void*)dm, (void*)dt, (void*)dc})
        OK(cudaFree(p));
    printf("blocks: %s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}

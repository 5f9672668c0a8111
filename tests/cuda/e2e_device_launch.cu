// CUDA Dynamic Parallelism (nvcc -rdc=true -lcudadevrt): kernels launched from kernels, device-side
// streams, cudaMemcpyAsync, cudaMalloc/cudaFree and the launch errors cudaGetLastError reports.
// Every result is checked against values computed here on the host.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static int failures = 0;
static void expect(bool ok, const char *what, long long got, long long want) {
    if (!ok) {
        fprintf(stderr, "FAILED: %s: got %lld, want %lld\n", what, got, want);
        failures++;
    }
}

constexpr int PARENT_BLOCKS = 2, PARENT_THREADS = 3, CHILD_BLOCKS = 2, CHILD_THREADS = 4;
constexpr int SLOT = CHILD_BLOCKS * CHILD_THREADS;

// grandchild: one thread records which child block launched it
__global__ void grandchild(int *marks, int slot, int block) { marks[slot * CHILD_BLOCKS + block] = 1000 + slot * 10 + block; }

__global__ void child(int *out, int *marks, int slot) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[slot * SLOT + t] = slot * 100 + t;
    if (threadIdx.x == 0) grandchild<<<1, 1>>>(marks, slot, blockIdx.x);
}

__global__ void parent(int *out, int *marks) {
    int slot = blockIdx.x * blockDim.x + threadIdx.x;
    child<<<CHILD_BLOCKS, CHILD_THREADS>>>(out, marks, slot);
}

__global__ void fill(int *a, int n, int v) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) a[i] = v + i;
}

// fill a in a device-created stream, then copy it to b behind the fill in that stream
__global__ void fill_then_copy(int *a, int *b, int n, int v, int *codes) {
    cudaStream_t s;
    codes[0] = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    fill<<<1, 32, 0, s>>>(a, n, v);
    codes[1] = cudaGetLastError();
    codes[2] = cudaMemcpyAsync(b, a, n * sizeof(int), cudaMemcpyDeviceToDevice, s);
    codes[3] = cudaStreamDestroy(s);
}

// a block of 2048 threads is an invalid configuration: the launch fails, cudaGetLastError says
// so once, cudaPeekAtLastError leaves it
__global__ void bad_launch(int *a, int *codes) {
    fill<<<1, 2048>>>(a, 1, 0);
    codes[0] = cudaPeekAtLastError();
    codes[1] = cudaGetLastError();
    codes[2] = cudaGetLastError();
}

// a tail launch runs after everything else its grid launched, whatever the order of the launches
__global__ void stamp(int *order, int *next, int id) { order[atomicAdd(next, 1)] = id; }
__global__ void tail_first(int *order, int *next) {
    stamp<<<1, 1, 0, cudaStreamTailLaunch>>>(order, next, 2);
    stamp<<<1, 1>>>(order, next, 1);
}

__global__ void allocate(int **ptrs, int n) {
    int *p;
    if (cudaMalloc((void **)&p, n * sizeof(int)) != cudaSuccess) return;
    ptrs[threadIdx.x] = p;
    fill<<<1, 16>>>(p, n, 10 * threadIdx.x);
}

__global__ void sum_and_free(int **ptrs, int n, long long *sums) {
    long long s = 0;
    for (int i = 0; i < n; i++) s += ptrs[threadIdx.x][i];
    sums[threadIdx.x] = s;
    cudaFree(ptrs[threadIdx.x]);
}

int main() {
    constexpr int SLOTS = PARENT_BLOCKS * PARENT_THREADS;
    int *out, *marks;
    CHECK(cudaMalloc(&out, SLOTS * SLOT * sizeof(int)));
    CHECK(cudaMalloc(&marks, SLOTS * CHILD_BLOCKS * sizeof(int)));
    for (int run = 0; run < 2; run++) {  // a second launch of a kernel may take a faster launch path
        CHECK(cudaMemset(out, 0xFF, SLOTS * SLOT * sizeof(int)));
        CHECK(cudaMemset(marks, 0xFF, SLOTS * CHILD_BLOCKS * sizeof(int)));
        parent<<<PARENT_BLOCKS, PARENT_THREADS>>>(out, marks);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        int h_out[SLOTS * SLOT], h_marks[SLOTS * CHILD_BLOCKS];
        CHECK(cudaMemcpy(h_out, out, sizeof h_out, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(h_marks, marks, sizeof h_marks, cudaMemcpyDeviceToHost));
        for (int slot = 0; slot < SLOTS; slot++) {
            for (int t = 0; t < SLOT; t++)
                expect(h_out[slot * SLOT + t] == slot * 100 + t, "child output", h_out[slot * SLOT + t], slot * 100 + t);
            for (int b = 0; b < CHILD_BLOCKS; b++)
                expect(h_marks[slot * CHILD_BLOCKS + b] == 1000 + slot * 10 + b, "grandchild mark",
                       h_marks[slot * CHILD_BLOCKS + b], 1000 + slot * 10 + b);
        }
    }

    constexpr int N = 100;
    int *a, *b, *codes;
    CHECK(cudaMalloc(&a, N * sizeof(int)));
    CHECK(cudaMalloc(&b, N * sizeof(int)));
    CHECK(cudaMalloc(&codes, 4 * sizeof(int)));
    CHECK(cudaMemset(b, 0, N * sizeof(int)));
    fill_then_copy<<<1, 1>>>(a, b, N, 7, codes);
    CHECK(cudaDeviceSynchronize());
    int h_b[N], h_codes[4];
    CHECK(cudaMemcpy(h_b, b, sizeof h_b, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(h_codes, codes, sizeof h_codes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++) expect(h_b[i] == 7 + i, "copy behind the fill", h_b[i], 7 + i);
    for (int i = 0; i < 4; i++) expect(h_codes[i] == cudaSuccess, "stream, launch, copy, destroy", h_codes[i], 0);

    bad_launch<<<1, 1>>>(a, codes);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(h_codes, codes, 3 * sizeof(int), cudaMemcpyDeviceToHost));
    expect(h_codes[0] == cudaErrorInvalidConfiguration, "peek after a bad launch", h_codes[0], cudaErrorInvalidConfiguration);
    expect(h_codes[1] == cudaErrorInvalidConfiguration, "last error after a bad launch", h_codes[1], cudaErrorInvalidConfiguration);
    expect(h_codes[2] == cudaSuccess, "last error read twice", h_codes[2], 0);

    CHECK(cudaMemset(codes, 0, 3 * sizeof(int)));
    tail_first<<<1, 1>>>(codes + 1, codes);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(h_codes, codes, 3 * sizeof(int), cudaMemcpyDeviceToHost));
    expect(h_codes[0] == 2, "grids stamped", h_codes[0], 2);
    expect(h_codes[1] == 1 && h_codes[2] == 2, "the tail launch last", h_codes[1] * 10 + h_codes[2], 12);

    constexpr int THREADS = 4, M = 50;
    int **ptrs;
    long long *sums;
    CHECK(cudaMalloc(&ptrs, THREADS * sizeof(int *)));
    CHECK(cudaMalloc(&sums, THREADS * sizeof(long long)));
    allocate<<<1, THREADS>>>(ptrs, M);
    sum_and_free<<<1, THREADS>>>(ptrs, M, sums);
    CHECK(cudaDeviceSynchronize());
    long long h_sums[THREADS];
    CHECK(cudaMemcpy(h_sums, sums, sizeof h_sums, cudaMemcpyDeviceToHost));
    for (int t = 0; t < THREADS; t++) {
        long long want = 0;
        for (int i = 0; i < M; i++) want += 10 * t + i;
        expect(h_sums[t] == want, "device-allocated buffer's sum", h_sums[t], want);
    }
    if (failures) return 1;
    printf("device_launch: PASSED\n");
    return 0;
}

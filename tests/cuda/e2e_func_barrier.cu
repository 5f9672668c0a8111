// Block barriers inside device functions that nvcc keeps as calls (__noinline__, and every
// function under -G): __syncthreads in a loop, __syncthreads_count/_and/_or returning a
// value, nested calls, a static __shared__ variable of a function, and cooperative groups'
// thread_block::sync (built with -DWITH_CG). Every result is checked against a host computation.
#include <cooperative_groups.h>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

static int failures = 0;
#define EXPECT(cond)                                                                             \
    do {                                                                                         \
        if (!(cond) && failures++ < 10) fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); \
    } while (0)
#define OK(call) EXPECT((call) == cudaSuccess)

// `rounds` times: every thread adds the value of the thread 32 places on (one warp on).
__device__ __noinline__ int rotate_sum(int* tile, int v, int rounds) {
    for (int r = 0; r < rounds; r++) {
        tile[threadIdx.x] = v;
        __syncthreads();
        v += tile[(threadIdx.x + 32) % blockDim.x];
        __syncthreads();
    }
    return v;
}

// Barrier reductions returned from a function: count, all, any.
__device__ __noinline__ int votes(int v) {
    int count = __syncthreads_count(v % 3 == 0);
    int all = __syncthreads_and(v >= 0);
    int any = __syncthreads_or(v == 77);
    return count * 4 + all * 2 + any;
}

// A function-scope __shared__ array: one per block, whichever call site writes or reads it.
__device__ __noinline__ int exchange(int v, bool store) {
    __shared__ int slots[256];
    if (store) slots[threadIdx.x] = v;
    __syncthreads();
    return slots[blockDim.x - 1 - threadIdx.x];
}

// Nested: a function calling functions with barriers, twice each.
__device__ __noinline__ int nested(int* tile, int v) {
    exchange(v * 3, true);
    int reversed = exchange(0, false);
    return rotate_sum(tile, reversed, 1) + rotate_sum(tile, v, 2);
}

#ifdef WITH_CG
// cooperative groups: the block's sync in a function that is not inlined.
__device__ __noinline__ int cg_reverse(cg::thread_block block, int* tile, int v) {
    tile[block.thread_rank()] = v;
    block.sync();
    int r = tile[block.size() - 1 - block.thread_rank()];
    block.sync();
    return r;
}
#endif

__global__ void func_barriers(const int* in, int* out, int rounds) {
    __shared__ int tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    out[4 * i + 0] = rotate_sum(tile, v, rounds);
    out[4 * i + 1] = votes(v);
    out[4 * i + 2] = nested(tile, v);
#ifdef WITH_CG
    out[4 * i + 3] = cg_reverse(cg::this_thread_block(), tile, v);
#endif
}

static void host_rotate(std::vector<long long>& v, int rounds) {
    size_t n = v.size();
    for (int r = 0; r < rounds; r++) {
        std::vector<long long> w(n);
        for (size_t t = 0; t < n; t++) w[t] = v[t] + v[(t + 32) % n];
        v = w;
    }
}

int main() {
    const int blocks = 3, threads = 160, n = blocks * threads, rounds = 3;  // 5 warps a block
    std::vector<int> in(n);
    for (int i = 0; i < n; i++) in[i] = (i * 37 + 11) % 101 - (i % 29 == 0 ? 150 : 0);
    in[200] = 77;
    int *d_in, *d_out;
    OK(cudaMalloc(&d_in, n * sizeof(int)));
    OK(cudaMalloc(&d_out, 4 * n * sizeof(int)));
    OK(cudaMemcpy(d_in, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    func_barriers<<<blocks, threads>>>(d_in, d_out, rounds);
    OK(cudaGetLastError());
    OK(cudaDeviceSynchronize());
    std::vector<int> out(4 * n);
    OK(cudaMemcpy(out.data(), d_out, 4 * n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++) {
        std::vector<long long> v(in.begin() + b * threads, in.begin() + (b + 1) * threads);
        std::vector<long long> rot = v, one, two = v;
        host_rotate(rot, rounds);
        int count = 0, all = 1, any = 0;
        for (long long x : v) {
            count += x % 3 == 0;
            all &= x >= 0;
            any |= x == 77;
        }
        for (int t = 0; t < threads; t++) one.push_back(3 * v[threads - 1 - t]);
        host_rotate(one, 1);
        host_rotate(two, 2);
        for (int t = 0; t < threads; t++) {
            int i = b * threads + t;
            EXPECT(out[4 * i + 0] == (int)rot[t]);
            EXPECT(out[4 * i + 1] == count * 4 + all * 2 + any);
            EXPECT(out[4 * i + 2] == (int)(one[t] + two[t]));
#ifdef WITH_CG
            EXPECT(out[4 * i + 3] == in[b * threads + threads - 1 - t]);
#endif
        }
    }
    OK(cudaFree(d_in));
    OK(cudaFree(d_out));
    if (failures) return 1;
    printf("func barriers: PASSED\n");
    return 0;
}

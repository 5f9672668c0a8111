// Cooperative launches at their limits: the largest grid the occupancy API allows, many
// grid.sync()s in a loop, cudaLaunchKernelEx with the cooperative attribute, one block more
// than can be resident (cudaErrorCooperativeLaunchTooLarge), grid.is_valid() outside a
// cooperative launch, and a block that traps while the others wait in grid.sync().
// Usage: e2e_grid_sync_limits <largest|launch-ex|too-large|not-cooperative|trap>
#include <cstdio>
#include <cstring>
#include <vector>
#include <cooperative_groups.h>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

static int failures = 0;
#define EXPECT(cond)                                                                                   \
    do {                                                                                               \
        if (!(cond) && failures++ < 10) fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); \
    } while (0)
#define OK(call) EXPECT((call) == cudaSuccess)

constexpr int THREADS = 64, ROUNDS = 8;

// Each round every thread takes a value from another block, the grid syncs, every thread
// overwrites its own; then a grid-wide sum of the block partials, read by every block.
__global__ void rounds(unsigned* x, unsigned* partial, unsigned* sums) {
    cg::grid_group grid = cg::this_grid();
    unsigned i = grid.thread_rank(), n = grid.size();
    for (int r = 0; r < ROUNDS; r++) {
        unsigned v = x[(i + blockDim.x * (r + 1) + r) % n];
        grid.sync();
        x[i] = v * 3u + r;
        grid.sync();
    }
    __shared__ unsigned block_sum;
    unsigned block = blockIdx.x + gridDim.x * blockIdx.y;
    if (threadIdx.x == 0) block_sum = 0;
    __syncthreads();
    atomicAdd(&block_sum, x[i]);
    __syncthreads();
    if (threadIdx.x == 0) partial[block] = block_sum;
    grid.sync();
    if (threadIdx.x == 0) {
        unsigned s = 0;
        for (unsigned b = 0; b < gridDim.x * gridDim.y; b++) s += partial[b];
        sums[block] = s;
    }
}

__global__ void validity(int* out) {
    out[blockIdx.x] = cg::this_grid().is_valid();
}

__global__ void trap_one(int* out) {
    cg::grid_group grid = cg::this_grid();
    if (blockIdx.x == 1) __trap();
    grid.sync();  // block 1 never arrives
    out[blockIdx.x] = 1;
}

// The same computation on the host.
static void reference(unsigned n, std::vector<unsigned>& x, unsigned& total) {
    for (int r = 0; r < ROUNDS; r++) {
        std::vector<unsigned> next(n);
        for (unsigned i = 0; i < n; i++) next[i] = x[(i + THREADS * (r + 1) + r) % n] * 3u + r;
        x = next;
    }
    total = 0;
    for (unsigned v : x) total += v;
}

static int largest_grid(const void* kernel) {
    int per_sm = 0, sms = 0;
    OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, THREADS, 0));
    OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    EXPECT(per_sm > 0 && sms > 0);
    return per_sm * sms;
}

// Runs `rounds` on grid (gx, gy) through launch() and checks it against the host.
template <typename Launch>
static void check_rounds(unsigned gx, unsigned gy, Launch launch) {
    unsigned nblocks = gx * gy, n = nblocks * THREADS;
    std::vector<unsigned> hx(n);
    for (unsigned i = 0; i < n; i++) hx[i] = i * 2654435761u;
    unsigned *x, *partial, *sums;
    OK(cudaMalloc(&x, n * sizeof(unsigned)));
    OK(cudaMalloc(&partial, nblocks * sizeof(unsigned)));
    OK(cudaMalloc(&sums, nblocks * sizeof(unsigned)));
    OK(cudaMemcpy(x, hx.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
    void* args[] = {&x, &partial, &sums};
    OK(launch(dim3(gx, gy), args));
    OK(cudaDeviceSynchronize());
    std::vector<unsigned> out(n), got_sums(nblocks);
    OK(cudaMemcpy(out.data(), x, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(got_sums.data(), sums, nblocks * sizeof(unsigned), cudaMemcpyDeviceToHost));
    unsigned total;
    reference(n, hx, total);
    for (unsigned i = 0; i < n; i++) EXPECT(out[i] == hx[i]);
    for (unsigned b = 0; b < nblocks; b++) EXPECT(got_sums[b] == total);
    OK(cudaFree(x));
    OK(cudaFree(partial));
    OK(cudaFree(sums));
}

static cudaError_t cooperative(dim3 grid, void** args) {
    return cudaLaunchCooperativeKernel((void*)rounds, grid, THREADS, args, 0, 0);
}

static cudaError_t launch_ex(dim3 grid, void** args) {
    cudaLaunchConfig_t config = {};
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeCooperative;
    attr.val.cooperative = 1;
    config.gridDim = grid;
    config.blockDim = THREADS;
    config.attrs = &attr;
    config.numAttrs = 1;
    return cudaLaunchKernelExC(&config, (const void*)rounds, args);
}

int main(int argc, char** argv) {
    const char* what = argc > 1 ? argv[1] : "";
    int largest = largest_grid((const void*)rounds);
    if (!strcmp(what, "largest")) {
        check_rounds(largest, 1, cooperative);
        if (largest % 2 == 0) check_rounds(2, largest / 2, cooperative);  // %ctaid.y / %nctaid.y too
        check_rounds(1, 1, cooperative);
    } else if (!strcmp(what, "launch-ex")) {
        check_rounds(largest, 1, launch_ex);
    } else if (!strcmp(what, "too-large")) {
        unsigned* none = nullptr;
        void* args[] = {&none, &none, &none};
        EXPECT(cooperative(dim3(largest + 1), args) == cudaErrorCooperativeLaunchTooLarge);
        EXPECT(cudaGetLastError() == cudaErrorCooperativeLaunchTooLarge);
        EXPECT(cudaGetLastError() == cudaSuccess);  // not sticky
        EXPECT(launch_ex(dim3(largest + 1), args) == cudaErrorCooperativeLaunchTooLarge);
        EXPECT(cudaGetLastError() == cudaErrorCooperativeLaunchTooLarge);
        check_rounds(largest, 1, cooperative);  // the context still works
    } else if (!strcmp(what, "not-cooperative")) {
        int* d;
        int h[2];
        OK(cudaMalloc(&d, 2 * sizeof(int)));
        validity<<<2, 32>>>(d);
        OK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
        EXPECT(h[0] == 0 && h[1] == 0);  // no grid workspace outside a cooperative launch
        void* args[] = {&d};
        OK(cudaLaunchCooperativeKernel((void*)validity, 2, 32, args, 0, 0));
        OK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
        EXPECT(h[0] == 1 && h[1] == 1);
        OK(cudaFree(d));
    } else if (!strcmp(what, "trap")) {
        int* d;
        OK(cudaMalloc(&d, 4 * sizeof(int)));
        void* args[] = {&d};
        OK(cudaLaunchCooperativeKernel((void*)trap_one, 4, 32, args, 0, 0));
        EXPECT(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
    } else {
        fprintf(stderr, "usage: %s largest|launch-ex|too-large|not-cooperative|trap\n", argv[0]);
        return 2;
    }
    printf("grid sync %s: %s\n", what, failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}

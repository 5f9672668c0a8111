// Grid-wide synchronization of cooperative groups in a cooperative launch (nvcc implements
// grid.sync() with a driver-provided workspace read from %envreg1/%envreg2).
#include <cstdio>
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

// Cooperative launch: every thread writes, the whole grid syncs, then reads another block's
// values (twice, so the barrier is reused).
__global__ void grid_exchange(int* a, int* b) {
    cg::grid_group grid = cg::this_grid();
    int i = grid.thread_rank(), n = grid.size();
    a[i] = i * 3 + 1;
    grid.sync();
    int first = a[(i + blockDim.x) % n];
    grid.sync();
    a[i] = first * 2;
    grid.sync();
    b[i] = a[(i + 2 * blockDim.x + 1) % n] + (grid.is_valid() ? 0 : 1000000);
}

int main() {
    const int blocks = 4, threads = 64, n = blocks * threads;
    int *da, *db;
    OK(cudaMalloc(&da, n * sizeof(int)));
    OK(cudaMalloc(&db, n * sizeof(int)));
    void* args[] = {&da, &db};
    OK(cudaLaunchCooperativeKernel((void*)grid_exchange, blocks, threads, args, 0, 0));
    std::vector<int> hb(n);
    OK(cudaMemcpy(hb.data(), db, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        int j = (i + 2 * threads + 1) % n;
        EXPECT(hb[i] == (((j + threads) % n) * 3 + 1) * 2);
    }
    OK(cudaFree(da));
    OK(cudaFree(db));
    printf("grid sync: %s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}

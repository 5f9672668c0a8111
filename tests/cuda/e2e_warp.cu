// Warp-level primitives: shuffles (idx/up/down/xor, sub-warp widths, 32- and 64-bit), votes,
// ballots, match, __reduce_*_sync, partial warps; cooperative groups (thread_block,
// tiled_partition, reductions, coalesced groups). Built for sm_80 (redux.sync).
#include <cstdio>
#include <cstring>
#include <vector>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

static int failures = 0;
#define EXPECT(cond)                                                                                   \
    do {                                                                                               \
        if (!(cond) && failures++ < 10) fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); \
    } while (0)
#define OK(call) EXPECT((call) == cudaSuccess)

constexpr unsigned FULL = 0xffffffffu;
constexpr int FIELDS = 16;

__device__ int value_of(int g) { return (g * 7919) % 1000 - 300; }

// out[g * FIELDS + k]: the k-th result of global thread g.
__global__ void shuffles_and_votes(int* out) {
    int g = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32;
    int v = value_of(g);
    int* o = out + g * FIELDS;
    o[0] = __shfl_sync(FULL, v, 5);
    o[1] = __shfl_up_sync(FULL, v, 3);
    o[2] = __shfl_down_sync(FULL, v, 2);
    o[3] = __shfl_xor_sync(FULL, v, 9);
    o[4] = __shfl_sync(FULL, v, lane + 1, 8);  // within groups of 8, wrapping
    double d = v * 1.5 + 0.25;
    o[5] = (int)(__shfl_xor_sync(FULL, d, 16) * 4);
    float f = v * 0.5f;
    o[6] = (int)(__shfl_down_sync(FULL, f, 4, 16) * 2);
    int sum = v;
    for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(FULL, sum, off);
    o[7] = __shfl_sync(FULL, sum, 0);
    o[8] = __all_sync(FULL, v > -300);
    o[9] = __any_sync(FULL, v == value_of(blockIdx.x * blockDim.x + (threadIdx.x / 32) * 32 + 17));
    o[10] = __ballot_sync(FULL, v % 3 == 0);
    o[11] = __match_any_sync(FULL, (v & 0x300) >> 8);
    int pred;
    o[12] = __match_all_sync(FULL, lane / 32, &pred);
    o[13] = pred;
    o[14] = __reduce_add_sync(FULL, v) + __reduce_max_sync(FULL, (unsigned)(v + 300));
    o[15] = lane < 10 ? (int)__ballot_sync(0x3ff, v & 1) : -1;
    __syncwarp();
}

// A block of 48 threads: the second warp has 16 lanes.
__global__ void partial_warp(unsigned* out) {
    unsigned active = __activemask();
    out[threadIdx.x * 2] = active;
    out[threadIdx.x * 2 + 1] = __ballot_sync(active, threadIdx.x % 2);
}

__global__ void groups(const int* in, int* out) {
    cg::thread_block block = cg::this_thread_block();
    int v = in[blockIdx.x * blockDim.x + block.thread_rank()];
    __shared__ int staged[128];
    staged[block.thread_rank()] = v;
    block.sync();
    int neighbour = staged[(block.thread_rank() + 1) % block.size()];
    cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
    int tile_sum = cg::reduce(tile, v, cg::plus<int>());
    int tile_max = cg::reduce(tile, v, cg::greater<int>());
    int tile_prefix = cg::inclusive_scan(tile, v);
    int from_tile = tile.shfl(v, 3);
    cg::thread_group tile4 = cg::tiled_partition(block, 4);
    int quad_rank = tile4.thread_rank();
    int coalesced_size = -1, coalesced_rank = -1;
    if (block.thread_rank() % 2 == 0) {
        cg::coalesced_group active = cg::coalesced_threads();
        coalesced_size = active.size();
        coalesced_rank = active.thread_rank();
    }
    int* o = out + (blockIdx.x * blockDim.x + block.thread_rank()) * 9;
    o[0] = neighbour; o[1] = tile_sum; o[2] = tile_max; o[3] = tile_prefix; o[4] = from_tile;
    o[5] = tile.meta_group_rank(); o[6] = quad_rank; o[7] = coalesced_size; o[8] = coalesced_rank;
}

static int value_of_host(int g) { return (g * 7919) % 1000 - 300; }

static void check_shuffles_and_votes() {
    const int blocks = 3, threads = 96, n = blocks * threads;
    int* dout;
    OK(cudaMalloc(&dout, n * FIELDS * sizeof(int)));
    shuffles_and_votes<<<blocks, threads>>>(dout);
    OK(cudaGetLastError());
    std::vector<int> o(n * FIELDS);
    OK(cudaMemcpy(o.data(), dout, o.size() * sizeof(int), cudaMemcpyDeviceToHost));
    for (int g = 0; g < n; g++) {
        int w = g / 32 * 32, lane = g % 32, v = value_of_host(g);
        auto at = [&](int l) { return value_of_host(w + l); };
        const int* r = &o[g * FIELDS];
        EXPECT(r[0] == at(5));
        EXPECT(r[1] == (lane >= 3 ? at(lane - 3) : v));
        EXPECT(r[2] == (lane + 2 < 32 ? at(lane + 2) : v));
        EXPECT(r[3] == at(lane ^ 9));
        EXPECT(r[4] == at((lane & ~7) + (lane + 1) % 8));
        EXPECT(r[5] == (int)((at(lane ^ 16) * 1.5 + 0.25) * 4));
        EXPECT(r[6] == (lane % 16 + 4 < 16 ? at(lane + 4) : v));
        int sum = 0, all = 1, any = 0, mx = 0;
        unsigned ballot = 0, match = 0, low = 0;
        for (int l = 0; l < 32; l++) {
            sum += at(l);
            all &= at(l) > -300;
            any |= at(l) == at(17);
            mx = at(l) + 300 > mx ? at(l) + 300 : mx;
            if (at(l) % 3 == 0) ballot |= 1u << l;
            if (((at(l) & 0x300) >> 8) == ((v & 0x300) >> 8)) match |= 1u << l;
            if (l < 10 && (at(l) & 1)) low |= 1u << l;
        }
        EXPECT(r[7] == sum && (r[8] != 0) == (all != 0) && r[9] == 1 && (unsigned)r[10] == ballot);
        EXPECT((unsigned)r[11] == match && (unsigned)r[12] == FULL && r[13] == 1);
        EXPECT(r[14] == sum + mx);
        EXPECT(r[15] == (lane < 10 ? (int)low : -1));
    }

    unsigned* dpw;
    OK(cudaMalloc(&dpw, 48 * 2 * sizeof(unsigned)));
    partial_warp<<<1, 48>>>(dpw);
    OK(cudaGetLastError());
    std::vector<unsigned> pw(96);
    OK(cudaMemcpy(pw.data(), dpw, pw.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (int t = 0; t < 48; t++) {
        unsigned active = t < 32 ? FULL : 0xffffu;
        EXPECT(pw[t * 2] == active && pw[t * 2 + 1] == (0xaaaaaaaau & active));
    }
    OK(cudaFree(dout));
    OK(cudaFree(dpw));
}

static void check_groups() {

    const int gthreads = 128, gblocks = 2, gn = gthreads * gblocks;
    std::vector<int> in(gn), go(gn * 9);
    for (int i = 0; i < gn; i++) in[i] = (i * 37) % 101 - 50;
    int *din, *dgo;
    OK(cudaMalloc(&din, gn * sizeof(int)));
    OK(cudaMalloc(&dgo, gn * 9 * sizeof(int)));
    OK(cudaMemcpy(din, in.data(), gn * sizeof(int), cudaMemcpyHostToDevice));
    groups<<<gblocks, gthreads>>>(din, dgo);
    OK(cudaGetLastError());
    OK(cudaMemcpy(go.data(), dgo, go.size() * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < gn; i++) {
        int b = i / gthreads, r = i % gthreads, t0 = i - r % 16;
        int sum = 0, mx = -1000, prefix = 0;
        for (int k = 0; k < 16; k++) {
            sum += in[t0 + k];
            mx = in[t0 + k] > mx ? in[t0 + k] : mx;
            if (k <= r % 16) prefix += in[t0 + k];
        }
        const int* q = &go[i * 9];
        EXPECT(q[0] == in[b * gthreads + (r + 1) % gthreads]);
        EXPECT(q[1] == sum && q[2] == mx && q[3] == prefix && q[4] == in[t0 + 3]);
        EXPECT(q[5] == r / 16 && q[6] == r % 4);
        EXPECT(r % 2 == 0 ? q[7] == 16 && q[8] == (r % 32) / 2 : q[7] == -1 && q[8] == -1);
    }
    OK(cudaFree(din));
    OK(cudaFree(dgo));
}

// Sections run by name (all of them without arguments), so a test can single one out.
int main(int argc, char** argv) {
    bool all = argc < 2;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "shuffles") && strcmp(argv[i], "groups")) {
            fprintf(stderr, "unknown section %s\n", argv[i]);
            return 2;
        }
    auto wanted = [&](const char* name) {
        for (int i = 1; i < argc; i++)
            if (!strcmp(argv[i], name)) return true;
        return all;
    };
    if (wanted("shuffles")) check_shuffles_and_votes();
    if (wanted("groups")) check_groups();
    printf("warp: %s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}

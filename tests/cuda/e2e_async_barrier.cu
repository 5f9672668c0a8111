// Asynchronous barriers and asynchronous copies (issue 15, item 4), checked against host
// computations: cuda::barrier in shared memory (arrive/wait over several phases, split
// arrive and wait, arrive_and_drop, an arrival that counts twice), copies into shared memory
// with __pipeline_memcpy_async (cp.async groups), cuda::memcpy_async with a block-scoped
// cuda::pipeline and with a cuda::barrier (cp.async.mbarrier.arrive), cooperative groups'
// memcpy_async, and, built for sm_90, cp.async.bulk global -> shared completing through the
// barrier's transaction count and shared -> global in a bulk group. A single-thread probe
// drives an mbarrier object directly with inline PTX (init, arrive counts, .noComplete,
// test_wait/try_wait with and without .parity, expect_tx/complete_tx, arrive_drop,
// pending_count, inval). Every section prints a digest of its results so that the output can
// be compared line by line with a run on NVIDIA hardware.
//
// Build: nvcc -arch=sm_90 -o e2e_async_barrier e2e_async_barrier.cu
// Run:   ./e2e_async_barrier            (every section; or name sections: barrier pipeline bulk probe)
#include <cooperative_groups.h>
#include <cooperative_groups/memcpy_async.h>
#include <cuda/barrier>
#include <cuda/pipeline>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace cg = cooperative_groups;

// as in the programming guide: a __shared__ barrier is initialized by one thread with init()
#pragma nv_diag_suppress static_var_with_dynamic_init

static int failures = 0;
#define EXPECT(cond)                                                                             \
    do {                                                                                         \
        if (!(cond) && failures++ < 10) fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); \
    } while (0)
#define OK(call) EXPECT((call) == cudaSuccess)

static uint64_t digest(const void* data, size_t bytes) {  // FNV-1a, 64 bits
    const unsigned char* p = static_cast<const unsigned char*>(data);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

// ---------------------------------------------------------------------------------------
// barrier: a block of 128 threads (4 warps). Rounds of write / arrive_and_wait / read the
// value of the thread 33 places on / arrive_and_wait. Then a split arrive and wait with
// work between them; then warp 3 leaves with arrive_and_drop and the other three warps go on
// for more rounds with the smaller expected count; finally thread 0 arrives with an update of
// 2 for itself and thread 1, which does not arrive and waits for the phase by its parity.
constexpr int BAR_THREADS = 128, BAR_ROUNDS = 4, BAR_BLOCKS = 3;

__global__ void barrier_kernel(const int* in, int* out) {
    using barrier = cuda::barrier<cuda::thread_scope_block>;
    __shared__ barrier bar;
    __shared__ int tile[BAR_THREADS];
    int t = threadIdx.x, n = blockDim.x;
    if (t == 0) init(&bar, n);
    __syncthreads();
    int v = in[blockIdx.x * n + t];
    for (int r = 0; r < BAR_ROUNDS; r++) {
        tile[t] = v;
        bar.arrive_and_wait();
        v = v * 3 + tile[(t + 33) % n];
        bar.arrive_and_wait();
    }
    // split phase: arrive, do independent work, then wait for everyone's arrival
    tile[t] = v;
    barrier::arrival_token token = bar.arrive();
    int local = (v ^ 0x5a5a) & 0xffff;
    bar.wait(std::move(token));
    v = local + tile[n - 1 - t];
    bar.arrive_and_wait();  // everyone has read tile before it is written again
    // warp 3 drops out: the barrier now expects 96 arrivals a phase
    int* o = out + (blockIdx.x * n + t) * 3;
    o[0] = v;
    if (t >= 96) {
        bar.arrive_and_drop();
        o[1] = -1;
        o[2] = -1;
        return;
    }
    for (int r = 0; r < 2; r++) {
        tile[t] = v + r;
        bar.arrive_and_wait();
        v += tile[(t + 1) % 96];
        bar.arrive_and_wait();
    }
    o[1] = v;
    // an arrival with update 2: thread 0 arrives for itself and thread 1
    if (t != 1) tile[t] = t * 7;
    if (t == 0) tile[1] = 7;  // thread 0 arrives for thread 1, so it writes thread 1's slot too
    if (t == 1) {
        // thread 1 does not arrive; it waits for the phase's completion by its parity
        // (phases so far: 4 rounds x 2 + 2 + 2 rounds x 2 = 14 completed, so this is phase 14)
        bar.wait_parity(false);
    } else {
        barrier::arrival_token tok = bar.arrive(t == 0 ? 2 : 1);
        bar.wait(std::move(tok));
    }
    o[2] = tile[(t + 5) % 96];
}

static void host_barrier(const std::vector<int>& in, std::vector<int>& want) {
    const int n = BAR_THREADS;
    for (int b = 0; b < BAR_BLOCKS; b++) {
        std::vector<int> v(in.begin() + b * n, in.begin() + (b + 1) * n);
        for (int r = 0; r < BAR_ROUNDS; r++) {
            std::vector<int> w(n);
            for (int t = 0; t < n; t++) w[t] = v[t] * 3 + v[(t + 33) % n];
            v = w;
        }
        std::vector<int> w(n);
        for (int t = 0; t < n; t++) w[t] = ((v[t] ^ 0x5a5a) & 0xffff) + v[n - 1 - t];
        v = w;
        for (int t = 0; t < n; t++) want[(b * n + t) * 3] = v[t];
        for (int r = 0; r < 2; r++) {
            std::vector<int> x(96);
            for (int t = 0; t < 96; t++) x[t] = v[t] + v[(t + 1) % 96] + r;
            for (int t = 0; t < 96; t++) v[t] = x[t];
        }
        for (int t = 0; t < n; t++) {
            want[(b * n + t) * 3 + 1] = t >= 96 ? -1 : v[t];
            want[(b * n + t) * 3 + 2] = t >= 96 ? -1 : ((t + 5) % 96) * 7;
        }
    }
}

static void run_barrier() {
    const int total = BAR_BLOCKS * BAR_THREADS;
    std::vector<int> in(total), out(total * 3), want(total * 3);
    for (int i = 0; i < total; i++) in[i] = (i * 131 + 17) % 1009 - 500;
    int *d_in, *d_out;
    OK(cudaMalloc(&d_in, total * sizeof(int)));
    OK(cudaMalloc(&d_out, out.size() * sizeof(int)));
    OK(cudaMemcpy(d_in, in.data(), total * sizeof(int), cudaMemcpyHostToDevice));
    barrier_kernel<<<BAR_BLOCKS, BAR_THREADS>>>(d_in, d_out);
    OK(cudaGetLastError());
    OK(cudaDeviceSynchronize());
    OK(cudaMemcpy(out.data(), d_out, out.size() * sizeof(int), cudaMemcpyDeviceToHost));
    host_barrier(in, want);
    int bad = 0;
    for (size_t i = 0; i < out.size(); i++) bad += out[i] != want[i];
    EXPECT(bad == 0);
    printf("barrier digest %016llx\n", (unsigned long long)digest(out.data(), out.size() * sizeof(int)));
    OK(cudaFree(d_in));
    OK(cudaFree(d_out));
}

// ---------------------------------------------------------------------------------------
// pipeline: a block of 64 threads reads `chunks` chunks of 64 floats (256 bytes) of its
// slice of the input into shared memory, four ways, and sums element-wise:
//   0: __pipeline_memcpy_async per thread, double-buffered, __pipeline_wait_prior(1)
//   1: cuda::memcpy_async(block, ..., cuda::pipeline<thread_scope_block>) with two stages
//   2: cuda::memcpy_async(block, ..., cuda::barrier) and arrive_and_wait
//   3: cooperative_groups::memcpy_async and cg::wait
constexpr int PIPE_THREADS = 64, PIPE_CHUNKS = 6, PIPE_BLOCKS = 2, PIPE_WAYS = 4;

__global__ void pipeline_kernel(const float* in, float* out) {
    __shared__ alignas(16) float buf[2][PIPE_THREADS];
    auto block = cg::this_thread_block();
    int t = threadIdx.x;
    const float* src = in + blockIdx.x * PIPE_CHUNKS * PIPE_THREADS;
    float* o = out + (blockIdx.x * PIPE_WAYS) * PIPE_THREADS;

    // 0: the cp.async primitives, one 4-byte copy per thread, two stages in flight
    float acc = 0.f;
    __pipeline_memcpy_async(&buf[0][t], &src[t], sizeof(float));
    __pipeline_commit();
    for (int c = 0; c < PIPE_CHUNKS; c++) {
        if (c + 1 < PIPE_CHUNKS)
            __pipeline_memcpy_async(&buf[(c + 1) % 2][t], &src[(c + 1) * PIPE_THREADS + t], sizeof(float));
        __pipeline_commit();  // an empty group at the end keeps the count simple
        __pipeline_wait_prior(1);
        __syncthreads();
        acc = acc * 0.5f + buf[c % 2][(t + c) % PIPE_THREADS];
        __syncthreads();
    }
    o[t] = acc;
    __syncthreads();

    // 1: a block-scoped two-stage pipeline; the block copies whole chunks together
    {
        __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, 2> state;
        auto pipe = cuda::make_pipeline(block, &state);
        float acc1 = 0.f;
        int fetched = 0;
        for (int c = 0; c < PIPE_CHUNKS; c++) {
            for (; fetched < PIPE_CHUNKS && fetched < c + 2; fetched++) {
                pipe.producer_acquire();
                cuda::memcpy_async(block, buf[fetched % 2], src + fetched * PIPE_THREADS,
                                   cuda::aligned_size_t<16>(PIPE_THREADS * sizeof(float)), pipe);
                pipe.producer_commit();
            }
            pipe.consumer_wait();
            acc1 = acc1 * 0.5f + buf[c % 2][(t + 2 * c) % PIPE_THREADS];
            pipe.consumer_release();
        }
        o[PIPE_THREADS + t] = acc1;
    }
    __syncthreads();

    // 2: copies that complete on a cuda::barrier
    {
        __shared__ cuda::barrier<cuda::thread_scope_block> bar;
        if (t == 0) init(&bar, block.size());
        block.sync();
        float acc2 = 0.f;
        for (int c = 0; c < PIPE_CHUNKS; c++) {
            cuda::memcpy_async(block, buf[0], src + c * PIPE_THREADS,
                               cuda::aligned_size_t<16>(PIPE_THREADS * sizeof(float)), bar);
            bar.arrive_and_wait();
            acc2 = acc2 * 0.5f + buf[0][(t + 3 * c) % PIPE_THREADS];
            bar.arrive_and_wait();  // all have read buf[0] before the next copy
        }
        o[2 * PIPE_THREADS + t] = acc2;
    }
    block.sync();

    // 3: cooperative groups
    float acc3 = 0.f;
    for (int c = 0; c < PIPE_CHUNKS; c++) {
        cg::memcpy_async(block, buf[1], src + c * PIPE_THREADS, sizeof(float) * PIPE_THREADS);
        cg::wait(block);
        acc3 = acc3 * 0.5f + buf[1][(t + 5 * c) % PIPE_THREADS];
        block.sync();
    }
    o[3 * PIPE_THREADS + t] = acc3;
}

static void run_pipeline() {
    const int n_in = PIPE_BLOCKS * PIPE_CHUNKS * PIPE_THREADS, n_out = PIPE_BLOCKS * PIPE_WAYS * PIPE_THREADS;
    std::vector<float> in(n_in), out(n_out);
    for (int i = 0; i < n_in; i++) in[i] = (float)((i * 29 + 3) % 97) * 0.25f - 7.0f;
    float *d_in, *d_out;
    OK(cudaMalloc(&d_in, n_in * sizeof(float)));
    OK(cudaMalloc(&d_out, n_out * sizeof(float)));
    OK(cudaMemcpy(d_in, in.data(), n_in * sizeof(float), cudaMemcpyHostToDevice));
    pipeline_kernel<<<PIPE_BLOCKS, PIPE_THREADS>>>(d_in, d_out);
    OK(cudaGetLastError());
    OK(cudaDeviceSynchronize());
    OK(cudaMemcpy(out.data(), d_out, n_out * sizeof(float), cudaMemcpyDeviceToHost));
    const int step[PIPE_WAYS] = {1, 2, 3, 5};
    int bad = 0;
    for (int b = 0; b < PIPE_BLOCKS; b++)
        for (int w = 0; w < PIPE_WAYS; w++)
            for (int t = 0; t < PIPE_THREADS; t++) {
                float acc = 0.f;
                for (int c = 0; c < PIPE_CHUNKS; c++)
                    acc = acc * 0.5f + in[(b * PIPE_CHUNKS + c) * PIPE_THREADS + (t + step[w] * c) % PIPE_THREADS];
                // the values are multiples of 1/4 halved at most 6 times: exact in float
                bad += out[(b * PIPE_WAYS + w) * PIPE_THREADS + t] != acc;
            }
    EXPECT(bad == 0);
    printf("pipeline digest %016llx\n", (unsigned long long)digest(out.data(), n_out * sizeof(float)));
    OK(cudaFree(d_in));
    OK(cudaFree(d_out));
}

// ---------------------------------------------------------------------------------------
// bulk (sm_90): thread 0 starts a cp.async.bulk of 2 KiB global -> shared that completes
// through the barrier's transaction count (memcpy_async_tx and barrier_arrive_tx), every
// other thread arrives; after the wait each thread doubles and offsets its part; a
// fence.proxy.async makes the shared writes visible to the async proxy, and thread 0 copies
// the tile back with a bulk copy shared -> global in a bulk group and waits for its reads.
constexpr int BULK_THREADS = 128, BULK_INTS = 512, BULK_BLOCKS = 2;

__global__ void bulk_kernel(const int* in, int* out, int* ran) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    using barrier = cuda::barrier<cuda::thread_scope_block>;
    __shared__ barrier bar;
    __shared__ alignas(128) int tile[BULK_INTS];
    int t = threadIdx.x;
    if (t == 0) {
        init(&bar, blockDim.x);
        cuda::device::experimental::fence_proxy_async_shared_cta();  // the init seen by the async proxy
    }
    __syncthreads();
    const int* src = in + blockIdx.x * BULK_INTS;
    barrier::arrival_token token;
    if (t == 0) {
        cuda::device::memcpy_async_tx(tile, src, cuda::aligned_size_t<16>(sizeof(tile)), bar);
        token = cuda::device::barrier_arrive_tx(bar, 1, sizeof(tile));
    } else {
        token = bar.arrive();
    }
    bar.wait(std::move(token));
    for (int i = t; i < BULK_INTS; i += blockDim.x) tile[i] = tile[i] * 2 + i;
    cuda::device::experimental::fence_proxy_async_shared_cta();
    __syncthreads();
    if (t == 0) {
        cuda::device::experimental::cp_async_bulk_shared_to_global(out + blockIdx.x * BULK_INTS, tile, sizeof(tile));
        cuda::device::experimental::cp_async_bulk_commit_group();
        cuda::device::experimental::cp_async_bulk_wait_group_read<0>();
        ran[blockIdx.x] = 1;
    }
#endif
}

static void run_bulk() {
    const int n = BULK_BLOCKS * BULK_INTS;
    std::vector<int> in(n), out(n);
    for (int i = 0; i < n; i++) in[i] = (i * 7919) % 10007 - 5000;
    int *d_in, *d_out, *d_ran;
    OK(cudaMalloc(&d_in, n * sizeof(int)));
    OK(cudaMalloc(&d_out, n * sizeof(int)));
    OK(cudaMalloc(&d_ran, BULK_BLOCKS * sizeof(int)));
    OK(cudaMemset(d_ran, 0, BULK_BLOCKS * sizeof(int)));
    OK(cudaMemset(d_out, 0, n * sizeof(int)));
    OK(cudaMemcpy(d_in, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    bulk_kernel<<<BULK_BLOCKS, BULK_THREADS>>>(d_in, d_out, d_ran);
    OK(cudaGetLastError());
    OK(cudaDeviceSynchronize());
    // the stream is idle: the bulk writes of every block have reached global memory
    OK(cudaMemcpy(out.data(), d_out, n * sizeof(int), cudaMemcpyDeviceToHost));
    int ran[BULK_BLOCKS];
    OK(cudaMemcpy(ran, d_ran, sizeof(ran), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += out[i] != in[i] * 2 + i % BULK_INTS;
    for (int b = 0; b < BULK_BLOCKS; b++) EXPECT(ran[b] == 1);  // built for sm_90 and run
    EXPECT(bad == 0);
    printf("bulk digest %016llx\n", (unsigned long long)digest(out.data(), n * sizeof(int)));
    OK(cudaFree(d_in));
    OK(cudaFree(d_out));
    OK(cudaFree(d_ran));
}

// ---------------------------------------------------------------------------------------
// probe: one thread drives an mbarrier with inline PTX and records what each step returns.
// What the manual fixes is checked here; the pending counts that mbarrier.pending_count
// reads from arrival states are printed (the state is opaque; the record from NVIDIA
// hardware says what it holds).
__device__ __forceinline__ uint32_t smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ uint64_t arrive(uint64_t* bar, uint32_t count) {
    uint64_t state;
    asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1], %2;" : "=l"(state) : "r"(smem(bar)), "r"(count) : "memory");
    return state;
}
__device__ __forceinline__ uint64_t arrive_nocomplete(uint64_t* bar, uint32_t count) {
    uint64_t state;
    asm volatile("mbarrier.arrive.noComplete.shared.b64 %0, [%1], %2;" : "=l"(state) : "r"(smem(bar)), "r"(count) : "memory");
    return state;
}
__device__ __forceinline__ int test_wait(uint64_t* bar, uint64_t state) {
    uint32_t done;
    asm volatile("{ .reg .pred p; mbarrier.test_wait.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(smem(bar)), "l"(state) : "memory");
    return done;
}
__device__ __forceinline__ int test_wait_parity(uint64_t* bar, uint32_t parity) {
    uint32_t done;
    asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(smem(bar)), "r"(parity) : "memory");
    return done;
}
__device__ __forceinline__ int try_wait(uint64_t* bar, uint64_t state) {
    uint32_t done;
    asm volatile("{ .reg .pred p; mbarrier.try_wait.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(smem(bar)), "l"(state) : "memory");
    return done;
}
__device__ __forceinline__ int try_wait_parity_hint(uint64_t* bar, uint32_t parity, uint32_t ns) {
    uint32_t done;
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(smem(bar)), "r"(parity), "r"(ns) : "memory");
    return done;
}
__device__ __forceinline__ uint32_t pending(uint64_t state) {
    uint32_t count;
    asm volatile("mbarrier.pending_count.b64 %0, %1;" : "=r"(count) : "l"(state));
    return count;
}

constexpr int PROBE_SLOTS = 32;

__global__ void probe_kernel(int* r, uint32_t* counts) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __shared__ uint64_t bar;
    if (threadIdx.x != 0) return;
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem(&bar)), "r"(4u) : "memory");
    // phase 0: expected 4 arrivals
    uint64_t s0 = arrive(&bar, 1);                 // 3 pending
    r[0] = test_wait(&bar, s0);                    // 0: phase 0 not complete
    r[1] = test_wait_parity(&bar, 0);              // 0
    uint64_t s1 = arrive_nocomplete(&bar, 2);      // 1 pending
    r[2] = try_wait(&bar, s1);                     // 0
    uint64_t s2 = arrive(&bar, 1);                 // phase 0 completes
    r[3] = test_wait(&bar, s0);                    // 1
    r[4] = test_wait(&bar, s2);                    // 1
    r[5] = test_wait_parity(&bar, 0);              // 1: the phase of parity 0 has completed
    r[6] = test_wait_parity(&bar, 1);              // 0: phase 1 is current
    counts[0] = pending(s0);
    counts[1] = pending(s1);
    counts[2] = pending(s2);
    // phase 1: expect 96 bytes of transactions, then complete them in two steps
    uint64_t s3;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;" : "=l"(s3) : "r"(smem(&bar)), "r"(96u) : "memory");
    counts[3] = pending(s3);
    uint64_t s4 = arrive(&bar, 3);                 // all arrivals in, 96 bytes outstanding
    r[7] = test_wait(&bar, s4);                    // 0: tx-count not zero
    asm volatile("mbarrier.complete_tx.shared::cta.b64 [%0], %1;" ::"r"(smem(&bar)), "r"(64u) : "memory");
    r[8] = test_wait_parity(&bar, 1);              // 0: 32 bytes left
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(smem(&bar)), "r"(16u) : "memory");
    asm volatile("mbarrier.complete_tx.shared::cta.b64 [%0], %1;" ::"r"(smem(&bar)), "r"(32u) : "memory");
    r[9] = test_wait_parity(&bar, 1);              // 0: 16 bytes left
    asm volatile("mbarrier.complete_tx.shared::cta.b64 [%0], %1;" ::"r"(smem(&bar)), "r"(16u) : "memory");
    r[10] = test_wait(&bar, s4);                   // 1: phase 1 complete
    r[11] = try_wait_parity_hint(&bar, 1, 1000u);  // 1
    counts[4] = pending(s4);
    // phase 2: arrive_drop lowers the expected count to 3 for the phases after it
    uint64_t s5;
    asm volatile("mbarrier.arrive_drop.shared::cta.b64 %0, [%1];" : "=l"(s5) : "r"(smem(&bar)) : "memory");
    counts[5] = pending(s5);
    uint64_t s6 = arrive(&bar, 3);                 // phase 2 completes (1 + 3 of 4)
    r[12] = test_wait(&bar, s6);                   // 1
    uint64_t s7 = arrive(&bar, 2);                 // phase 3 expects 3
    counts[6] = pending(s7);
    r[13] = test_wait(&bar, s7);                   // 0
    r[14] = test_wait_parity(&bar, 0);             // 1 (phase 2 done), phase 3 is current
    r[15] = test_wait_parity(&bar, 1);             // 0
    uint64_t s8 = arrive(&bar, 1);                 // phase 3 completes
    r[16] = test_wait(&bar, s7);                   // 1
    r[17] = test_wait(&bar, s8);                   // 1
    counts[7] = pending(s8);
    // arrive_drop with a count: expected becomes 1
    uint64_t s9;
    asm volatile("mbarrier.arrive_drop.shared::cta.b64 %0, [%1], %2;" : "=l"(s9) : "r"(smem(&bar)), "r"(2u) : "memory");
    r[18] = test_wait(&bar, s9);                   // 0: one arrival left in phase 4
    counts[8] = pending(s9);
    uint64_t s10 = arrive(&bar, 1);                // phase 4 completes
    r[19] = test_wait(&bar, s9);                   // 1
    uint64_t s11 = arrive(&bar, 1);                // phase 5 completes at once (expected 1)
    r[20] = test_wait(&bar, s11);                  // 1
    r[21] = test_wait_parity(&bar, 1);             // 1: phase 5 (odd) complete
    r[22] = test_wait_parity(&bar, 0);             // 0: phase 6 (even) is current
    counts[9] = pending(s10);
    counts[10] = pending(s11);
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(smem(&bar)) : "memory");
    // the memory is ordinary shared memory again: a new barrier of count 1 in the same place
    asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(smem(&bar)), "r"(1u) : "memory");
    uint64_t s12 = arrive(&bar, 1);
    r[23] = test_wait(&bar, s12);                  // 1
    counts[11] = pending(s12);
    r[24] = 1234;                                  // ran
#endif
}

static void run_probe() {
    int *d_r;
    uint32_t* d_counts;
    OK(cudaMalloc(&d_r, PROBE_SLOTS * sizeof(int)));
    OK(cudaMalloc(&d_counts, PROBE_SLOTS * sizeof(uint32_t)));
    OK(cudaMemset(d_r, 0xff, PROBE_SLOTS * sizeof(int)));
    OK(cudaMemset(d_counts, 0xff, PROBE_SLOTS * sizeof(uint32_t)));
    probe_kernel<<<1, 32>>>(d_r, d_counts);
    OK(cudaGetLastError());
    OK(cudaDeviceSynchronize());
    int r[PROBE_SLOTS];
    uint32_t counts[PROBE_SLOTS];
    OK(cudaMemcpy(r, d_r, sizeof(r), cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(counts, d_counts, sizeof(counts), cudaMemcpyDeviceToHost));
    const int want[25] = {0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1234};
    for (int i = 0; i < 25; i++) {
        if (r[i] != want[i] && failures++ < 10) fprintf(stderr, "probe r[%d] = %d, expected %d: FAILED\n", i, r[i], want[i]);
    }
    printf("probe waits");
    for (int i = 0; i < 24; i++) printf(" %d", r[i]);
    printf("\nprobe pending counts");
    for (int i = 0; i < 12; i++) printf(" %u", counts[i]);
    printf("\n");
    OK(cudaFree(d_r));
    OK(cudaFree(d_counts));
}

int main(int argc, char** argv) {
    struct { const char* name; void (*run)(); } sections[] = {
        {"barrier", run_barrier}, {"pipeline", run_pipeline}, {"bulk", run_bulk}, {"probe", run_probe}};
    bool any = false;
    for (auto& s : sections) {
        bool chosen = argc < 2;
        for (int i = 1; i < argc; i++) chosen |= strcmp(argv[i], s.name) == 0;
        if (!chosen) continue;
        any = true;
        int before = failures;
        s.run();
        printf("%s: %s\n", s.name, failures == before ? "PASSED" : "FAILED");
    }
    if (!any) {
        fprintf(stderr, "usage: %s [barrier] [pipeline] [bulk] [probe]\n", argv[0]);
        return 2;
    }
    if (failures) {
        printf("async barrier: FAILED\n");
        return 1;
    }
    printf("async barrier: PASSED\n");
    return 0;
}

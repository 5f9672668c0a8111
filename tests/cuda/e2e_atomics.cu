// Every CUDA atomic function on global and shared memory, in every integer/float width it
// exists for, plus the _block and _system scopes. Results are checked against exact host
// values: totals, and for exchanges the multiset of returned old values.
#include <algorithm>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

static int failures = 0;
#define EXPECT(cond)                                                                                   \
    do {                                                                                               \
        if (!(cond) && failures++ < 10) fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); \
    } while (0)
#define OK(call) EXPECT((call) == cudaSuccess)

constexpr int BLOCKS = 4, THREADS = 256, N = BLOCKS * THREADS;

struct Globals {
    int i_add, i_sub, i_exch, i_min, i_max, i_cas_add, i_and, i_or, i_xor;
    unsigned u_add, u_inc, u_dec, u_min, u_max, u_and, u_or, u_xor, u_exch;
    unsigned long long ull_add, ull_exch, ull_min, ull_max, ull_and, ull_or, ull_xor, ull_cas_max;
    long long ll_min, ll_max;
    float f_add, f_exch;
    double d_add;
    unsigned short us_cas_count;
    unsigned short pad;
    int block_scope, system_scope;
};

__device__ unsigned hash(unsigned t) { return t * 2654435761u; }

__global__ void global_atomics(Globals* g, int* exch_old, unsigned long long* ull_exch_old) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(&g->i_add, t);
    atomicSub(&g->i_sub, t);
    exch_old[t] = atomicExch(&g->i_exch, t);
    atomicMin(&g->i_min, t - 500);
    atomicMax(&g->i_max, t - 500);
    int old = g->i_cas_add, assumed;
    do {
        assumed = old;
        old = atomicCAS(&g->i_cas_add, assumed, assumed + 2 * t);
    } while (old != assumed);
    atomicAnd(&g->i_and, t < 20 ? ~(1 << t) : -1);
    if (t < 10 && t % 2 == 0) atomicOr(&g->i_or, 1 << t);
    atomicXor(&g->i_xor, (int)hash(t));

    atomicAdd(&g->u_add, hash(t) >> 8);
    atomicInc(&g->u_inc, 17u);
    atomicDec(&g->u_dec, 9u);
    atomicMin(&g->u_min, hash(t));
    atomicMax(&g->u_max, hash(t));
    atomicAnd(&g->u_and, ~(1u << (t % 37 % 32)) | (t % 37 >= 32 ? ~0u : 0u));
    atomicOr(&g->u_or, 1u << (t % 29));
    atomicXor(&g->u_xor, hash(t) ^ t);
    atomicExch(&g->u_exch, 12345u);

    atomicAdd(&g->ull_add, (unsigned long long)t * 1000000007ull);
    ull_exch_old[t] = atomicExch(&g->ull_exch, (unsigned long long)t << 33);
    atomicMin(&g->ull_min, (unsigned long long)hash(t) << 20);
    atomicMax(&g->ull_max, (unsigned long long)hash(t) << 20);
    atomicAnd(&g->ull_and, ~(1ull << (t % 64)) | (t % 3 ? ~0ull : 0ull));
    atomicOr(&g->ull_or, 1ull << (t % 61));
    atomicXor(&g->ull_xor, (unsigned long long)hash(t) << 17);
    unsigned long long mine = ((unsigned long long)hash(t) << 24) | t, cur = g->ull_cas_max;
    while (cur < mine) {
        unsigned long long seen = atomicCAS(&g->ull_cas_max, cur, mine);
        if (seen == cur) break;
        cur = seen;
    }
    atomicMin(&g->ll_min, (long long)t * -3000000000ll + 7);
    atomicMax(&g->ll_max, (long long)(t - 700) * 5000000000ll);

    atomicAdd(&g->f_add, 0.5f);
    atomicExch(&g->f_exch, 2.5f);
    atomicAdd(&g->d_add, t * 0.25);
    if (t % 5 == 0) {
        unsigned short seen = g->us_cas_count, want;
        do {
            want = seen;
            seen = atomicCAS(&g->us_cas_count, want, (unsigned short)(want + 1));
        } while (seen != want);
    }
    atomicAdd_block(&g->block_scope, 1);
    atomicAdd_system(&g->system_scope, 3);
}

// The same operations on shared memory; each block reports its totals.
__global__ void shared_atomics(int* out) {
    __shared__ int s_add, s_max, s_min, s_cas, s_exch, s_or;
    __shared__ unsigned s_inc;
    __shared__ float s_fadd;
    if (threadIdx.x == 0) {
        s_add = 0; s_max = -1000000; s_min = 1000000; s_cas = 0; s_exch = -1; s_or = 0; s_inc = 0; s_fadd = 0;
    }
    __syncthreads();
    int t = threadIdx.x, v = (t * 37 + blockIdx.x * 11) % 1000;
    atomicAdd(&s_add, v);
    atomicMax(&s_max, v);
    atomicMin(&s_min, v);
    atomicExch(&s_exch, t);
    atomicOr(&s_or, 1 << (t % 31));
    atomicInc(&s_inc, 100u);
    atomicAdd(&s_fadd, 0.25f);
    int old = s_cas, assumed;
    do {
        assumed = old;
        old = atomicCAS(&s_cas, assumed, assumed ^ (t + 1));
    } while (old != assumed);
    __syncthreads();
    if (threadIdx.x == 0) {
        int* o = out + blockIdx.x * 8;
        o[0] = s_add; o[1] = s_max; o[2] = s_min; o[3] = s_exch; o[4] = s_or; o[5] = (int)s_inc;
        o[6] = (int)(s_fadd * 4); o[7] = s_cas;
    }
}

int main() {
    Globals init = {};
    init.i_exch = -1; init.i_min = 1 << 30; init.i_max = -(1 << 30); init.i_and = -1;
    init.u_dec = 0; init.u_min = ~0u; init.u_and = ~0u; init.u_exch = 7;
    init.ull_exch = ~0ull; init.ull_min = ~0ull; init.ull_and = ~0ull;
    init.ll_min = 1ll << 62; init.ll_max = -(1ll << 62);
    init.f_exch = -1.0f;
    Globals* dg;
    int* dold;
    unsigned long long* dold64;
    OK(cudaMalloc(&dg, sizeof(Globals)));
    OK(cudaMalloc(&dold, N * sizeof(int)));
    OK(cudaMalloc(&dold64, N * sizeof(unsigned long long)));
    OK(cudaMemcpy(dg, &init, sizeof init, cudaMemcpyHostToDevice));
    global_atomics<<<BLOCKS, THREADS>>>(dg, dold, dold64);
    OK(cudaGetLastError());
    Globals g;
    std::vector<int> old(N);
    std::vector<unsigned long long> old64(N);
    OK(cudaMemcpy(&g, dg, sizeof g, cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(old.data(), dold, N * sizeof(int), cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(old64.data(), dold64, N * sizeof(unsigned long long), cudaMemcpyDeviceToHost));

    // host references
    long long sum = 0;
    int ixor = 0, iand = -1, ior = 0;
    unsigned uadd = 0, umin = ~0u, umax = 0, uand = ~0u, uor = 0, uxor = 0;
    unsigned long long ulladd = 0, ullmin = ~0ull, ullmax = 0, ulland = ~0ull, ullor = 0, ullxor = 0, ullcas = 0;
    long long llmin = 1ll << 62, llmax = -(1ll << 62);
    double dadd = 0;
    int multiple_of_5 = 0;
    for (int t = 0; t < N; t++) {
        unsigned h = t * 2654435761u;
        sum += t;
        ixor ^= (int)h;
        if (t < 20) iand &= ~(1 << t);
        if (t < 10 && t % 2 == 0) ior |= 1 << t;
        uadd += h >> 8;
        umin = std::min(umin, h);
        umax = std::max(umax, h);
        uand &= ~(1u << (t % 37 % 32)) | (t % 37 >= 32 ? ~0u : 0u);
        uor |= 1u << (t % 29);
        uxor ^= h ^ t;
        ulladd += (unsigned long long)t * 1000000007ull;
        ullmin = std::min(ullmin, (unsigned long long)h << 20);
        ullmax = std::max(ullmax, (unsigned long long)h << 20);
        ulland &= ~(1ull << (t % 64)) | (t % 3 ? ~0ull : 0ull);
        ullor |= 1ull << (t % 61);
        ullxor ^= (unsigned long long)h << 17;
        ullcas = std::max(ullcas, ((unsigned long long)h << 24) | t);
        llmin = std::min(llmin, (long long)t * -3000000000ll + 7);
        llmax = std::max(llmax, (long long)(t - 700) * 5000000000ll);
        dadd += t * 0.25;
        multiple_of_5 += t % 5 == 0;
    }
    EXPECT(g.i_add == sum && g.i_sub == -sum && g.i_cas_add == 2 * sum);
    EXPECT(g.i_min == -500 && g.i_max == N - 1 - 500);
    EXPECT(g.i_and == iand && g.i_or == ior && g.i_xor == ixor);
    EXPECT(g.u_add == uadd && g.u_min == umin && g.u_max == umax);
    EXPECT(g.u_inc == N % 18);            // wraps to 0 after 17
    EXPECT(g.u_dec == (10 - N % 10) % 10);  // 0 -> 9 -> 8 ... -> 0
    EXPECT(g.u_and == uand && g.u_or == uor && g.u_xor == uxor && g.u_exch == 12345u);
    EXPECT(g.ull_add == ulladd && g.ull_min == ullmin && g.ull_max == ullmax);
    EXPECT(g.ull_and == ulland && g.ull_or == ullor && g.ull_xor == ullxor && g.ull_cas_max == ullcas);
    EXPECT(g.ll_min == llmin && g.ll_max == llmax);
    EXPECT(g.f_add == N * 0.5f && g.f_exch == 2.5f && g.d_add == dadd);
    EXPECT(g.us_cas_count == multiple_of_5);
    EXPECT(g.block_scope == N && g.system_scope == 3 * N);
    // exchanges: the old values and the final value are exactly the initial value and every t
    old.push_back(g.i_exch);
    std::sort(old.begin(), old.end());
    for (int i = 0; i <= N; i++) EXPECT(old[i] == i - 1);
    old64.push_back(g.ull_exch);
    std::sort(old64.begin(), old64.end());
    for (int i = 0; i < N; i++) EXPECT(old64[i] == (unsigned long long)i << 33);
    EXPECT(old64[N] == ~0ull);

    int* dshared;
    OK(cudaMalloc(&dshared, BLOCKS * 8 * sizeof(int)));
    shared_atomics<<<BLOCKS, THREADS>>>(dshared);
    OK(cudaGetLastError());
    std::vector<int> s(BLOCKS * 8);
    OK(cudaMemcpy(s.data(), dshared, s.size() * sizeof(int), cudaMemcpyDeviceToHost));
    for (int b = 0; b < BLOCKS; b++) {
        int add = 0, mx = -1000000, mn = 1000000, orv = 0, cas = 0;
        for (int t = 0; t < THREADS; t++) {
            int v = (t * 37 + b * 11) % 1000;
            add += v; mx = std::max(mx, v); mn = std::min(mn, v);
            orv |= 1 << (t % 31);
            cas ^= t + 1;
        }
        const int* o = &s[b * 8];
        EXPECT(o[0] == add && o[1] == mx && o[2] == mn && o[3] >= 0 && o[3] < THREADS && o[4] == orv);
        EXPECT(o[5] == THREADS % 101 && o[6] == THREADS && o[7] == cas);
    }
    OK(cudaFree(dg));
    OK(cudaFree(dold));
    OK(cudaFree(dold64));
    OK(cudaFree(dshared));
    printf("atomics: %s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}

// PTX front-end corpus: half, bfloat16, double, math functions, integer intrinsics,
// cooperative groups, vector types and cvt forms. Compiled to PTX at test time; never run.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

__global__ void halves(__half* h, __nv_bfloat16* b, __half2* h2, __nv_bfloat162* b2, float* f) {
    int i = threadIdx.x;
    __half x = h[i], y = h[i + 1];
    h[i] = __hfma(x, y, __float2half(1.5f)) + hsqrt(x) + hexp(y) + __hmax(x, y) + __habs(x);
    __nv_bfloat16 p = b[i], q = b[i + 1];
#if __CUDA_ARCH__ >= 800
    b[i] = __hfma(p, q, __float2bfloat16(0.5f)) + __hmin(p, q) + hrsqrt(p);
#else
    (void)q;
#endif
    h2[i] = __hmul2(h2[i], h2[i + 1]) + __hadd2_sat(h2[i], h2[i]);
#if __CUDA_ARCH__ >= 800
    b2[i] = __hfma2(b2[i], b2[i + 1], b2[i]);
#endif
    f[i] = __half2float(x) + __bfloat162float(p) + (__hlt(x, y) ? 1.f : 0.f) + __low2float(h2[i]);
    atomicAdd(&h[0], x);
#if __CUDA_ARCH__ >= 800
    atomicAdd(&b[0], p);
#endif
    atomicAdd(&h2[0], h2[i]);
}

__global__ void doubles(double* d, float* f, long long* l, unsigned long long* u, int* s) {
    int i = threadIdx.x;
    double x = d[i];
    d[i] = sqrt(x) + sin(x) + exp(x) + log(x) + fma(x, x, 1.0) + rint(x) + floor(x) + fabs(x) + pow(x, 1.5) + 1.0 / x;
    float y = f[i];
    f[i] = sqrtf(y) + __sinf(y) + __cosf(y) + __expf(y) + __logf(y) + rsqrtf(y) + __fdividef(y, 3.0f) + fminf(y, 2.f)
         + truncf(y) + ceilf(y) + roundf(y) + __saturatef(y) + __frcp_rn(y) + __fsqrt_rd(y) + tanhf(y) + erff(y) + copysignf(y, -1.f);
    l[i] = (long long)x + __double2ll_rz(x) + llrint(x);
    u[i] = (unsigned long long)y + __float2ull_ru(y) + __double_as_longlong(x);
    s[i] = __float2int_rn(y) + __double2int_rd(x) + __float_as_int(y) + isnan(y) + isinf(x) + signbit(x) + __double2hiint(x);
    f[i + 1] = (float)x + __int2float_rz(s[i]) + __ull2float_rd(u[i]) + (float)l[i];
    d[i + 1] = (double)s[i] + (double)u[i] + __hiloint2double(s[i], s[i + 1]);
}

__global__ void int_intrinsics(unsigned* u, int* s, unsigned long long* l) {
    int i = threadIdx.x;
    unsigned a = u[i], b = u[i + 1];
    u[i] = __brev(a) + __byte_perm(a, b, 0x3210) + __funnelshift_l(a, b, 5) + __funnelshift_rc(a, b, 7) + __umulhi(a, b)
         + __usad(a, b, 3) + __umul24(a, b) + __popcll(l[i]) + __clzll(l[i]) + __ffsll(l[i]) + __uhadd(a, b) + __urhadd(a, b)
         + __vadd4(a, b) + __vabsdiffu4(a, b) + __dp4a(a, b, 1u) + __fns(a, 3, 1);
    s[i] = __mulhi(s[i], s[i + 1]) + __mul24(s[i], 3) + abs(s[i]) + min(s[i], 3) + max(s[i], -3) + s[i] / 7 + s[i] % 5;
    l[i] = __brevll(l[i]) + __umul64hi(l[i], l[i + 1]) + l[i] / l[i + 1] + (l[i] << (a & 63)) + ((long long)l[i] >> 3);
    short sh = (short)s[i]; unsigned char c = (unsigned char)a;
    s[i + 1] = sh * c + (signed char)b;
}

__global__ void coop(int* data, int n) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    cg::thread_block_tile<8> tile8 = cg::tiled_partition<8>(block);
    int v = data[block.thread_rank()];
    v = cg::reduce(warp, v, cg::plus<int>());
    v += tile8.shfl_down(v, 1) + warp.ballot(v > 0) + tile8.any(v > 3);
    cg::coalesced_group active = cg::coalesced_threads();
    if (v > 2) v += active.size() + cg::coalesced_threads().thread_rank();
    block.sync();
    warp.sync();
    cg::grid_group grid = cg::this_grid();
    if (grid.thread_rank() < n) data[grid.thread_rank()] = v;
    grid.sync();
    data[0] += grid.size();
}

struct __align__(16) Particle { float x, y, z; int id; };
__global__ void vectors(float4* f4, double2* d2, int4* i4, Particle* p, char4* c4, short2* s2) {
    int i = threadIdx.x;
    float4 a = f4[i]; double2 b = d2[i]; int4 c = i4[i]; Particle q = p[i];
    f4[i] = make_float4(a.x + b.x, a.y + b.y, a.z + c.z, a.w + q.x);
    d2[i] = make_double2(b.y, b.x);
    i4[i] = make_int4(c.w, c.z, q.id, c.x);
    p[i] = Particle{q.z, q.y, q.x, q.id + 1};
    c4[i] = make_char4(c4[i].w, c4[i].z, c4[i].y, 1);
    s2[i] = make_short2(s2[i].y, 2);
    float ld = __ldg(&a.x) + __ldcs(&f4[i + 1].x) + __ldca(&f4[i + 2].y) + __ldlu(&f4[i + 3].z) + __ldcv(&f4[i + 4].w);
    __stcs(&f4[i + 5].x, ld); __stwt(&f4[i + 6].y, ld); __stcg(&f4[i + 7].z, ld);
}

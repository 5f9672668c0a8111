// How an NVIDIA GPU picks the mipmap level, for golden data (tests/hardware/README.md).
// Every level k of the mip chains below holds the value k in all its texels, so a fetch with
// linear filtering between levels returns the LOD it used (clamped to the levels, with the
// blend weight's precision) and one with point filtering between levels returns the level it
// chose. Within a level the fetch is point sampled; the coordinates never matter.
// Output, one line per fetch:  <case> <inputs as hex floats ...> -> <result bits>
//   lod.<P|L>[.bias]      tex2DLod at lod                          (64x32 chain, 7 levels)
//   grad2.<P|L>.a<N>      tex2DGrad, dx = (dx0, dx1), dy = (dy0, dy1) in normalised coordinates,
//                         maxAnisotropy N                          (64x32 chain)
//   grad1.<P|L>           tex1DGrad, dx, dy                       (64 chain, 7 levels)
//   grad3.<P|L>           tex3DGrad, dx = (dx0, dx1, dx2), dy = ... (16x8x4 chain, 5 levels)
//   unnorm.<P|L>          tex2DGrad with unnormalised coordinates, gradients in texels
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#define OK(call)                                                                                    \
    do {                                                                                            \
        cudaError_t e_ = (call);                                                                    \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));  \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

struct Q {
    float c[3], lod, dx[3], dy[3];
};

__global__ void fetch(cudaTextureObject_t t, int dims, int mode, const Q *q, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Q p = q[i];
    float r;
    if (mode == 0)
        r = tex2DLod<float>(t, p.c[0], p.c[1], p.lod);
    else if (dims == 1)
        r = tex1DGrad<float>(t, p.c[0], p.dx[0], p.dy[0]);
    else if (dims == 2)
        r = tex2DGrad<float>(t, p.c[0], p.c[1], make_float2(p.dx[0], p.dx[1]), make_float2(p.dy[0], p.dy[1]));
    else
        r = tex3DGrad<float>(t, p.c[0], p.c[1], p.c[2], make_float4(p.dx[0], p.dx[1], p.dx[2], 0),
                             make_float4(p.dy[0], p.dy[1], p.dy[2], 0));
    out[i] = r;
}

static unsigned bits(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}

// a mipmapped float array of the given extent whose level k holds k everywhere
static cudaMipmappedArray_t chain(int w, int h, int d, int *levels) {
    cudaChannelFormatDesc fmt = cudaCreateChannelDesc<float>();
    cudaMipmappedArray_t mip;
    int n = 1, m = w > h ? w : h;
    m = m > d ? m : d;
    while (m >> n) n++;
    *levels = n;
    OK(cudaMallocMipmappedArray(&mip, &fmt, make_cudaExtent(w, h, d), n));
    for (int k = 0; k < n; k++) {
        cudaArray_t a;
        OK(cudaGetMipmappedArrayLevel(&a, mip, k));
        int lw = w >> k ? w >> k : 1, lh = h ? (h >> k ? h >> k : 1) : 0, ld = d ? (d >> k ? d >> k : 1) : 0;
        size_t count = (size_t)lw * (lh ? lh : 1) * (ld ? ld : 1);
        std::vector<float> v(count, (float)k);
        cudaMemcpy3DParms p = {};
        p.srcPtr = make_cudaPitchedPtr(v.data(), lw * sizeof(float), lw, lh ? lh : 1);
        p.dstArray = a;
        p.extent = make_cudaExtent(lw, lh ? lh : 1, ld ? ld : 1);
        p.kind = cudaMemcpyHostToDevice;
        OK(cudaMemcpy3D(&p));
    }
    return mip;
}

static void run(const char *name, cudaMipmappedArray_t mip, int levels, int dims, int mode, bool linear, float bias,
                int aniso, bool normalized, const std::vector<Q> &qs) {
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeMipmappedArray;
    res.res.mipmap.mipmap = mip;
    cudaTextureDesc td = {};
    for (int a = 0; a < 3; a++) td.addressMode[a] = cudaAddressModeClamp;
    td.filterMode = cudaFilterModePoint;
    td.readMode = cudaReadModeElementType;
    td.normalizedCoords = normalized;
    td.mipmapFilterMode = linear ? cudaFilterModeLinear : cudaFilterModePoint;
    td.mipmapLevelBias = bias;
    td.minMipmapLevelClamp = 0;
    td.maxMipmapLevelClamp = (float)(levels - 1);
    td.maxAnisotropy = aniso;
    cudaTextureObject_t t;
    OK(cudaCreateTextureObject(&t, &res, &td, nullptr));
    int n = (int)qs.size();
    Q *dq;
    float *dout;
    OK(cudaMalloc(&dq, n * sizeof(Q)));
    OK(cudaMalloc(&dout, n * sizeof(float)));
    OK(cudaMemcpy(dq, qs.data(), n * sizeof(Q), cudaMemcpyHostToDevice));
    fetch<<<(n + 127) / 128, 128>>>(t, dims, mode, dq, dout, n);
    OK(cudaGetLastError());
    std::vector<float> out(n);
    OK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        const Q &p = qs[i];
        printf("%s", name);
        if (mode == 0) printf(" %a", p.lod);
        for (int a = 0; mode && a < dims; a++) printf(" %a", p.dx[a]);
        for (int a = 0; mode && a < dims; a++) printf(" %a", p.dy[a]);
        printf(" -> %08x\n", bits(out[i]));
    }
    OK(cudaDestroyTextureObject(t));
    OK(cudaFree(dq));
    OK(cudaFree(dout));
}

static unsigned seed = 2026;
static float rnd() {
    seed = seed * 1664525u + 1013904223u;
    return (seed >> 8) / 16777216.0f;
}

// gradients of random direction with lengths 2^-1.5 .. 2^7 texels of level 0 (extent e per axis)
static std::vector<Q> gradients(int dims, const int *e, int n, float scale_to) {
    std::vector<Q> qs;
    for (int i = 0; i < n; i++) {
        Q q = {};
        for (int a = 0; a < 3; a++) q.c[a] = 0.5f;
        float s = exp2f(rnd() * 8.5f - 1.5f);
        float s2 = i % 3 == 0 ? s : exp2f(rnd() * 8.5f - 1.5f);  // a third isotropic-ish
        for (int a = 0; a < dims; a++) {
            q.dx[a] = s * (rnd() - 0.5f) * 2 / (scale_to ? scale_to : e[a]);
            q.dy[a] = s2 * (rnd() - 0.5f) * 2 / (scale_to ? scale_to : e[a]);
        }
        qs.push_back(q);
    }
    // axis-aligned gradients of exact lengths: 2^(k/8) texels along one axis, 1 along the other
    for (int k = -8; k <= 56; k++)
        for (int axis = 0; axis < dims; axis++) {
            Q q = {};
            for (int a = 0; a < 3; a++) q.c[a] = 0.5f;
            for (int a = 0; a < dims; a++) {
                float texel = 1.0f / (scale_to ? scale_to : e[a]);
                q.dx[a] = a == axis ? exp2f(k / 8.0f) * texel : 0;
                q.dy[a] = a == (axis + 1) % dims ? texel : 0;
            }
            qs.push_back(q);
        }
    return qs;
}

int main() {
    int l2, l1, l3;
    const int e2[3] = {64, 32, 1}, e1[3] = {64, 1, 1}, e3[3] = {16, 8, 4};
    cudaMipmappedArray_t m2 = chain(64, 32, 0, &l2), m1 = chain(64, 0, 0, &l1), m3 = chain(16, 8, 4, &l3);

    std::vector<Q> lods;
    for (int i = -64; i <= 512; i++) {
        Q q = {};
        q.c[0] = q.c[1] = 0.5f;
        q.lod = i / 64.0f;
        lods.push_back(q);
    }
    for (int i = 0; i < 256; i++) {  // between the 1/64 steps: the LOD's fractional precision
        Q q = {};
        q.c[0] = q.c[1] = 0.5f;
        q.lod = 1.0f + i / 4096.0f;
        lods.push_back(q);
    }
    for (int linear = 0; linear < 2; linear++) {
        const char *f = linear ? "L" : "P";
        char name[64];
        snprintf(name, sizeof name, "lod.%s", f);
        run(name, m2, l2, 2, 0, linear, 0, 0, true, lods);
        snprintf(name, sizeof name, "lod.%s.bias0.75", f);
        run(name, m2, l2, 2, 0, linear, 0.75f, 0, true, lods);
        for (int aniso : {0, 1, 2, 4, 16}) {
            snprintf(name, sizeof name, "grad2.%s.a%d", f, aniso);
            run(name, m2, l2, 2, 1, linear, 0, aniso, true, gradients(2, e2, 600, 0));
        }
        snprintf(name, sizeof name, "grad1.%s", f);
        run(name, m1, l1, 1, 1, linear, 0, 0, true, gradients(1, e1, 300, 0));
        snprintf(name, sizeof name, "grad3.%s", f);
        run(name, m3, l3, 3, 1, linear, 0, 0, true, gradients(3, e3, 400, 0));
    }
    std::vector<Q> un = gradients(2, e2, 200, 1.0f);  // gradients in texels (last: may be refused)
    for (Q &q : un) q.c[0] = 10.5f, q.c[1] = 5.5f;
    run("unnorm.P", m2, l2, 2, 1, false, 0, 0, false, un);
    run("unnorm.L", m2, l2, 2, 1, true, 0, 0, false, un);
    OK(cudaFreeMipmappedArray(m1));
    OK(cudaFreeMipmappedArray(m2));
    OK(cudaFreeMipmappedArray(m3));
    return 0;
}

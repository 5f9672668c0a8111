// What LOD plain tex2D (no .level, no .grad) uses on a mipmapped texture in a kernel, for golden
// data (tests/hardware/README.md). As in mipmap_probe.cu, level k of the 64x32 chain holds k, so
// with linear filtering between levels a fetch returns the LOD it used. Each group of four lanes
// (a 2x2 "quad": lane bit 0 is x, bit 1 is y) samples at u = 0.5 + x*a + y*b, v = 0.5 + x*c + y*d
// (normalised), so if the GPU derives an implicit gradient from neighbouring lanes, (a, c) and
// (b, d) are the gradients it sees. Output per lane: implicit.<P|L>.bias<B>.min<C> a b c d lane -> bits (C: minMipmapLevelClamp).
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

__global__ void fetch(cudaTextureObject_t t, const float2 *uv, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<float>(t, uv[i].x, uv[i].y);
}

static unsigned bits(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}

static unsigned seed = 7;
static float rnd() {
    seed = seed * 1664525u + 1013904223u;
    return (seed >> 8) / 16777216.0f;
}

int main() {
    const int W = 64, H = 32, LEVELS = 7;
    cudaChannelFormatDesc fmt = cudaCreateChannelDesc<float>();
    cudaMipmappedArray_t mip;
    OK(cudaMallocMipmappedArray(&mip, &fmt, make_cudaExtent(W, H, 0), LEVELS));
    for (int k = 0; k < LEVELS; k++) {
        cudaArray_t a;
        OK(cudaGetMipmappedArrayLevel(&a, mip, k));
        int w = W >> k ? W >> k : 1, h = H >> k ? H >> k : 1;
        std::vector<float> v(w * h, (float)k);
        OK(cudaMemcpy2DToArray(a, 0, 0, v.data(), w * 4, w * 4, h, cudaMemcpyHostToDevice));
    }
    // quads: zero gradients, axis-aligned ones of 2^(j/4) texels, then random Jacobians
    std::vector<float> jac;
    for (int j = 0; j < 4; j++) jac.insert(jac.end(), {0, 0, 0, 0});
    for (int j = -4; j <= 28; j++) {
        float s = exp2f(j / 4.0f);
        jac.insert(jac.end(), {s / W, 0, 0, s / H});
        jac.insert(jac.end(), {s / W, 0, 0, 0});
        jac.insert(jac.end(), {0, 0, 0, s / H});
    }
    for (int j = 0; j < 200; j++) {
        float s = exp2f(rnd() * 8 - 1.5f);
        jac.insert(jac.end(), {s * (rnd() - 0.5f) * 2 / W, s * (rnd() - 0.5f) * 2 / W, s * (rnd() - 0.5f) * 2 / H,
                               s * (rnd() - 0.5f) * 2 / H});
    }
    int quads = (int)jac.size() / 4, n = quads * 4;
    std::vector<float2> uv(n);
    for (int q = 0; q < quads; q++)
        for (int l = 0; l < 4; l++) {
            int x = l & 1, y = l >> 1;
            uv[4 * q + l] = make_float2(0.5f + x * jac[4 * q] + y * jac[4 * q + 1], 0.5f + x * jac[4 * q + 2] + y * jac[4 * q + 3]);
        }
    float2 *duv;
    float *dout;
    OK(cudaMalloc(&duv, n * sizeof(float2)));
    OK(cudaMalloc(&dout, n * sizeof(float)));
    OK(cudaMemcpy(duv, uv.data(), n * sizeof(float2), cudaMemcpyHostToDevice));
    const float settings[4][2] = {{0, 0}, {0.75f, 0}, {0, 0.5f}, {-0.375f, 1.0f}};  // bias, minMipmapLevelClamp
    for (int linear = 0; linear < 2; linear++)
        for (const auto &setting : settings) {
            float bias = setting[0], low = setting[1];
            cudaResourceDesc res = {};
            res.resType = cudaResourceTypeMipmappedArray;
            res.res.mipmap.mipmap = mip;
            cudaTextureDesc td = {};
            td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
            td.filterMode = cudaFilterModePoint;
            td.normalizedCoords = 1;
            td.mipmapFilterMode = linear ? cudaFilterModeLinear : cudaFilterModePoint;
            td.mipmapLevelBias = bias;
            td.minMipmapLevelClamp = low;
            td.maxMipmapLevelClamp = LEVELS - 1;
            cudaTextureObject_t t;
            OK(cudaCreateTextureObject(&t, &res, &td, nullptr));
            fetch<<<(n + 127) / 128, 128>>>(t, duv, dout, n);
            OK(cudaGetLastError());
            std::vector<float> out(n);
            OK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
            for (int i = 0; i < n; i++) {
                const float *J = &jac[4 * (i / 4)];
                printf("implicit.%s.bias%g.min%g %a %a %a %a %d -> %08x\n", linear ? "L" : "P", bias, low, J[0], J[1], J[2],
                       J[3], i % 4, bits(out[i]));
            }
            OK(cudaDestroyTextureObject(t));
        }
    OK(cudaFree(duv));
    OK(cudaFree(dout));
    OK(cudaFreeMipmappedArray(mip));
    return 0;
}

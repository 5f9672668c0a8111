// How tex2DLod's LOD, the texture's mipmapLevelBias and its min/max level clamps combine, for
// golden data (tests/hardware/README.md). Level k of the 64x32 chain holds k, and mip filtering
// is linear, so a fetch returns the LOD it used. The lods are off the 1/256 grid by a fraction of
// a step either way, so that the output shows how they are cut to 8 fractional bits.
// Output: clamp.bias<B>.min<L>.max<H> lod -> bits.
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

__global__ void fetch(cudaTextureObject_t t, const float *lod, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2DLod<float>(t, 0.5f, 0.5f, lod[i]);
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
    std::vector<float> lods;
    // steps of 1/64, each nudged by a fraction of 1/256 either way: how the LOD is cut to 8 bits
    for (int i = -96; i <= 448; i++) lods.push_back(i / 64.0f + ((i % 5 + 5) % 5 - 2) * 0.37f / 256);
    int n = (int)lods.size();
    float *dl, *dout;
    OK(cudaMalloc(&dl, n * sizeof(float)));
    OK(cudaMalloc(&dout, n * sizeof(float)));
    OK(cudaMemcpy(dl, lods.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    const float settings[][3] = {{0.75f, 0.5f, 4}, {0, 0.5f, 4}, {0.75f, 0.25f, 6}, {-0.375f, 1, 3}, {0.3f, 1.5f, 2.5f},
                                 {-1.5f, 0, 6}, {2.25f, 0, 5}};  // bias, min, max
    for (const auto &s : settings) {
        cudaResourceDesc res = {};
        res.resType = cudaResourceTypeMipmappedArray;
        res.res.mipmap.mipmap = mip;
        cudaTextureDesc td = {};
        td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
        td.filterMode = cudaFilterModePoint;
        td.normalizedCoords = 1;
        td.mipmapFilterMode = cudaFilterModeLinear;
        td.mipmapLevelBias = s[0];
        td.minMipmapLevelClamp = s[1];
        td.maxMipmapLevelClamp = s[2];
        cudaTextureObject_t t;
        OK(cudaCreateTextureObject(&t, &res, &td, nullptr));
        fetch<<<(n + 127) / 128, 128>>>(t, dl, dout, n);
        OK(cudaGetLastError());
        std::vector<float> out(n);
        OK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++) {
            unsigned b;
            memcpy(&b, &out[i], 4);
            printf("clamp.bias%g.min%g.max%g %a -> %08x\n", s[0], s[1], s[2], lods[i], b);
        }
        OK(cudaDestroyTextureObject(t));
    }
    OK(cudaFree(dl));
    OK(cudaFree(dout));
    OK(cudaFreeMipmappedArray(mip));
    return 0;
}

// Texture and surface objects of the kinds the AMDGPU target samples in software (docs/amdgpu.md):
// tex on 1-D/2-D/3-D and layered CUDA arrays, pitch-linear and linear memory, point and linear
// filtering, every address mode, normalized coordinates, element and normalized-float reads, and
// surf*read/surf*write with the three boundary modes. Expected values come from the programming
// guide's rules, at coordinates where they need no rounding detail: texel centres, and filter
// weights that are exact multiples of 1/256.
#include <cstdio>
#include <cstring>
#include <vector>

static int failures = 0;
#define OK(call)                                                                           \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)
#define EXPECT(cond, ...)                                                                  \
    do {                                                                                   \
        if (!(cond) && failures++ < 10) {                                                  \
            fprintf(stderr, "%s:%d: FAILED %s: ", __FILE__, __LINE__, #cond);            \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
        }                                                                                  \
    } while (0)

const int W = 8, H = 6, D = 3, L = 4, N = 16 * 12;

static int wrap(int i, int n) { return ((i % n) + n) % n; }
static int mirror(int i, int n) { int m = wrap(i, 2 * n); return m >= n ? 2 * n - 1 - m : m; }
static int clampi(int i, int n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

static cudaTextureObject_t texture(const cudaResourceDesc& r, cudaTextureAddressMode mode, bool linear, bool normalized,
                                   cudaTextureReadMode read = cudaReadModeElementType) {
    cudaTextureDesc t;
    memset(&t, 0, sizeof t);
    t.addressMode[0] = t.addressMode[1] = t.addressMode[2] = mode;
    t.filterMode = linear ? cudaFilterModeLinear : cudaFilterModePoint;
    t.normalizedCoords = normalized;
    t.readMode = read;
    cudaTextureObject_t obj = 0;
    OK(cudaCreateTextureObject(&obj, &r, &t, nullptr));
    return obj;
}

static cudaResourceDesc array_resource(cudaArray_t a) {
    cudaResourceDesc r;
    memset(&r, 0, sizeof r);
    r.resType = cudaResourceTypeArray;
    r.res.array.array = a;
    return r;
}

// thread i samples (x, y) = (i % 16 - 4, i / 16 - 3) plus (dx, dy), scaled by (sx, sy)
__global__ void sample2d(cudaTextureObject_t t, float dx, float dy, float sx, float sy, float* out) {
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    out[i] = tex2D<float>(t, (i % 16 - 4 + dx) * sx, (i / 16 - 3 + dy) * sy);
}

__global__ void sample_uchar4(cudaTextureObject_t t, float4* out) {
    int i = threadIdx.x;
    out[i] = tex2D<float4>(t, i % W + 0.5f, i / W + 0.5f);
}

__global__ void sample3d_layered(cudaTextureObject_t t3, cudaTextureObject_t tl, cudaTextureObject_t lin, float* out3,
                                 float* outl, int* outlin) {
    int i = threadIdx.x;
    out3[i] = tex3D<float>(t3, i % W + 0.5f, i / W % H + 0.5f, i / (W * H) + 0.5f);
    outl[i] = tex1DLayered<float>(tl, i % W + 0.5f, i / W - 1);
    outlin[i] = tex1Dfetch<int>(lin, i - 4);
}

__global__ void surface_writes(cudaSurfaceObject_t s2, cudaSurfaceObject_t s3, cudaSurfaceObject_t sl) {
    int i = threadIdx.x, x = i % 16 - 4, y = i / 16 - 3;
    surf2Dwrite(1000 + i, s2, x * 4, y, cudaBoundaryModeZero);  // outside: not written
    if (i < W * H * D) {
        surf3Dwrite(short(7 * i), s3, (i % W) * 2, i / W % H, i / (W * H), cudaBoundaryModeTrap);
        surf2DLayeredwrite(float2{float(i), -float(i)}, sl, (i % W) * 8, i / W % H, i / (W * H), cudaBoundaryModeTrap);
    }
}

__global__ void surface_reads(cudaSurfaceObject_t s2, int* out) {
    int i = threadIdx.x, x = i % 16 - 4, y = i / 16 - 3;
    out[i] = surf2Dread<int>(s2, x * 4, y, cudaBoundaryModeClamp);
    out[N + i] = surf2Dread<int>(s2, x * 4, y, cudaBoundaryModeZero);
}

int main() {
    std::vector<float> img(W * H);
    for (int i = 0; i < W * H; i++) img[i] = float(i * i % 37) - 9.5f;
    cudaChannelFormatDesc f1 = cudaCreateChannelDesc<float>();
    cudaArray_t a2;
    OK(cudaMallocArray(&a2, &f1, W, H));
    OK(cudaMemcpy2DToArray(a2, 0, 0, img.data(), W * 4, W * 4, H, cudaMemcpyHostToDevice));
    float* out;
    OK(cudaMallocManaged(&out, N * sizeof(float)));
    const cudaTextureAddressMode modes[] = {cudaAddressModeWrap, cudaAddressModeClamp, cudaAddressModeMirror,
                                            cudaAddressModeBorder};
    for (cudaTextureAddressMode mode : modes) {  // point sampling at texel centres, normalized coordinates
        cudaTextureObject_t t = texture(array_resource(a2), mode, false, true);
        sample2d<<<1, N>>>(t, 0.5f, 0.5f, 1.0f / W, 1.0f / H, out);
        OK(cudaDeviceSynchronize());
        for (int i = 0; i < N; i++) {
            int x = i % 16 - 4, y = i / 16 - 3;
            bool in = x >= 0 && x < W && y >= 0 && y < H;
            int (*address)(int, int) = mode == cudaAddressModeWrap ? wrap : mode == cudaAddressModeMirror ? mirror : clampi;
            float want = mode == cudaAddressModeBorder && !in ? 0.0f : img[address(y, H) * W + address(x, W)];
            EXPECT(out[i] == want, "mode %d (%d, %d): %g != %g", mode, x, y, out[i], want);
        }
        OK(cudaDestroyTextureObject(t));
    }
    for (cudaTextureAddressMode mode : {cudaAddressModeClamp, cudaAddressModeBorder}) {
        // linear filtering, unnormalized: 0.25 and 0.75 past the centre of texel (x, y): weights 1/4, 3/4
        cudaTextureObject_t t = texture(array_resource(a2), mode, true, false);
        sample2d<<<1, N>>>(t, 0.75f, 1.25f, 1.0f, 1.0f, out);
        OK(cudaDeviceSynchronize());
        for (int i = 0; i < N; i++) {
            int x = i % 16 - 4, y = i / 16 - 3;
            if (mode == cudaAddressModeClamp && (x < 0 || x >= W - 1 || y < 0 || y >= H - 1)) continue;  // edge clamping
            auto at = [&](int u, int v) -> double {
                if (mode == cudaAddressModeBorder && (u < 0 || u >= W || v < 0 || v >= H)) return 0.0;
                return img[clampi(v, H) * W + clampi(u, W)];
            };
            double want = (48 * at(x, y) + 16 * at(x + 1, y) + 144 * at(x, y + 1) + 48 * at(x + 1, y + 1)) / 256.0;
            EXPECT(out[i] == float(want), "linear mode %d (%d, %d): %.9g != %.9g", mode, x, y, out[i], want);
        }
        OK(cudaDestroyTextureObject(t));
    }
    {  // pitch-linear memory, point sampling, clamp
        float* pitched;
        size_t pitch;
        OK(cudaMallocPitch(&pitched, &pitch, W * 4, H));
        OK(cudaMemcpy2D(pitched, pitch, img.data(), W * 4, W * 4, H, cudaMemcpyHostToDevice));
        cudaResourceDesc r;
        memset(&r, 0, sizeof r);
        r.resType = cudaResourceTypePitch2D;
        r.res.pitch2D.devPtr = pitched;
        r.res.pitch2D.desc = f1;
        r.res.pitch2D.width = W;
        r.res.pitch2D.height = H;
        r.res.pitch2D.pitchInBytes = pitch;
        cudaTextureObject_t t = texture(r, cudaAddressModeClamp, false, false);
        sample2d<<<1, N>>>(t, 0.5f, 0.5f, 1.0f, 1.0f, out);
        OK(cudaDeviceSynchronize());
        for (int i = 0; i < N; i++)
            EXPECT(out[i] == img[clampi(i / 16 - 3, H) * W + clampi(i % 16 - 4, W)], "pitch2D %d: %g", i, out[i]);
        OK(cudaDestroyTextureObject(t));
        OK(cudaFree(pitched));
    }
    {  // uchar4 read as normalized floats: t / 255
        std::vector<uchar4> rgba(W * H);
        for (int i = 0; i < W * H; i++) rgba[i] = make_uchar4(i * 5, 255 - i, i * 37 % 256, 255);
        cudaChannelFormatDesc f4 = cudaCreateChannelDesc<uchar4>();
        cudaArray_t a;
        OK(cudaMallocArray(&a, &f4, W, H));
        OK(cudaMemcpy2DToArray(a, 0, 0, rgba.data(), W * 4, W * 4, H, cudaMemcpyHostToDevice));
        float4* o4;
        OK(cudaMallocManaged(&o4, W * H * sizeof(float4)));
        cudaTextureObject_t t = texture(array_resource(a), cudaAddressModeClamp, false, false, cudaReadModeNormalizedFloat);
        sample_uchar4<<<1, W * H>>>(t, o4);
        OK(cudaDeviceSynchronize());
        for (int i = 0; i < W * H; i++) {
            const unsigned char* c = &rgba[i].x;
            const float* g = &o4[i].x;
            for (int k = 0; k < 4; k++) EXPECT(g[k] == float(c[k] / 255.0), "uchar4 %d.%d: %.9g", i, k, g[k]);
        }
        OK(cudaDestroyTextureObject(t));
        OK(cudaFreeArray(a));
        OK(cudaFree(o4));
    }
    {  // a 3-D array, a layered 1-D array (the layer clamped), linear memory read as integers (0 outside)
        std::vector<float> vol(W * H * D), layers(W * L);
        for (size_t i = 0; i < vol.size(); i++) vol[i] = float(i) * 0.5f;
        for (size_t i = 0; i < layers.size(); i++) layers[i] = 100.0f + float(i);
        cudaArray_t a3, al;
        OK(cudaMalloc3DArray(&a3, &f1, make_cudaExtent(W, H, D)));
        OK(cudaMalloc3DArray(&al, &f1, make_cudaExtent(W, 0, L), cudaArrayLayered));
        cudaMemcpy3DParms p;
        memset(&p, 0, sizeof p);
        p.srcPtr = make_cudaPitchedPtr(vol.data(), W * 4, W, H);
        p.dstArray = a3;
        p.extent = make_cudaExtent(W, H, D);
        p.kind = cudaMemcpyHostToDevice;
        OK(cudaMemcpy3D(&p));
        p.srcPtr = make_cudaPitchedPtr(layers.data(), W * 4, W, 1);
        p.dstArray = al;
        p.extent = make_cudaExtent(W, 1, L);
        OK(cudaMemcpy3D(&p));
        int* ints;
        OK(cudaMalloc(&ints, 32 * sizeof(int)));
        std::vector<int> iv(32);
        for (int i = 0; i < 32; i++) iv[i] = i * 1000 - 7;
        OK(cudaMemcpy(ints, iv.data(), 32 * sizeof(int), cudaMemcpyHostToDevice));
        cudaResourceDesc r;
        memset(&r, 0, sizeof r);
        r.resType = cudaResourceTypeLinear;
        r.res.linear.devPtr = ints;
        r.res.linear.desc = cudaCreateChannelDesc<int>();
        r.res.linear.sizeInBytes = 32 * sizeof(int);
        cudaTextureObject_t t3 = texture(array_resource(a3), cudaAddressModeClamp, false, false);
        cudaTextureObject_t tl = texture(array_resource(al), cudaAddressModeClamp, false, false);
        cudaTextureObject_t tlin = texture(r, cudaAddressModeClamp, false, false);
        float *o3, *ol;
        int* olin;
        OK(cudaMallocManaged(&o3, W * H * D * sizeof(float)));
        OK(cudaMallocManaged(&ol, W * H * D * sizeof(float)));
        OK(cudaMallocManaged(&olin, W * H * D * sizeof(int)));
        sample3d_layered<<<1, W * H * D>>>(t3, tl, tlin, o3, ol, olin);
        OK(cudaDeviceSynchronize());
        for (int i = 0; i < W * H * D; i++) {
            EXPECT(o3[i] == vol[i], "3d %d: %g", i, o3[i]);
            int l = i / W - 1, layer = l < 0 || l >= L ? L - 1 : l;  // clamped; a negative one is a large u32
            EXPECT(ol[i] == layers[layer * W + i % W], "layered %d: %g", i, ol[i]);
            int j = i - 4;
            EXPECT(olin[i] == (j >= 0 && j < 32 ? iv[j] : 0), "linear memory %d: %d", j, olin[i]);
        }
        for (cudaTextureObject_t t : {t3, tl, tlin}) OK(cudaDestroyTextureObject(t));
        OK(cudaFreeArray(a3));
        OK(cudaFreeArray(al));
        OK(cudaFree(ints));
        for (void* q : {(void*)o3, (void*)ol, (void*)olin}) OK(cudaFree(q));
    }
    {  // surfaces: int 2-D, short 3-D, float2 layered 2-D
        cudaChannelFormatDesc fi = cudaCreateChannelDesc<int>(), fs = cudaCreateChannelDesc<short>(),
                              ff = cudaCreateChannelDesc<float2>();
        cudaArray_t s2a, s3a, sla;
        OK(cudaMallocArray(&s2a, &fi, W, H, cudaArraySurfaceLoadStore));
        OK(cudaMalloc3DArray(&s3a, &fs, make_cudaExtent(W, H, D), cudaArraySurfaceLoadStore));
        OK(cudaMalloc3DArray(&sla, &ff, make_cudaExtent(W, H, D), cudaArraySurfaceLoadStore | cudaArrayLayered));
        cudaSurfaceObject_t s2, s3, sl;
        cudaResourceDesc r = array_resource(s2a);
        OK(cudaCreateSurfaceObject(&s2, &r));
        r = array_resource(s3a);
        OK(cudaCreateSurfaceObject(&s3, &r));
        r = array_resource(sla);
        OK(cudaCreateSurfaceObject(&sl, &r));
        int* o;
        OK(cudaMallocManaged(&o, 2 * N * sizeof(int)));
        surface_writes<<<1, N>>>(s2, s3, sl);
        surface_reads<<<1, N>>>(s2, o);
        OK(cudaDeviceSynchronize());
        for (int i = 0; i < N; i++) {
            int x = i % 16 - 4, y = i / 16 - 3, cx = clampi(x, W), cy = clampi(y, H);
            int want = 1000 + (cy + 3) * 16 + cx + 4;  // the thread that wrote the clamped element
            EXPECT(o[i] == want, "surf2Dread clamp (%d, %d): %d != %d", x, y, o[i], want);
            bool in = x >= 0 && x < W && y >= 0 && y < H;
            EXPECT(o[N + i] == (in ? want : 0), "surf2Dread zero (%d, %d): %d", x, y, o[N + i]);
        }
        std::vector<short> s3h(W * H * D);
        std::vector<float2> slh(W * H * D);
        cudaMemcpy3DParms p;
        memset(&p, 0, sizeof p);
        p.srcArray = s3a;
        p.dstPtr = make_cudaPitchedPtr(s3h.data(), W * 2, W, H);
        p.extent = make_cudaExtent(W, H, D);
        p.kind = cudaMemcpyDeviceToHost;
        OK(cudaMemcpy3D(&p));
        p.srcArray = sla;
        p.dstPtr = make_cudaPitchedPtr(slh.data(), W * 8, W, H);
        OK(cudaMemcpy3D(&p));
        for (int i = 0; i < W * H * D; i++) {
            EXPECT(s3h[i] == short(7 * i), "surf3Dwrite %d: %d", i, s3h[i]);
            EXPECT(slh[i].x == float(i) && slh[i].y == -float(i), "surf2DLayeredwrite %d: %g %g", i, slh[i].x, slh[i].y);
        }
        for (cudaSurfaceObject_t s : {s2, s3, sl}) OK(cudaDestroySurfaceObject(s));
        for (cudaArray_t a : {s2a, s3a, sla}) OK(cudaFreeArray(a));
        OK(cudaFree(o));
    }
    OK(cudaFreeArray(a2));
    OK(cudaFree(out));
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("texture slice: PASSED\n");
    return 0;
}

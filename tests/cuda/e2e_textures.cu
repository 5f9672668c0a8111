// Textures, surfaces and CUDA arrays through cudart, each result checked against a host model
// written from the CUDA programming guide's texture-fetching appendix, with the fixed-point
// details it leaves open as measured on NVIDIA H200 (tests/hardware/golden/texture_probe.txt):
// address modes (wrap, clamp, mirror, border), point and linear filtering, normalized
// coordinates, element and normalized-float read modes, in every geometry. Sections:
// `textures`, `image` (a bilinear resampling kernel), `surfaces` and `forms` (PTX forms CUDA C
// does not emit, through inline PTX: half results, sust.p, sured, istypep, format queries).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

static int failures = 0;
#define EXPECT(cond)                                                                             \
    do {                                                                                         \
        if (!(cond) && failures++ < 10) fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); \
    } while (0)
#define OK(call) EXPECT((call) == cudaSuccess)
// a launch refused (module load, resources) is a failure with its reason, not zeroed results
#define LAUNCHED()                                                                               \
    do {                                                                                         \
        cudaError_t e_ = cudaGetLastError();                                                     \
        if (e_ != cudaSuccess && failures++ < 10)                                                \
            fprintf(stderr, "%s:%d: launch failed: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
    } while (0)

static bool close_to(float got, float want) { return fabsf(got - want) <= 1e-5f * fmaxf(1.0f, fabsf(want)); }
static unsigned bits(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
// A fetch against the model; a failure prints both values (and bits) and the printf-style
// context after them (coordinates, mode), enough to compare with a run on other hardware.
#define EXPECT_FETCH(got, want, ...)                                                             \
    do {                                                                                         \
        float got_ = (got), want_ = (want);                                                      \
        if (!close_to(got_, want_) && failures++ < 10) {                                         \
            fprintf(stderr, "%s:%d: FAILED got %.9g (%08x) want %.9g (%08x) at", __FILE__, __LINE__, got_, bits(got_), \
                    want_, bits(want_));                                                         \
            fprintf(stderr, __VA_ARGS__);                                                        \
            fputc('\n', stderr);                                                                 \
        }                                                                                        \
    } while (0)

// ---- host model -------------------------------------------------------------------------
// One axis: maps an integer texel index to one in [0, n), or -1 for the border.
static int address(int i, int n, cudaTextureAddressMode mode) {
    switch (mode) {
    case cudaAddressModeWrap: return ((i % n) + n) % n;
    case cudaAddressModeMirror: { int m = ((i % (2 * n)) + 2 * n) % (2 * n); return m < n ? m : 2 * n - 1 - m; }
    case cudaAddressModeBorder: return i < 0 || i >= n ? -1 : i;
    default: return i < 0 ? 0 : (i >= n ? n - 1 : i);
    }
}

// Linear filtering's lower texel and the upper one's weight in 1/256: x - 0.5 held with 8
// fractional bits, ties up (a weight that rounds to 1 moves the footprint, tld4's too).
static void footprint(double u, int& lower, int& weight) {
    double fixed = floor((u - 0.5) * 256 + 0.5);
    lower = (int)floor(fixed / 256);
    weight = (int)(fixed - 256.0 * lower);
}

struct Model {  // a single-channel float texture of w x h x d texels
    std::vector<float> texels;
    int w, h, d;
    cudaTextureAddressMode mode;
    bool linear, normalized;
    bool unorm8 = false;  // texels are 8-bit unorm values t (0..255) that read as t / 255
    bool half16 = false;  // texels are halves: the filter returns a half (see fetch)
    float texel(int x, int y, int z) const {
        x = address(x, w, mode), y = address(y, h, mode), z = address(z, d, mode);
        return x < 0 || y < 0 || z < 0 ? 0.0f : texels[((size_t)z * h + y) * w + x];
    }
    // In texels: a normalized coordinate is truncated to 24 fractional bits, then scaled.
    double scaled(float c, int n) const { return normalized ? floor(c * 16777216.0) / 16777216.0 * n : c; }
    float fetch(float x, float y = 0, float z = 0, int dims = 1) const {
        // a 1-D texture filters as a 2-D one at y = 0: rows -1 and 0, half the border colour
        double u[3] = {scaled(x, w), dims > 1 ? scaled(y, h) : 0.0, dims > 2 ? scaled(z, d) : 0.0};
        if (!linear) return texel((int)floor(u[0]), (int)floor(u[1]), (int)floor(u[2])) / (unorm8 ? 255.0 : 1.0);
        // clamp addressing clamps the coordinate to the edge texels' centres first (an axis
        // outside gets weight 0, which matters to how 3-D weights round)
        const int size[3] = {w, h, d};
        if (mode == cudaAddressModeClamp)
            for (int k = 0; k < 3; k++) u[k] = fmin(fmax(u[k], 0.5), size[k] - 0.5);
        int lo[3], a[3];
        for (int k = 0; k < 3; k++) footprint(u[k], lo[k], a[k]);
        // Corner weights (rounding ties up): the z weight splits 1 exactly into two slices (one
        // slice of weight 1 in 1-D and 2-D); in each the x split of the slice's weight is
        // rounded, then the upper-x row's upper-y corner and the lower-x row's lower-y corner
        // are its row's weight times the y weight, rounded, the other two differences. In 2-D
        // that is alpha * beta rounded once, the others differences.
        int weight[8];
        double value[8];
        for (int dz = 0; dz < 2; dz++) {
            int slice = dims < 3 ? (dz ? 0 : 256) : dz ? a[2] : 256 - a[2];
            int upper_x = (slice * a[0] + 128) >> 8, lower_x = slice - upper_x;
            int top = (upper_x * a[1] + 128) >> 8, bottom = (lower_x * (256 - a[1]) + 128) >> 8;
            int z = dims < 3 ? 0 : lo[2] + dz, *wz = weight + 4 * dz;  // corner index x + 2y + 4z
            wz[0] = bottom, wz[2] = lower_x - bottom, wz[1] = upper_x - top, wz[3] = top;
            for (int c = 0; c < 4; c++) value[4 * dz + c] = texel(lo[0] + (c & 1), lo[1] + (c >> 1), z);
        }
        // half texels (measured on the H200, texture_probe's half lines): those of nonzero weight
        // are aligned to the largest one's exponent, truncated to 14 bits below it, blended, and
        // the blend is rounded to a half, ties away from zero
        int top_exp = INT_MIN;
        for (int c = 0; c < 8; c++)
            if (half16 && weight[c] && value[c] != 0) top_exp = std::max(top_exp, ilogb(value[c]));
        double sum = 0;
        for (int c = 0; c < 8; c++) {
            double v = value[c];
            if (top_exp != INT_MIN) v = trunc(ldexp(v, 14 - top_exp)) * ldexp(1.0, top_exp - 14);
            sum += weight[c] / 256.0 * v;
        }
        if (half16 && sum != 0) {
            double ulp = ldexp(1.0, std::max(ilogb(sum) - 10, -24));
            sum = copysign(floor(fabs(sum) / ulp + 0.5) * ulp, sum);
        }
        // 8-bit unorm blends round to 16-bit unorm (t / 255 = 257 t / 65535), ties up
        return unorm8 ? (float)(floor(sum * 257 + 0.5) / 65535) : (float)sum;
    }
};

static cudaTextureObject_t make_texture(cudaArray_t array, cudaTextureAddressMode mode, bool linear, bool normalized,
                                        cudaTextureReadMode read = cudaReadModeElementType) {
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeArray;
    res.res.array.array = array;
    cudaTextureDesc td = {};
    td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = mode;
    td.filterMode = linear ? cudaFilterModeLinear : cudaFilterModePoint;
    td.readMode = read;
    td.normalizedCoords = normalized;
    cudaTextureObject_t t = 0;
    OK(cudaCreateTextureObject(&t, &res, &td, nullptr));
    return t;
}

// ---- kernels ------------------------------------------------------------------------------
__global__ void fetch_linear(cudaTextureObject_t t, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1Dfetch<int>(t, i - 2);  // two indices below and past the end read 0
}
__global__ void sample1d(cudaTextureObject_t t, const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1D<float>(t, x[i]);
}
__global__ void sample2d(cudaTextureObject_t t, const float2* p, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<float>(t, p[i].x, p[i].y);
}
__global__ void sample3d(cudaTextureObject_t t, const float4* p, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex3D<float>(t, p[i].x, p[i].y, p[i].z);
}
__global__ void sample_layered(cudaTextureObject_t t1, cudaTextureObject_t t2, const float4* p, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[2 * i] = tex1DLayered<float>(t1, p[i].x, (int)p[i].w);
        out[2 * i + 1] = tex2DLayered<float>(t2, p[i].x, p[i].y, (int)p[i].w % 4);  // t2 has 4 layers
    }
}
__global__ void sample_cube(cudaTextureObject_t t, const float4* p, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = texCubemap<float>(t, p[i].x, p[i].y, p[i].z);
}
__global__ void sample_rgba(cudaTextureObject_t t, const float2* p, float4* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<float4>(t, p[i].x, p[i].y);
}
__global__ void sample_int(cudaTextureObject_t t, const float2* p, short2* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<short2>(t, p[i].x, p[i].y);
}
__global__ void gather(cudaTextureObject_t t, const float2* p, float4* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2Dgather<float4>(t, p[i].x, p[i].y, 0);
}

static std::vector<float> ramp(size_t n, float scale) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = (float)((i * 37 + 11) % 101) * scale;
    return v;
}

template <class T> static T* upload(const std::vector<T>& v) {
    T* d = nullptr;
    OK(cudaMalloc(&d, v.size() * sizeof(T)));
    OK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
template <class T> static std::vector<T> download(const T* d, size_t n) {
    std::vector<T> v(n);
    OK(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
}
static unsigned blocks(int n) { return (n + 127) / 128; }

static void test_linear_memory() {
    const int n = 100;
    std::vector<int> host(n - 4);
    for (int i = 0; i < n - 4; i++) host[i] = i * i - 50;
    int* buf = upload(host);
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeLinear;
    res.res.linear.devPtr = buf;
    res.res.linear.desc = cudaCreateChannelDesc<int>();
    res.res.linear.sizeInBytes = host.size() * sizeof(int);
    cudaTextureDesc td = {};
    td.readMode = cudaReadModeElementType;
    cudaTextureObject_t t;
    OK(cudaCreateTextureObject(&t, &res, &td, nullptr));
    int* out;
    OK(cudaMalloc(&out, n * sizeof(int)));
    fetch_linear<<<1, n>>>(t, out, n);
    LAUNCHED();
    std::vector<int> got = download(out, n);
    for (int i = 0; i < n; i++) EXPECT(got[i] == (i - 2 >= 0 && i - 2 < n - 4 ? host[i - 2] : 0));
    cudaResourceDesc back;
    OK(cudaGetTextureObjectResourceDesc(&back, t));
    EXPECT(back.resType == cudaResourceTypeLinear && back.res.linear.devPtr == buf);
    OK(cudaDestroyTextureObject(t));
    OK(cudaFree(out));
    OK(cudaFree(buf));
}

static void test_1d_2d() {
    const int w = 13, h = 7, n = 400;
    std::vector<float> texels = ramp(w * h, 0.25f);
    cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
    cudaArray_t a1, a2;
    OK(cudaMallocArray(&a1, &fd, w));
    OK(cudaMallocArray(&a2, &fd, w, h));
    OK(cudaMemcpy2DToArray(a1, 0, 0, texels.data(), w * sizeof(float), w * sizeof(float), 1, cudaMemcpyHostToDevice));
    OK(cudaMemcpy2DToArray(a2, 0, 0, texels.data(), w * sizeof(float), w * sizeof(float), h, cudaMemcpyHostToDevice));
    cudaChannelFormatDesc back;
    cudaExtent extent;
    unsigned flags;
    OK(cudaArrayGetInfo(&back, &extent, &flags, a2));
    EXPECT(back.x == 32 && back.f == cudaChannelFormatKindFloat && extent.width == w && extent.height == h && extent.depth == 0);
    std::vector<float2> pts(n);
    std::vector<float> xs(n);
    for (int i = 0; i < n; i++) {
        pts[i] = make_float2(-1.7f + i * 0.0731f, 9.0f - i * 0.0413f);
        xs[i] = pts[i].x;
    }
    float2* dpts = upload(pts);
    float* dxs = upload(xs);
    float* out;
    OK(cudaMalloc(&out, n * sizeof(float)));
    cudaTextureAddressMode modes[] = {cudaAddressModeClamp, cudaAddressModeBorder, cudaAddressModeWrap, cudaAddressModeMirror};
    for (cudaTextureAddressMode mode : modes)
        for (int linear = 0; linear < 2; linear++)
            for (int normalized = 0; normalized < 2; normalized++) {
                float scale = normalized ? 0.11f : 1.0f;
                std::vector<float2> p(pts);
                std::vector<float> x(xs);
                for (int i = 0; i < n; i++) p[i].x *= scale, p[i].y *= scale, x[i] *= scale;
                OK(cudaMemcpy(dpts, p.data(), n * sizeof(float2), cudaMemcpyHostToDevice));
                OK(cudaMemcpy(dxs, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
                // wrap and mirror need normalized coordinates; with unnormalized ones they clamp
                cudaTextureAddressMode effective = normalized || mode == cudaAddressModeBorder ? mode : cudaAddressModeClamp;
                Model m1{texels, w, 1, 1, effective, (bool)linear, (bool)normalized};
                Model m2{texels, w, h, 1, effective, (bool)linear, (bool)normalized};
                cudaTextureObject_t t1 = make_texture(a1, mode, linear, normalized);
                cudaTextureObject_t t2 = make_texture(a2, mode, linear, normalized);
                sample1d<<<blocks(n), 128>>>(t1, dxs, out, n);
                LAUNCHED();
                std::vector<float> got = download(out, n);
                for (int i = 0; i < n; i++)
                    EXPECT_FETCH(got[i], m1.fetch(x[i]), " 1-D x %.9g, mode %d linear %d normalized %d", x[i], mode, linear,
                                 normalized);
                sample2d<<<blocks(n), 128>>>(t2, dpts, out, n);
                LAUNCHED();
                got = download(out, n);
                for (int i = 0; i < n; i++)
                    EXPECT_FETCH(got[i], m2.fetch(p[i].x, p[i].y, 0, 2), " 2-D (%.9g, %.9g), mode %d linear %d normalized %d",
                                 p[i].x, p[i].y, mode, linear, normalized);
                OK(cudaDestroyTextureObject(t1));
                OK(cudaDestroyTextureObject(t2));
            }
    OK(cudaFreeArray(a1));
    OK(cudaFreeArray(a2));
    OK(cudaFree(dpts));
    OK(cudaFree(dxs));
    OK(cudaFree(out));
}

static void test_3d_layered_cube() {
    const int w = 6, h = 5, d = 4, n = 300;
    std::vector<float> texels = ramp(w * h * d, 0.5f);
    cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
    std::vector<float4> pts(n);
    for (int i = 0; i < n; i++) pts[i] = make_float4(-0.6f + i * 0.027f, 6.1f - i * 0.019f, 0.3f + i * 0.013f, (float)(i % 6));
    float4* dpts = upload(pts);
    float* out;
    OK(cudaMalloc(&out, 2 * n * sizeof(float)));

    // 3-D, copied in with cudaMemcpy3D, read with trilinear filtering
    cudaArray_t a3;
    OK(cudaMalloc3DArray(&a3, &fd, make_cudaExtent(w, h, d)));
    cudaMemcpy3DParms cp = {};
    cp.srcPtr = make_cudaPitchedPtr(texels.data(), w * sizeof(float), w, h);
    cp.dstArray = a3;
    cp.extent = make_cudaExtent(w, h, d);
    cp.kind = cudaMemcpyHostToDevice;
    OK(cudaMemcpy3D(&cp));
    cudaTextureObject_t t3 = make_texture(a3, cudaAddressModeClamp, true, false);
    sample3d<<<blocks(n), 128>>>(t3, dpts, out, n);
    LAUNCHED();
    std::vector<float> got = download(out, n);
    Model m3{texels, w, h, d, cudaAddressModeClamp, true, false};
    for (int i = 0; i < n; i++)
        EXPECT_FETCH(got[i], m3.fetch(pts[i].x, pts[i].y, pts[i].z, 3), " 3-D (%.9g, %.9g, %.9g)", pts[i].x, pts[i].y, pts[i].z);
    // and back out of the array into a pitched device buffer, then to the host
    cudaPitchedPtr pitched;
    OK(cudaMalloc3D(&pitched, make_cudaExtent(w * sizeof(float), h, d)));
    cudaMemcpy3DParms back = {};
    back.srcArray = a3;
    back.dstPtr = pitched;
    back.extent = make_cudaExtent(w, h, d);
    back.kind = cudaMemcpyDeviceToDevice;
    OK(cudaMemcpy3D(&back));
    std::vector<float> round(w * h * d);
    OK(cudaMemcpy2D(round.data(), w * sizeof(float), pitched.ptr, pitched.pitch, w * sizeof(float), h * d, cudaMemcpyDeviceToHost));
    EXPECT(round == texels);

    // layered: 1-D with 6 layers of w texels, 2-D with 4 layers of w x h
    cudaArray_t l1, l2;
    OK(cudaMalloc3DArray(&l1, &fd, make_cudaExtent(w, 0, 6), cudaArrayLayered));
    OK(cudaMalloc3DArray(&l2, &fd, make_cudaExtent(w, h, 4), cudaArrayLayered));
    cudaMemcpy3DParms c1 = {};
    c1.srcPtr = make_cudaPitchedPtr(texels.data(), w * sizeof(float), w, 1);
    c1.dstArray = l1;
    c1.extent = make_cudaExtent(w, 1, 6);
    c1.kind = cudaMemcpyHostToDevice;
    OK(cudaMemcpy3D(&c1));
    cudaMemcpy3DParms c2 = cp;
    c2.dstArray = l2;
    c2.extent = make_cudaExtent(w, h, 4);
    OK(cudaMemcpy3D(&c2));
    cudaTextureObject_t tl1 = make_texture(l1, cudaAddressModeWrap, true, true);
    cudaTextureObject_t tl2 = make_texture(l2, cudaAddressModeMirror, false, true);
    std::vector<float4> lp(pts);
    for (auto& p : lp) p.x *= 0.3f, p.y *= 0.3f;
    OK(cudaMemcpy(dpts, lp.data(), n * sizeof(float4), cudaMemcpyHostToDevice));
    sample_layered<<<blocks(n), 128>>>(tl1, tl2, dpts, out, n);
    LAUNCHED();
    got = download(out, 2 * n);
    for (int i = 0; i < n; i++) {
        int layer1 = (int)lp[i].w, layer2 = layer1 % 4;
        Model ml1{std::vector<float>(texels.begin() + layer1 * w, texels.begin() + (layer1 + 1) * w), w, 1, 1,
                  cudaAddressModeWrap, true, true};
        Model ml2{std::vector<float>(texels.begin() + layer2 * w * h, texels.begin() + (layer2 + 1) * w * h), w, h, 1,
                  cudaAddressModeMirror, false, true};
        EXPECT_FETCH(got[2 * i], ml1.fetch(lp[i].x), " 1-D layer %d x %.9g", layer1, lp[i].x);
        EXPECT_FETCH(got[2 * i + 1], ml2.fetch(lp[i].x, lp[i].y, 0, 2), " 2-D layer %d (%.9g, %.9g)", layer2, lp[i].x,
                     lp[i].y);
    }

    // cubemap: 6 faces of w x w; the face and its coordinates from the major axis
    cudaArray_t cube;
    OK(cudaMalloc3DArray(&cube, &fd, make_cudaExtent(w, w, 6), cudaArrayCubemap));
    std::vector<float> faces = ramp(w * w * 6, 1.0f);
    cudaMemcpy3DParms cc = {};
    cc.srcPtr = make_cudaPitchedPtr(faces.data(), w * sizeof(float), w, w);
    cc.dstArray = cube;
    cc.extent = make_cudaExtent(w, w, 6);
    cc.kind = cudaMemcpyHostToDevice;
    OK(cudaMemcpy3D(&cc));
    cudaTextureObject_t tc = make_texture(cube, cudaAddressModeClamp, false, true);
    std::vector<float4> dirs(n);
    for (int i = 0; i < n; i++) dirs[i] = make_float4(sinf(i * 0.7f) * 2, cosf(i * 1.3f), sinf(i * 0.31f + 1) * 1.5f, 0);
    OK(cudaMemcpy(dpts, dirs.data(), n * sizeof(float4), cudaMemcpyHostToDevice));
    sample_cube<<<blocks(n), 128>>>(tc, dpts, out, n);
    LAUNCHED();
    got = download(out, n);
    for (int i = 0; i < n; i++) {
        float x = dirs[i].x, y = dirs[i].y, z = dirs[i].z, ax = fabsf(x), ay = fabsf(y), az = fabsf(z);
        int face;
        float sc, tc_, ma;
        // the major axis picks the face; on ties z wins over y, y over x (measured on NVIDIA H200)
        if (az >= ax && az >= ay) face = z >= 0 ? 4 : 5, sc = z >= 0 ? x : -x, tc_ = -y, ma = az;
        else if (ay >= ax) face = y >= 0 ? 2 : 3, sc = x, tc_ = y >= 0 ? z : -z, ma = ay;
        else face = x >= 0 ? 0 : 1, sc = x >= 0 ? -z : z, tc_ = -y, ma = ax;
        Model mf{std::vector<float>(faces.begin() + face * w * w, faces.begin() + (face + 1) * w * w), w, w, 1,
                 cudaAddressModeClamp, false, true};
        EXPECT_FETCH(got[i], mf.fetch((sc / ma + 1) / 2, (tc_ / ma + 1) / 2, 0, 2), " cube (%.9g, %.9g, %.9g) face %d", x, y,
                     z, face);
    }
    for (cudaTextureObject_t t : {t3, tl1, tl2, tc}) OK(cudaDestroyTextureObject(t));
    for (cudaArray_t a : {a3, l1, l2, cube}) OK(cudaFreeArray(a));
    OK(cudaFree(pitched.ptr));
    OK(cudaFree(dpts));
    OK(cudaFree(out));
}

static void test_formats_gather() {
    // uchar4 read as normalized floats with bilinear filtering, short2 read as elements, a
    // pitch-linear half texture, and a gather of the red channel
    const int w = 9, h = 8, n = 200;
    std::vector<uchar4> rgba(w * h);
    std::vector<short2> pairs(w * h);
    std::vector<__half> halves(w * h);
    for (int i = 0; i < w * h; i++) {
        rgba[i] = make_uchar4(i * 3 % 256, 255 - i, i * 7 % 256, 128);
        pairs[i] = make_short2(i * 100 - 3000, -i);
        halves[i] = __float2half(i * 0.125f - 2);
    }
    std::vector<float2> pts(n);
    for (int i = 0; i < n; i++) pts[i] = make_float2(-0.5f + i * 0.051f, 8.5f - i * 0.047f);
    float2* dpts = upload(pts);
    float4* out;
    OK(cudaMalloc(&out, n * sizeof(float4)));

    cudaChannelFormatDesc f8 = cudaCreateChannelDesc<uchar4>(), f16 = cudaCreateChannelDesc<short2>();
    cudaArray_t a8, a16;
    OK(cudaMallocArray(&a8, &f8, w, h));
    OK(cudaMallocArray(&a16, &f16, w, h));
    OK(cudaMemcpy2DToArray(a8, 0, 0, rgba.data(), w * 4, w * 4, h, cudaMemcpyHostToDevice));
    OK(cudaMemcpy2DToArray(a16, 0, 0, pairs.data(), w * 4, w * 4, h, cudaMemcpyHostToDevice));
    cudaTextureObject_t t8 = make_texture(a8, cudaAddressModeClamp, true, false, cudaReadModeNormalizedFloat);
    sample_rgba<<<blocks(n), 128>>>(t8, dpts, out, n);
    LAUNCHED();
    std::vector<float4> got = download(out, n);
    for (int c = 0; c < 4; c++) {
        std::vector<float> channel(w * h);
        for (int i = 0; i < w * h; i++) channel[i] = (&rgba[i].x)[c];
        Model m{channel, w, h, 1, cudaAddressModeClamp, true, false, true};
        for (int i = 0; i < n; i++)
            EXPECT_FETCH((&got[i].x)[c], m.fetch(pts[i].x, pts[i].y, 0, 2), " uchar4 channel %d (%.9g, %.9g)", c, pts[i].x,
                         pts[i].y);
    }
    cudaTextureObject_t t16 = make_texture(a16, cudaAddressModeBorder, false, false);
    sample_int<<<blocks(n), 128>>>(t16, dpts, (short2*)out, n);
    LAUNCHED();
    std::vector<short2> ints = download((short2*)out, n);
    for (int i = 0; i < n; i++) {
        int x = (int)floorf(pts[i].x), y = (int)floorf(pts[i].y);
        bool in = x >= 0 && x < w && y >= 0 && y < h;
        EXPECT(ints[i].x == (in ? pairs[y * w + x].x : 0) && ints[i].y == (in ? pairs[y * w + x].y : 0));
    }

    // pitch-linear half texture with linear filtering
    __half* pitched;
    size_t pitch;
    OK(cudaMallocPitch(&pitched, &pitch, w * sizeof(__half), h));
    OK(cudaMemcpy2D(pitched, pitch, halves.data(), w * sizeof(__half), w * sizeof(__half), h, cudaMemcpyHostToDevice));
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypePitch2D;
    res.res.pitch2D.devPtr = pitched;
    res.res.pitch2D.desc = cudaCreateChannelDescHalf();
    res.res.pitch2D.width = w;
    res.res.pitch2D.height = h;
    res.res.pitch2D.pitchInBytes = pitch;
    cudaTextureDesc td = {};
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
    td.filterMode = cudaFilterModeLinear;
    td.readMode = cudaReadModeElementType;
    cudaTextureObject_t th;
    OK(cudaCreateTextureObject(&th, &res, &td, nullptr));
    float* fout = (float*)out;
    sample2d<<<blocks(n), 128>>>(th, dpts, fout, n);
    LAUNCHED();
    std::vector<float> fgot = download(fout, n);
    std::vector<float> hv(w * h);
    for (int i = 0; i < w * h; i++) hv[i] = __half2float(halves[i]);
    Model mh{hv, w, h, 1, cudaAddressModeClamp, true, false};
    mh.half16 = true;
    for (int i = 0; i < n; i++) EXPECT_FETCH(fgot[i], mh.fetch(pts[i].x, pts[i].y, 0, 2), " half (%.9g, %.9g)", pts[i].x, pts[i].y);
    cudaTextureDesc tdback;
    OK(cudaGetTextureObjectTextureDesc(&tdback, th));
    EXPECT(tdback.filterMode == cudaFilterModeLinear && tdback.addressMode[1] == cudaAddressModeClamp);

    // gather: red channel of the four texels bilinear filtering would use
    cudaTextureObject_t tg = make_texture(a8, cudaAddressModeClamp, false, false, cudaReadModeNormalizedFloat);
    gather<<<blocks(n), 128>>>(tg, dpts, out, n);
    LAUNCHED();
    got = download(out, n);
    for (int i = 0; i < n; i++) {
        int x0, y0, unused;
        footprint(pts[i].x, x0, unused);
        footprint(pts[i].y, y0, unused);
        auto red = [&](int x, int y) {
            x = address(x, w, cudaAddressModeClamp), y = address(y, h, cudaAddressModeClamp);
            return rgba[y * w + x].x / 255.0f;
        };
        float want[4] = {red(x0, y0 + 1), red(x0 + 1, y0 + 1), red(x0 + 1, y0), red(x0, y0)};
        for (int k = 0; k < 4; k++)
            EXPECT_FETCH((&got[i].x)[k], want[k], " gather (%.9g, %.9g) texel %d", pts[i].x, pts[i].y, k);
    }
    for (cudaTextureObject_t t : {t8, t16, th, tg}) OK(cudaDestroyTextureObject(t));
    OK(cudaFreeArray(a8));
    OK(cudaFreeArray(a16));
    OK(cudaFree(pitched));
    OK(cudaFree(dpts));
    OK(cudaFree(out));
}

// ---- image: rotate and scale an RGBA image with bilinear filtering -------------------------
__global__ void rotate_scale(cudaTextureObject_t src, uchar4* dst, int w, int h, float angle, float scale) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float u = (x - w / 2.0f) / scale, v = (y - h / 2.0f) / scale;
    float tu = u * cosf(angle) - v * sinf(angle) + 0.5f, tv = u * sinf(angle) + v * cosf(angle) + 0.5f;
    float4 c = tex2D<float4>(src, tu, tv);  // normalized coordinates, wrap, bilinear
    dst[y * w + x] = make_uchar4(c.x * 255.0f + 0.5f, c.y * 255.0f + 0.5f, c.z * 255.0f + 0.5f, c.w * 255.0f + 0.5f);
}

static int test_image() {
    const int w = 64, h = 48;
    std::vector<uchar4> img(w * h);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            img[y * w + x] = make_uchar4(x * 4, y * 5, (x ^ y) * 4, 255 - x - y);
    cudaChannelFormatDesc fd = cudaCreateChannelDesc<uchar4>();
    cudaArray_t a;
    OK(cudaMallocArray(&a, &fd, w, h));
    OK(cudaMemcpy2DToArrayAsync(a, 0, 0, img.data(), w * 4, w * 4, h, cudaMemcpyHostToDevice, 0));
    cudaTextureObject_t t = make_texture(a, cudaAddressModeWrap, true, true, cudaReadModeNormalizedFloat);
    uchar4* dst;
    OK(cudaMalloc(&dst, w * h * 4));
    const float angle = 0.4f, scale = 40.0f;
    rotate_scale<<<dim3(w / 16, h / 16), dim3(16, 16)>>>(t, dst, w, h, angle, scale);
    LAUNCHED();
    std::vector<uchar4> got = download(dst, w * h);
    int off = 0;
    for (int c = 0; c < 4; c++) {
        std::vector<float> channel(w * h);
        for (int i = 0; i < w * h; i++) channel[i] = (&img[i].x)[c];
        Model m{channel, w, h, 1, cudaAddressModeWrap, true, true, true};
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                float u = (x - w / 2.0f) / scale, v = (y - h / 2.0f) / scale;
                float tu = u * cosf(angle) - v * sinf(angle) + 0.5f, tv = u * sinf(angle) + v * cosf(angle) + 0.5f;
                int want = (int)(m.fetch(tu, tv, 0, 2) * 255.0f + 0.5f), have = (&got[y * w + x].x)[c];
                off += abs(want - have) > 1;  // device sinf/cosf may differ from the host's in the last bit
            }
    }
    EXPECT(off == 0);
    OK(cudaDestroyTextureObject(t));
    OK(cudaFreeArray(a));
    OK(cudaFree(dst));
    return off;
}

// ---- surfaces -------------------------------------------------------------------------------
__global__ void surf_blur(cudaSurfaceObject_t in, cudaSurfaceObject_t out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float sum = 0;
    for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++)  // x is in bytes; outside reads 0 (cudaBoundaryModeZero)
            sum += surf2Dread<float>(in, (x + dx) * 4, y + dy, cudaBoundaryModeZero);
    surf2Dwrite(sum, out, x * 4, y);
    float clamped = surf2Dread<float>(in, (x - 3) * 4, y + 2, cudaBoundaryModeClamp);
    surf2Dwrite(clamped, out, x * 4, y + h);  // rows h..2h-1 of the output
}
__global__ void surf_layers(cudaSurfaceObject_t s3, cudaSurfaceObject_t layered, int w, int h, int d) {
    int x = threadIdx.x, y = blockIdx.x, z = blockIdx.y;
    int4 v = make_int4(x, y, z, x + 10 * y + 100 * z);
    surf3Dwrite(v, s3, x * 16, y, z);
    surf2DLayeredwrite((short)(v.w * 3), layered, x * 2, y, z);
}

static void test_surfaces() {
    const int w = 16, h = 8;
    std::vector<float> img = ramp(w * h, 1.0f);
    cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
    cudaArray_t in, out;
    OK(cudaMallocArray(&in, &fd, w, h, cudaArraySurfaceLoadStore));
    OK(cudaMallocArray(&out, &fd, w, 2 * h, cudaArraySurfaceLoadStore));
    OK(cudaMemcpy2DToArray(in, 0, 0, img.data(), w * 4, w * 4, h, cudaMemcpyHostToDevice));
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeArray;
    res.res.array.array = in;
    cudaSurfaceObject_t sin, sout;
    OK(cudaCreateSurfaceObject(&sin, &res));
    res.res.array.array = out;
    OK(cudaCreateSurfaceObject(&sout, &res));
    surf_blur<<<dim3(1, 1), dim3(w, h)>>>(sin, sout, w, h);
    LAUNCHED();
    OK(cudaDeviceSynchronize());
    std::vector<float> got(w * 2 * h);
    OK(cudaMemcpy2DFromArray(got.data(), w * 4, out, 0, 0, w * 4, 2 * h, cudaMemcpyDeviceToHost));
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            float sum = 0;
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) {
                    int xx = x + dx, yy = y + dy;
                    if (xx >= 0 && xx < w && yy >= 0 && yy < h) sum += img[yy * w + xx];
                }
            EXPECT(close_to(got[y * w + x], sum));
            int cx = x - 3 < 0 ? 0 : x - 3, cy = y + 2 >= h ? h - 1 : y + 2;
            EXPECT(got[(y + h) * w + x] == img[cy * w + cx]);
        }

    // a 3-D surface of int4 and a layered 2-D one of shorts, read back with cudaMemcpy3D
    const int d = 3;
    cudaChannelFormatDesc f4 = cudaCreateChannelDesc<int4>(), fs = cudaCreateChannelDesc<short>();
    cudaArray_t a3, al;
    OK(cudaMalloc3DArray(&a3, &f4, make_cudaExtent(w, h, d), cudaArraySurfaceLoadStore));
    OK(cudaMalloc3DArray(&al, &fs, make_cudaExtent(w, h, d), cudaArraySurfaceLoadStore | cudaArrayLayered));
    cudaSurfaceObject_t s3, sl;
    res.res.array.array = a3;
    OK(cudaCreateSurfaceObject(&s3, &res));
    res.res.array.array = al;
    OK(cudaCreateSurfaceObject(&sl, &res));
    surf_layers<<<dim3(h, d), w>>>(s3, sl, w, h, d);
    LAUNCHED();
    std::vector<int4> v3(w * h * d);
    std::vector<short> vl(w * h * d);
    cudaMemcpy3DParms cp = {};
    cp.srcArray = a3;
    cp.dstPtr = make_cudaPitchedPtr(v3.data(), w * sizeof(int4), w, h);
    cp.extent = make_cudaExtent(w, h, d);
    cp.kind = cudaMemcpyDeviceToHost;
    OK(cudaMemcpy3DAsync(&cp, 0));
    cp.srcArray = al;
    cp.dstPtr = make_cudaPitchedPtr(vl.data(), w * sizeof(short), w, h);
    OK(cudaMemcpy3D(&cp));
    for (int z = 0; z < d; z++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int i = (z * h + y) * w + x, tag = x + 10 * y + 100 * z;
                EXPECT(v3[i].x == x && v3[i].y == y && v3[i].z == z && v3[i].w == tag);
                EXPECT(vl[i] == (short)(tag * 3));
            }
    for (cudaSurfaceObject_t s : {sin, sout, s3, sl}) OK(cudaDestroySurfaceObject(s));
    for (cudaArray_t a : {in, out, a3, al}) OK(cudaFreeArray(a));
}

// PTX forms without a CUDA C spelling. What the PTX manual defines is checked here; what it
// leaves open (the .f16x2 channel order, istypep on texture objects) is
// printed, for a GPU's run to record. No suq channel or layout query and no txq format query:
// NVIDIA's driver refuses a module holding the first (CUDA_ERROR_NOT_SUPPORTED) and leaves a
// kernel using the second out of it (tests/hardware/golden/ptx_forms_probe.txt).
__global__ void ptx_forms(cudaTextureObject_t t, cudaSurfaceObject_t counts, cudaSurfaceObject_t rgba, unsigned* out) {
    int i = threadIdx.x;
    asm volatile("sured.b.add.1d.u32.trap [%0, {%1}], %2;" ::"l"(counts), "r"((i % 8) * 4), "r"(1) : "memory");
    asm volatile("sured.b.max.1d.s32.trap [%0, {%1}], %2;" ::"l"(counts), "r"(32 + (i % 4) * 4), "r"(i - 100) : "memory");
    if (i < 8) {  // texel (i, 1) of a 8x2 float4 surface, in texels
        float v = i * 0.5f;
        asm volatile("sust.p.2d.v4.b32.trap [%0, {%1, %2}], {%3, %4, %5, %6};" ::"l"(rgba), "r"(i), "r"(1), "f"(v),
                     "f"(-v), "f"(v + 1), "f"(2 * v) : "memory");
    }
    if (i != 0) return;
    unsigned short h[4];
    asm("tex.2d.v4.f16.f32 {%0, %1, %2, %3}, [%4, {%5, %6}];" : "=h"(h[0]), "=h"(h[1]), "=h"(h[2]), "=h"(h[3])
        : "l"(t), "f"(2.5f), "f"(0.5f));
    for (int k = 0; k < 4; k++) out[k] = h[k];
    asm("tex.2d.v2.f16x2.f32 {%0, %1}, [%2, {%3, %4}];" : "=r"(out[4]), "=r"(out[5]) : "l"(t), "f"(2.5f), "f"(0.5f));
    asm("{ .reg .pred p; istypep.texref p, %1; selp.u32 %0, 1, 0, p; }" : "=r"(out[11]) : "l"(t));
    asm("{ .reg .pred p; istypep.surfref p, %1; selp.u32 %0, 1, 0, p; }" : "=r"(out[12]) : "l"(counts));
    asm("{ .reg .pred p; istypep.surfref p, %1; selp.u32 %0, 1, 0, p; }" : "=r"(out[13]) : "l"(t));
}

static void test_ptx_forms() {
    // a 4x1 float4 texture whose texels halves hold exactly, 16 u32 counters, an 8x2 float4 surface
    const float texels[16] = {0, 1, 2, 3, 0.5f, -1, 0.25f, 8, -2, 1024, 0.125f, -0.5f, 3, 2, 1, 0};
    cudaChannelFormatDesc f4 = cudaCreateChannelDesc<float4>(), u1 = cudaCreateChannelDesc<unsigned>();
    cudaArray_t ta, ca, sa;
    OK(cudaMallocArray(&ta, &f4, 4, 1));
    OK(cudaMallocArray(&ca, &u1, 16, 0, cudaArraySurfaceLoadStore));
    OK(cudaMallocArray(&sa, &f4, 8, 2, cudaArraySurfaceLoadStore));
    OK(cudaMemcpy2DToArray(ta, 0, 0, texels, sizeof texels, sizeof texels, 1, cudaMemcpyHostToDevice));
    std::vector<unsigned> zero(16, 0);
    std::vector<float> ones(8 * 2 * 4, 1.0f);
    OK(cudaMemcpy2DToArray(ca, 0, 0, zero.data(), 64, 64, 1, cudaMemcpyHostToDevice));
    OK(cudaMemcpy2DToArray(sa, 0, 0, ones.data(), 8 * 16, 8 * 16, 2, cudaMemcpyHostToDevice));
    cudaTextureObject_t t = make_texture(ta, cudaAddressModeClamp, false, false);
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeArray;
    cudaSurfaceObject_t counts, rgba;
    res.res.array.array = ca;
    OK(cudaCreateSurfaceObject(&counts, &res));
    res.res.array.array = sa;
    OK(cudaCreateSurfaceObject(&rgba, &res));
    unsigned* out;
    OK(cudaMallocManaged(&out, 16 * sizeof(unsigned)));
    ptx_forms<<<1, 256>>>(t, counts, rgba, out);
    LAUNCHED();
    OK(cudaDeviceSynchronize());
    std::vector<unsigned> got(16);
    OK(cudaMemcpy2DFromArray(got.data(), 64, ca, 0, 0, 64, 1, cudaMemcpyDeviceToHost));
    for (int k = 0; k < 8; k++) EXPECT(got[k] == 32);                // 256 adds of 1 over 8 cells
    for (int k = 0; k < 4; k++) EXPECT((int)got[8 + k] == 155 - 3 + k);  // max of i - 100 over i = k mod 4
    std::vector<float> surf(8 * 2 * 4);
    OK(cudaMemcpy2DFromArray(surf.data(), 8 * 16, sa, 0, 0, 8 * 16, 2, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 8; i++) {
        float v = i * 0.5f, want[4] = {v, -v, v + 1, 2 * v};
        for (int c = 0; c < 4; c++) {
            EXPECT(surf[(8 + i) * 4 + c] == want[c]);
            EXPECT(surf[i * 4 + c] == 1.0f);  // row 0 untouched
        }
    }
    for (int k = 0; k < 4; k++) EXPECT(out[k] == __half_as_ushort(__float2half_rn(texels[8 + k])));  // texel 2
    printf("forms: tex.f16x2 %08x %08x\n", out[4], out[5]);
    printf("forms: istypep texref(texture) %u surfref(surface) %u surfref(texture) %u\n", out[11], out[12], out[13]);
    OK(cudaDestroyTextureObject(t));
    for (cudaSurfaceObject_t s : {counts, rgba}) OK(cudaDestroySurfaceObject(s));
    for (cudaArray_t a : {ta, ca, sa}) OK(cudaFreeArray(a));
    OK(cudaFree(out));
}

int main(int argc, char** argv) {
    const char* section = argc > 1 ? argv[1] : "textures";
    if (!strcmp(section, "textures")) {
        test_linear_memory();
        test_1d_2d();
        test_3d_layered_cube();
        test_formats_gather();
    } else if (!strcmp(section, "image")) {
        test_image();
    } else if (!strcmp(section, "surfaces")) {
        test_surfaces();
    } else if (!strcmp(section, "forms")) {
        test_ptx_forms();
    } else {
        fprintf(stderr, "unknown section %s\n", section);
        return 2;
    }
    OK(cudaDeviceSynchronize());
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("%s: PASSED\n", section);
    return 0;
}

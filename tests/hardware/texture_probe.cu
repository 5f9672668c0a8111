// Texture and surface fetches, printed as the bits of each float: `case coordinates -> bits`.
// Run natively on an NVIDIA GPU by run_nvidia.sh, its output is tests/hardware/golden/
// texture_probe.txt; tests/e2e/test_nvidia_golden.py runs it under our driver and compares.
// The cases pin down what the programming guide leaves open: address modes outside [0, N)
// (negative and several periods away, unnormalized wrap/mirror), texel centres and edges, the
// rounding of linear filtering's 8-bit weights, layer and cube-face selection, tld4's order,
// surface boundary modes; trilinear filtering's eight corner weights, each read off a texture that
// is 1 on one parity class of texels (the `tri.`/`bi.` lines, see trilinear()); half texels
// through the filter (`half.`).
// Texel values are small integers, so exact blends are exact floats.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define CHECK(call)                                                                              \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            printf("%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorName(e_));                   \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

// What the probe kernel calls; p holds (x, y, z, w) with the layer or gather component in z or w.
enum Kind { TEX1D, TEX2D, TEX3D, TEX1D_LAYERED, TEX2D_LAYERED, CUBE, TEX2D_RGBA, GATHER, FETCH };
static const int coords_of[] = {1, 2, 3, 2, 3, 3, 2, 3, 1};  // coordinates printed per kind

__global__ void probe(cudaTextureObject_t t, int kind, const float4* p, float4* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 c = p[i], r = make_float4(0, 0, 0, 0);
    switch (kind) {
    case TEX1D: r.x = tex1D<float>(t, c.x); break;
    case TEX2D: r.x = tex2D<float>(t, c.x, c.y); break;
    case TEX3D: r.x = tex3D<float>(t, c.x, c.y, c.z); break;
    case TEX1D_LAYERED: r.x = tex1DLayered<float>(t, c.x, (int)c.y); break;
    case TEX2D_LAYERED: r.x = tex2DLayered<float>(t, c.x, c.y, (int)c.z); break;
    case CUBE: r.x = texCubemap<float>(t, c.x, c.y, c.z); break;
    case TEX2D_RGBA: r = tex2D<float4>(t, c.x, c.y); break;
    case GATHER: r = tex2Dgather<float4>(t, c.x, c.y, (int)c.z); break;
    case FETCH: r.x = tex1Dfetch<float>(t, (int)c.x); break;
    }
    out[i] = r;
}

static unsigned bits(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}

// Fetches each point through t and prints one line per point.
static void run(const char* name, Kind kind, cudaTextureObject_t t, const std::vector<float4>& pts) {
    int n = (int)pts.size();
    float4 *dp, *dout;
    CHECK(cudaMalloc(&dp, n * sizeof(float4)));
    CHECK(cudaMalloc(&dout, n * sizeof(float4)));
    CHECK(cudaMemcpy(dp, pts.data(), n * sizeof(float4), cudaMemcpyHostToDevice));
    probe<<<(n + 63) / 64, 64>>>(t, kind, dp, dout, n);
    CHECK(cudaGetLastError());
    std::vector<float4> got(n);
    CHECK(cudaMemcpy(got.data(), dout, n * sizeof(float4), cudaMemcpyDeviceToHost));
    bool four = kind == TEX2D_RGBA || kind == GATHER;
    for (int i = 0; i < n; i++) {
        printf("%s", name);
        for (int c = 0; c < coords_of[kind]; c++) printf(" %.9g", (&pts[i].x)[c]);
        printf(" ->");
        for (int c = 0; c < (four ? 4 : 1); c++) printf(" %08x", bits((&got[i].x)[c]));
        printf("\n");
    }
    CHECK(cudaFree(dp));
    CHECK(cudaFree(dout));
}

static cudaArray_t make_array(cudaChannelFormatDesc fd, int w, int h, int d, unsigned flags, const void* data) {
    cudaArray_t a;
    CHECK(cudaMalloc3DArray(&a, &fd, make_cudaExtent(w, h, d), flags));
    size_t texel = (fd.x + fd.y + fd.z + fd.w) / 8;
    cudaMemcpy3DParms cp = {};
    cp.srcPtr = make_cudaPitchedPtr((void*)data, w * texel, w, h ? h : 1);
    cp.dstArray = a;
    cp.extent = make_cudaExtent(w, h ? h : 1, d ? d : 1);
    cp.kind = cudaMemcpyHostToDevice;
    CHECK(cudaMemcpy3D(&cp));
    return a;
}

static cudaTextureObject_t make_texture(cudaArray_t a, cudaTextureAddressMode mode, bool linear, bool normalized,
                                        cudaTextureReadMode read = cudaReadModeElementType) {
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeArray;
    res.res.array.array = a;
    cudaTextureDesc td = {};
    td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = mode;
    td.filterMode = linear ? cudaFilterModeLinear : cudaFilterModePoint;
    td.readMode = read;
    td.normalizedCoords = normalized;
    cudaTextureObject_t t;
    CHECK(cudaCreateTextureObject(&t, &res, &td, nullptr));
    return t;
}

static const cudaTextureAddressMode MODES[] = {cudaAddressModeWrap, cudaAddressModeClamp, cudaAddressModeMirror,
                                               cudaAddressModeBorder};
static const char* MODE_NAMES[] = {"wrap", "clamp", "mirror", "border"};

// Every address mode x point/linear x unnormalized/normalized; pts in texel units, divided by
// the size (in f32, as a program would) for normalized coordinates.
static void all_modes(const char* tex, Kind kind, cudaArray_t a, const int* size, const std::vector<float4>& pts) {
    for (int m = 0; m < 4; m++)
        for (int linear = 0; linear < 2; linear++)
            for (int normalized = 0; normalized < 2; normalized++) {
                std::vector<float4> p(pts);
                if (normalized)
                    for (float4& q : p)
                        for (int c = 0; c < coords_of[kind]; c++) (&q.x)[c] /= size[c];
                char name[96];
                snprintf(name, sizeof name, "%s.%s.%s.%s", tex, MODE_NAMES[m], linear ? "linear" : "point",
                         normalized ? "norm" : "unnorm");
                cudaTextureObject_t t = make_texture(a, MODES[m], linear, normalized);
                run(name, kind, t, p);
                CHECK(cudaDestroyTextureObject(t));
            }
}

static void one_and_two_d() {
    // 1-D, 5 texels 1, 2, 4, 8, 16: a blend of two neighbours shows both weights
    float t1[5] = {1, 2, 4, 8, 16};
    cudaArray_t a1 = make_array(cudaCreateChannelDesc<float>(), 5, 0, 0, 0, t1);
    int size1[] = {5};
    std::vector<float4> x1;
    for (float x : {0.5f, 2.5f, 4.5f, 0.0f, 1.0f, 2.0f, 5.0f, 4.999f, 0.001f, -0.25f, -0.5f, -0.75f, -1.0f, -3.3f,
                    -5.0f, -5.5f, -7.2f, 5.25f, 5.5f, 6.6f, 9.9f, 10.5f, 13.1f, 1.7f, 3.2f, -12.4f})
        x1.push_back(make_float4(x, 0, 0, 0));
    all_modes("1d.5", TEX1D, a1, size1, x1);

    // 2-D, texel (x, y) = 1 + x + 8y, a power-of-two and an odd size
    const int sizes[][2] = {{4, 4}, {5, 3}};
    for (auto& s : sizes) {
        int w = s[0], h = s[1];
        std::vector<float> texels(w * h);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) texels[y * w + x] = 1 + x + 8 * y;
        cudaArray_t a2 = make_array(cudaCreateChannelDesc<float>(), w, h, 0, 0, texels.data());
        float W = w, H = h;
        float pts[][2] = {{0.5f, 0.5f}, {2.5f, 1.5f}, {W - 0.5f, H - 0.5f}, {0, 0}, {1, 1}, {W, H}, {0.001f, H - 0.001f},
                          {-0.25f, 0.75f}, {0.75f, -0.25f}, {-0.6f, -0.6f}, {W - 0.25f, -0.25f}, {-1.5f, -2.5f},
                          {W + 0.25f, 1.3f}, {1.3f, H + 0.75f}, {2 * W + 0.6f, 0.5f}, {0.5f, 2 * H + 1.2f},
                          {-W - 0.3f, 3 * H + 0.1f}, {-2 * W + 0.3f, -H - 0.4f}, {1.1f, 1.9f},
                          {1.5f + 1 / 512.0f, 0.5f + 3 / 512.0f}, {3.7f, 2.2f}, {1.25f, -H + 0.7f}};
        std::vector<float4> p;
        for (auto& q : pts) p.push_back(make_float4(q[0], q[1], 0, 0));
        char name[16];
        snprintf(name, sizeof name, "2d.%dx%d", w, h);
        all_modes(name, TEX2D, a2, s, p);
        CHECK(cudaFreeArray(a2));
    }

    // the points and texels of e2e_textures.cu's failing 2-D check (13 x 7), every 25th point
    const int w = 13, h = 7;
    std::vector<float> ramp(w * h);
    for (int i = 0; i < w * h; i++) ramp[i] = (float)((i * 37 + 11) % 101) * 0.25f;
    cudaArray_t a13 = make_array(cudaCreateChannelDesc<float>(), w, h, 0, 0, ramp.data());
    for (int normalized = 0; normalized < 2; normalized++)
        for (int m = 0; m < 4; m++)
            for (int linear = 0; linear < 2; linear++) {
                float scale = normalized ? 0.11f : 1.0f;
                std::vector<float4> p;
                for (int i = 0; i < 400; i += 25)
                    p.push_back(make_float4((-1.7f + i * 0.0731f) * scale, (9.0f - i * 0.0413f) * scale, 0, 0));
                char name[64];
                snprintf(name, sizeof name, "e2e.13x7.%s.%s.%s", MODE_NAMES[m], linear ? "linear" : "point",
                         normalized ? "norm" : "unnorm");
                cudaTextureObject_t t = make_texture(a13, MODES[m], linear, normalized);
                run(name, TEX2D, t, p);
                CHECK(cudaDestroyTextureObject(t));
            }
    CHECK(cudaFreeArray(a1));
    CHECK(cudaFreeArray(a13));
}

// Linear filtering's weights: texels 0 and 256 blend to 256 * alpha, so the result is the
// weight as the hardware held it. Steps of 1/2048 inside a 1/256 show its rounding.
static void weights() {
    float t[2] = {0, 256};
    cudaArray_t a = make_array(cudaCreateChannelDesc<float>(), 2, 0, 0, 0, t);
    std::vector<float4> p;
    for (int k : {0, 1, 77, 255})
        for (int j = 0; j < 8; j++) p.push_back(make_float4(0.5f + k / 256.0f + j / 2048.0f, 0, 0, 0));
    for (float x : {0.5f + 1e-6f, 0.5f + 0.5f / 256 - 1e-6f, 0.5f + 0.5f / 256 + 1e-6f, 1.5f - 1e-6f, 0.5f - 1e-6f})
        p.push_back(make_float4(x, 0, 0, 0));
    int size[] = {2};
    for (int normalized = 0; normalized < 2; normalized++) {
        cudaTextureObject_t tx = make_texture(a, cudaAddressModeClamp, true, normalized);
        std::vector<float4> q(p);
        if (normalized)
            for (float4& v : q) v.x /= size[0];
        run(normalized ? "weight.1d.norm" : "weight.1d.unnorm", TEX1D, tx, q);
        CHECK(cudaDestroyTextureObject(tx));
    }
    // 2-D: only texel (1, 1) is non-zero, so the result is 65536 * alpha * beta
    float t2[4] = {0, 0, 0, 65536};
    cudaArray_t a2 = make_array(cudaCreateChannelDesc<float>(), 2, 2, 0, 0, t2);
    std::vector<float4> p2;
    for (float fa : {0.1f, 0.3f, 1.5f / 256, 0.5f, 0.77f, 0.999f})
        for (float fb : {0.2f, 2.5f / 256, 0.61f}) p2.push_back(make_float4(0.5f + fa, 0.5f + fb, 0, 0));
    cudaTextureObject_t tx2 = make_texture(a2, cudaAddressModeClamp, true, false);
    run("weight.2d.unnorm", TEX2D, tx2, p2);
    CHECK(cudaDestroyTextureObject(tx2));
    CHECK(cudaFreeArray(a));
    CHECK(cudaFreeArray(a2));
}

static void three_d_layered_cube() {
    // 3-D 4 x 3 x 2, texel 1 + x + 8y + 64z
    std::vector<float> t3(4 * 3 * 2);
    for (int i = 0; i < 24; i++) t3[i] = 1 + i % 4 + 8 * (i / 4 % 3) + 64 * (i / 12);
    cudaArray_t a3 = make_array(cudaCreateChannelDesc<float>(), 4, 3, 2, 0, t3.data());
    int size3[] = {4, 3, 2};
    std::vector<float4> p3;
    for (auto q : {make_float4(0.5f, 0.5f, 0.5f, 0), make_float4(1, 1, 1, 0), make_float4(2.3f, 1.7f, 0.9f, 0),
                   make_float4(-0.4f, 3.2f, 2.6f, 0), make_float4(4.6f, -1.1f, -0.7f, 0),
                   make_float4(9.1f, 7.3f, 5.2f, 0), make_float4(-5.5f, -3.9f, 1.4f, 0)})
        p3.push_back(q);
    all_modes("3d.4x3x2", TEX3D, a3, size3, p3);

    // layered: 1-D of 4 texels and 2-D of 4 x 3, 3 layers each; texel 1 + x + 8y + 64 * layer
    std::vector<float> tl(4 * 3 * 3), tl1(4 * 3);
    for (int i = 0; i < 36; i++) tl[i] = 1 + i % 4 + 8 * (i / 4 % 3) + 64 * (i / 12);
    for (int i = 0; i < 12; i++) tl1[i] = 1 + i % 4 + 64 * (i / 4);
    cudaArray_t l1 = make_array(cudaCreateChannelDesc<float>(), 4, 0, 3, cudaArrayLayered, tl1.data());
    cudaArray_t l2 = make_array(cudaCreateChannelDesc<float>(), 4, 3, 3, cudaArrayLayered, tl.data());
    int sizel[] = {4, 3};
    std::vector<float4> pl1, pl2;
    for (int layer : {-1, 0, 1, 2, 3, 100})
        for (float x : {0.7f, 3.9f, -1.2f}) {
            pl1.push_back(make_float4(x, (float)layer, 0, 0));
            pl2.push_back(make_float4(x, 2.6f - x, (float)layer, 0));
        }
    for (int linear = 0; linear < 2; linear++) {
        std::vector<float4> q1(pl1), q2(pl2);
        cudaTextureAddressMode mode = linear ? cudaAddressModeClamp : cudaAddressModeWrap;
        if (!linear)  // wrap, normalized
            for (float4& v : q1) v.x /= sizel[0];
        if (!linear)
            for (float4& v : q2) v.x /= sizel[0], v.y /= sizel[1];
        cudaTextureObject_t t1 = make_texture(l1, mode, linear, !linear), t2 = make_texture(l2, mode, linear, !linear);
        run(linear ? "layered1d.clamp.linear.unnorm" : "layered1d.wrap.point.norm", TEX1D_LAYERED, t1, q1);
        run(linear ? "layered2d.clamp.linear.unnorm" : "layered2d.wrap.point.norm", TEX2D_LAYERED, t2, q2);
        CHECK(cudaDestroyTextureObject(t1));
        CHECK(cudaDestroyTextureObject(t2));
    }

    // cubemap, 6 faces of 2 x 2, texel 1 + x + 2y + 16 * face
    std::vector<float> tc(2 * 2 * 6);
    for (int i = 0; i < 24; i++) tc[i] = 1 + i % 4 + 16 * (i / 4);
    cudaArray_t ac = make_array(cudaCreateChannelDesc<float>(), 2, 2, 6, cudaArrayCubemap, tc.data());
    std::vector<float4> dirs;
    for (auto d : {make_float4(1, 0.2f, -0.3f, 0), make_float4(-1, 0.2f, 0.3f, 0), make_float4(0.1f, 1, 0.4f, 0),
                   make_float4(0.1f, -1, 0.4f, 0), make_float4(0.3f, 0.2f, 1, 0), make_float4(0.3f, -0.2f, -1, 0),
                   make_float4(2, -0.6f, 1.1f, 0), make_float4(1, 1, 0, 0), make_float4(1, 0, 1, 0),
                   make_float4(0, 1, -1, 0), make_float4(1, 1, 1, 0), make_float4(-1, -1, -1, 0),
                   make_float4(1, 0.99f, 0.2f, 0), make_float4(0.25f, 0.25f, -1, 0)})
        dirs.push_back(d);
    for (int linear = 0; linear < 2; linear++) {
        cudaTextureObject_t t = make_texture(ac, cudaAddressModeClamp, linear, true);
        run(linear ? "cube.clamp.linear" : "cube.clamp.point", CUBE, t, dirs);
        CHECK(cudaDestroyTextureObject(t));
    }
    for (cudaArray_t a : {a3, l1, l2, ac}) CHECK(cudaFreeArray(a));
}

static void rgba_gather_linear() {
    // uchar4 4 x 4 read as normalized floats: 8-bit texels through the filter
    std::vector<uchar4> rgba(16);
    for (int i = 0; i < 16; i++) rgba[i] = make_uchar4(i * 17, 255 - i * 13, (i * 97) % 256, i % 2 ? 255 : 1);
    cudaArray_t a8 = make_array(cudaCreateChannelDesc<uchar4>(), 4, 4, 0, 0, rgba.data());
    std::vector<float4> p;
    for (auto q : {make_float2(0.5f, 0.5f), make_float2(1, 1), make_float2(1.3f, 2.9f), make_float2(-0.7f, 1.5f),
                   make_float2(3.8f, 4.6f), make_float2(2.5f + 1 / 512.0f, 0.5f), make_float2(6.2f, -1.3f)})
        p.push_back(make_float4(q.x, q.y, 0, 0));
    struct { cudaTextureAddressMode mode; bool linear, normalized; const char* name; } cases[] = {
        {cudaAddressModeClamp, true, false, "rgba8.clamp.linear.unnorm"},
        {cudaAddressModeWrap, true, true, "rgba8.wrap.linear.norm"},
        {cudaAddressModeBorder, true, false, "rgba8.border.linear.unnorm"},
        {cudaAddressModeMirror, false, true, "rgba8.mirror.point.norm"}};
    for (auto& c : cases) {
        std::vector<float4> q(p);
        if (c.normalized)
            for (float4& v : q) v.x /= 4, v.y /= 4;
        cudaTextureObject_t t = make_texture(a8, c.mode, c.linear, c.normalized, cudaReadModeNormalizedFloat);
        run(c.name, TEX2D_RGBA, t, q);
        CHECK(cudaDestroyTextureObject(t));
    }

    // tld4: every component of the uchar4 texture, and the float 5 x 3 one in three modes
    std::vector<float4> g;
    for (int comp = 0; comp < 4; comp++)
        for (auto q : {make_float2(0.5f, 0.5f), make_float2(1.2f, 2.7f), make_float2(-0.3f, 3.9f)})
            g.push_back(make_float4(q.x, q.y, (float)comp, 0));
    cudaTextureObject_t tg = make_texture(a8, cudaAddressModeClamp, false, false, cudaReadModeNormalizedFloat);
    run("gather.rgba8.clamp.unnorm", GATHER, tg, g);
    CHECK(cudaDestroyTextureObject(tg));
    std::vector<float> t53(15);
    for (int i = 0; i < 15; i++) t53[i] = 1 + i % 5 + 8 * (i / 5);
    cudaArray_t a53 = make_array(cudaCreateChannelDesc<float>(), 5, 3, 0, 0, t53.data());
    std::vector<float4> g53;
    for (auto q : {make_float2(0.5f, 0.5f), make_float2(1, 1), make_float2(2.7f, 1.2f), make_float2(0.2f, 0.3f),
                   make_float2(4.9f, 2.8f), make_float2(-1.4f, 3.6f), make_float2(7.3f, -2.1f)})
        g53.push_back(make_float4(q.x, q.y, 0, 0));
    for (int m : {0, 1, 3})
        for (int normalized = 0; normalized < 2; normalized++) {
            std::vector<float4> q(g53);
            if (normalized)
                for (float4& v : q) v.x /= 5, v.y /= 3;
            char name[48];
            snprintf(name, sizeof name, "gather.2d.5x3.%s.%s", MODE_NAMES[m], normalized ? "norm" : "unnorm");
            cudaTextureObject_t t = make_texture(a53, MODES[m], false, normalized);
            run(name, GATHER, t, q);
            CHECK(cudaDestroyTextureObject(t));
        }

    // tex1Dfetch over linear memory: outside reads 0
    float lin[5] = {1, 2, 3, 4, 5}, *dl;
    CHECK(cudaMalloc(&dl, sizeof lin));
    CHECK(cudaMemcpy(dl, lin, sizeof lin, cudaMemcpyHostToDevice));
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeLinear;
    res.res.linear.devPtr = dl;
    res.res.linear.desc = cudaCreateChannelDesc<float>();
    res.res.linear.sizeInBytes = sizeof lin;
    cudaTextureDesc td = {};
    cudaTextureObject_t tl;
    CHECK(cudaCreateTextureObject(&tl, &res, &td, nullptr));
    std::vector<float4> idx;
    for (int i : {-1, 0, 4, 5, 1000}) idx.push_back(make_float4((float)i, 0, 0, 0));
    run("fetch.linear", FETCH, tl, idx);
    CHECK(cudaDestroyTextureObject(tl));
    CHECK(cudaFree(dl));
    CHECK(cudaFreeArray(a8));
    CHECK(cudaFreeArray(a53));
}

// ---- trilinear weights, read off directly ------------------------------------------------
// Eight float textures of the same size whose texels are 1 where (x & 1) + 2 (y & 1) + 4 (z & 1)
// equals the texture's class k and 0 elsewhere: a footprint of 2 x 2 x 2 texels holds one texel
// of each class, so fetch k is the weight (in 1/256: 256 * the value) the GPU gave the corner
// of class k; where clamping folds two corners onto one texel, their sum. One line per point:
// `tri.parity.WxHxD... x y z -> k0 .. k7`. Next to them `tri.ramp...` fetches the same
// points of e2e_textures.cu's 6 x 5 x 4 ramp texture (whose 3-D check the H200 failed), and
// `bi.parity...` the 2-D analogue (4 classes).
struct Many {
    cudaTextureObject_t t[8];
};
__global__ void probe_many(Many m, int count, int dims, const float4* p, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 c = p[i];
    for (int k = 0; k < count; k++)
        out[i * count + k] = dims == 3 ? tex3D<float>(m.t[k], c.x, c.y, c.z) : tex2D<float>(m.t[k], c.x, c.y);
}

static void run_many(const char* name, const Many& m, int count, int dims, const std::vector<float4>& pts) {
    int n = (int)pts.size();
    float4* dp;
    float* dout;
    CHECK(cudaMalloc(&dp, n * sizeof(float4)));
    CHECK(cudaMalloc(&dout, n * count * sizeof(float)));
    CHECK(cudaMemcpy(dp, pts.data(), n * sizeof(float4), cudaMemcpyHostToDevice));
    probe_many<<<(n + 63) / 64, 64>>>(m, count, dims, dp, dout, n);
    CHECK(cudaGetLastError());
    std::vector<float> got(n * count);
    CHECK(cudaMemcpy(got.data(), dout, n * count * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        printf("%s", name);
        for (int c = 0; c < dims; c++) printf(" %.9g", (&pts[i].x)[c]);
        printf(" ->");
        for (int k = 0; k < count; k++) printf(" %08x", bits(got[i * count + k]));
        printf("\n");
    }
    CHECK(cudaFree(dp));
    CHECK(cudaFree(dout));
}

// The parity textures of a w x h x d array (d = 0: 2-D, 4 classes), and the arrays behind them.
static int parity_textures(int w, int h, int d, bool normalized, Many& m, cudaArray_t* arrays) {
    int count = d ? 8 : 4, depth = d ? d : 1;
    std::vector<float> texels((size_t)w * h * depth);
    for (int k = 0; k < count; k++) {
        for (int z = 0; z < depth; z++)
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++)
                    texels[((size_t)z * h + y) * w + x] = ((x & 1) + 2 * (y & 1) + 4 * (z & 1)) == k ? 1.0f : 0.0f;
        arrays[k] = make_array(cudaCreateChannelDesc<float>(), w, h, d, 0, texels.data());
        m.t[k] = make_texture(arrays[k], cudaAddressModeClamp, true, normalized);
    }
    return count;
}
static void free_many(Many& m, cudaArray_t* arrays, int count) {
    for (int k = 0; k < count; k++) {
        CHECK(cudaDestroyTextureObject(m.t[k]));
        CHECK(cudaFreeArray(arrays[k]));
    }
}

// Designed points: per axis the 8-bit weight a (coordinate lo + 0.5 + a / 256, exact), chosen
// so that the rules a trilinear split could follow differ: random weights, products of two axes'
// weights that are odd multiples of 1/512 (ties when rounded to 1/256) with the third at several
// values, for each pair of axes; a 1/2 weight on one axis; equal weights; and per axis steps of
// 1/2048 across three of its 1/256 steps (how each axis's weight is rounded in 3-D).
static std::vector<float4> designed_points(int lx, int ly, int lz) {
    std::vector<int> a;  // triples of weights
    unsigned seed = 12345;
    auto next = [&]() { seed = seed * 1103515245u + 12345u; return (int)((seed >> 16) & 255); };
    for (int i = 0; i < 160; i++) {
        int x = next(), y = next(), z = next();
        a.insert(a.end(), {x, y, z});
    }
    const int ties[][2] = {{1, 128}, {128, 1}, {3, 128}, {128, 255}, {255, 128}, {2, 64}, {64, 2}, {6, 64},
                           {192, 2}, {2, 192}, {4, 32}, {12, 96}, {96, 12}, {20, 160}, {160, 20}};
    const int pairs[][3] = {{0, 1, 2}, {0, 2, 1}, {1, 2, 0}};  // the two axes of the tie, the third
    for (auto& pr : pairs)
        for (auto& t : ties)
            for (int r : {0, 1, 64, 77, 128, 192, 255}) {
                int w[3];
                w[pr[0]] = t[0], w[pr[1]] = t[1], w[pr[2]] = r;
                a.insert(a.end(), {w[0], w[1], w[2]});
            }
    for (int axis = 0; axis < 3; axis++)
        for (int i = 0; i < 20; i++) {
            int w[3] = {next(), next(), next()};
            w[axis] = 128;
            a.insert(a.end(), {w[0], w[1], w[2]});
        }
    for (int e : {1, 2, 16, 64, 85, 127, 128, 129, 171, 192, 240, 254, 255}) a.insert(a.end(), {e, e, e});
    std::vector<float4> p;
    for (size_t i = 0; i < a.size(); i += 3)
        p.push_back(make_float4(lx + 0.5f + a[i] / 256.0f, ly + 0.5f + a[i + 1] / 256.0f, lz + 0.5f + a[i + 2] / 256.0f, 0));
    const float base[3] = {77 / 256.0f, 150 / 256.0f, 200 / 256.0f}, lo[3] = {(float)lx, (float)ly, (float)lz};
    for (int axis = 0; axis < 3; axis++)
        for (int step : {0, 100, 255})
            for (int j = 0; j < 8; j++) {
                float c[3];
                for (int k = 0; k < 3; k++) c[k] = lo[k] + 0.5f + base[k];
                c[axis] = lo[axis] + 0.5f + (step * 8 + j) / 2048.0f;
                p.push_back(make_float4(c[0], c[1], c[2], 0));
            }
    return p;
}

static void trilinear() {
    const int w = 6, h = 5, d = 4;
    // e2e_textures.cu's 3-D points, as it computes them
    std::vector<float4> e2e;
    for (int i = 0; i < 300; i++) e2e.push_back(make_float4(-0.6f + i * 0.027f, 6.1f - i * 0.019f, 0.3f + i * 0.013f, 0));
    std::vector<float4> designed = designed_points(2, 1, 1);
    Many m;
    cudaArray_t arrays[8];
    int count = parity_textures(w, h, d, false, m, arrays);
    run_many("tri.parity.6x5x4.clamp.linear.unnorm", m, count, 3, e2e);
    run_many("tri.parity.6x5x4.clamp.linear.unnorm", m, count, 3, designed);
    free_many(m, arrays, count);

    // the ramp texture itself: (i * 37 + 11) % 101 * 0.5
    std::vector<float> ramp(w * h * d);
    for (int i = 0; i < w * h * d; i++) ramp[i] = (float)((i * 37 + 11) % 101) * 0.5f;
    cudaArray_t a = make_array(cudaCreateChannelDesc<float>(), w, h, d, 0, ramp.data());
    cudaTextureObject_t t = make_texture(a, cudaAddressModeClamp, true, false);
    run("tri.ramp.6x5x4.clamp.linear.unnorm", TEX3D, t, e2e);
    run("tri.ramp.6x5x4.clamp.linear.unnorm", TEX3D, t, designed);
    CHECK(cudaDestroyTextureObject(t));
    CHECK(cudaFreeArray(a));

    // normalized coordinates: the e2e points divided by the size
    count = parity_textures(w, h, d, true, m, arrays);
    std::vector<float4> norm(e2e);
    for (float4& q : norm) q.x /= w, q.y /= h, q.z /= d;
    run_many("tri.parity.6x5x4.clamp.linear.norm", m, count, 3, norm);
    free_many(m, arrays, count);

    // a larger texture, the designed weights further from the origin
    count = parity_textures(32, 16, 8, false, m, arrays);
    run_many("tri.parity.32x16x8.clamp.linear.unnorm", m, count, 3, designed_points(17, 9, 5));
    free_many(m, arrays, count);

    // 2-D: the designed points' (x, y)
    count = parity_textures(w, h, 0, false, m, arrays);
    run_many("bi.parity.6x5.clamp.linear.unnorm", m, count, 2, designed);
    free_many(m, arrays, count);
}

// ---- half-float texels through the filter ------------------------------------------------
// A filtered half texture returns a half (e2e_textures.cu's half check on the H200): these show
// how the blend is rounded to one. 1-D: neighbours whose blend lands halfway between two halves
// (2049 between 2048 and 2050, both signs; 1 + 2^-11; ...) at several weights; 2-D: the e2e's
// 9 x 8 texture and points; 3-D: the 6 x 5 x 4 ramp less 20 (both signs) at the e2e's points.
static cudaArray_t half_array(const std::vector<float>& v, int w, int h, int d) {
    std::vector<__half> hv(v.size());
    for (size_t i = 0; i < v.size(); i++) hv[i] = __float2half(v[i]);
    return make_array(cudaCreateChannelDescHalf(), w, h, d, 0, hv.data());
}

static void halves() {
    std::vector<float> t1 = {2048, 2050, -2048, -2050, 1, 1.0009765625f, -1, -1.0009765625f, 3, 6, -3, -6,
                             0.000061035156f, 0.00006109476f, 65504, 65472};
    cudaArray_t a1 = half_array(t1, (int)t1.size(), 0, 0);
    std::vector<float4> p1;
    for (int i = 0; i + 1 < (int)t1.size(); i++)
        for (int j : {0, 1, 64, 85, 127, 128, 129, 192, 255}) p1.push_back(make_float4(i + 0.5f + j / 256.0f, 0, 0, 0));
    cudaTextureObject_t t = make_texture(a1, cudaAddressModeClamp, true, false);
    run("half.1d.clamp.linear.unnorm", TEX1D, t, p1);
    CHECK(cudaDestroyTextureObject(t));

    std::vector<float> t2(9 * 8);
    for (int i = 0; i < 9 * 8; i++) t2[i] = i * 0.125f - 2;
    cudaArray_t a2 = half_array(t2, 9, 8, 0);
    std::vector<float4> p2;
    for (int i = 0; i < 200; i++) p2.push_back(make_float4(-0.5f + i * 0.051f, 8.5f - i * 0.047f, 0, 0));
    t = make_texture(a2, cudaAddressModeClamp, true, false);
    run("half.2d.9x8.clamp.linear.unnorm", TEX2D, t, p2);
    CHECK(cudaDestroyTextureObject(t));

    std::vector<float> t3(6 * 5 * 4);
    for (int i = 0; i < 120; i++) t3[i] = (float)((i * 37 + 11) % 101) * 0.5f - 20;
    cudaArray_t a3 = half_array(t3, 6, 5, 4);
    std::vector<float4> p3;
    for (int i = 0; i < 300; i++) p3.push_back(make_float4(-0.6f + i * 0.027f, 6.1f - i * 0.019f, 0.3f + i * 0.013f, 0));
    t = make_texture(a3, cudaAddressModeClamp, true, false);
    run("half.3d.6x5x4.clamp.linear.unnorm", TEX3D, t, p3);
    CHECK(cudaDestroyTextureObject(t));

    // how far below the footprint's largest texel a small one still counts: 1 next to s * 2^-m
    // (s = 1, 1.25, 1.5, 1.75; m = 9..18), one of them a 2x2 footprint's largest corner in 2-D
    std::vector<float> ta;
    for (int m = 9; m <= 18; m++)
        for (float s : {1.0f, 1.25f, 1.5f, 1.75f}) ta.push_back(1.0f), ta.push_back(ldexpf(s, -m));
    ta.push_back(-1.0f);
    cudaArray_t aa = half_array(ta, (int)ta.size(), 0, 0);
    std::vector<float4> pa;
    for (int i = 0; i + 1 < (int)ta.size(); i++)
        for (int j : {1, 128, 255}) pa.push_back(make_float4(i + 0.5f + j / 256.0f, 0, 0, 0));
    t = make_texture(aa, cudaAddressModeClamp, true, false);
    run("half.align.1d.clamp.linear.unnorm", TEX1D, t, pa);
    CHECK(cudaDestroyTextureObject(t));
    std::vector<float> tb(2 * 20);
    for (int m = 9; m <= 18; m++) {  // blocks of 2 x 2: 1 at the lower left, the others 2^-m * 1, 1.5, -1.25
        tb[2 * (m - 9)] = 1.0f, tb[2 * (m - 9) + 1] = ldexpf(1.0f, -m);
        tb[20 + 2 * (m - 9)] = ldexpf(1.5f, -m), tb[20 + 2 * (m - 9) + 1] = ldexpf(-1.25f, -m);
    }
    cudaArray_t ab = half_array(tb, 20, 2, 0);
    std::vector<float4> pb;
    for (int m = 0; m < 10; m++)
        for (int j : {1, 128, 255})
            for (int k : {1, 200}) pb.push_back(make_float4(2 * m + 0.5f + j / 256.0f, 0.5f + k / 256.0f, 0, 0));
    t = make_texture(ab, cudaAddressModeClamp, true, false);
    run("half.align.2d.clamp.linear.unnorm", TEX2D, t, pb);
    CHECK(cudaDestroyTextureObject(t));
    for (cudaArray_t a : {a1, a2, a3, aa, ab}) CHECK(cudaFreeArray(a));
}

// ---- surfaces: a 4 x 3 float array, texel 1 + x + 8y ----------------------------------------
__global__ void surf_read(cudaSurfaceObject_t s, const int2* p, float* out, int n) {
    int i = threadIdx.x;
    if (i < n) {
        out[2 * i] = surf2Dread<float>(s, p[i].x, p[i].y, cudaBoundaryModeZero);
        out[2 * i + 1] = surf2Dread<float>(s, p[i].x, p[i].y, cudaBoundaryModeClamp);
    }
}
// One thread, in order, so that clamped writes that land on the same texel have a defined winner.
__global__ void surf_write(cudaSurfaceObject_t s, const int2* p, int n) {
    for (int i = 0; i < n; i++) {
        surf2Dwrite(100.0f + i, s, p[i].x, p[i].y, cudaBoundaryModeZero);
        surf2Dwrite(200.0f + i, s, p[i].x, p[i].y + 1, cudaBoundaryModeClamp);
    }
}
__global__ void surf_trap(cudaSurfaceObject_t s, int x, int y, float* out) {
    *out = surf2Dread<float>(s, x, y, cudaBoundaryModeTrap);
}

static void surfaces() {
    const int w = 4, h = 3;
    float texels[w * h];
    for (int i = 0; i < w * h; i++) texels[i] = 1 + i % w + 8 * (i / w);
    cudaArray_t a = make_array(cudaCreateChannelDesc<float>(), w, h, 0, cudaArraySurfaceLoadStore, texels);
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeArray;
    res.res.array.array = a;
    cudaSurfaceObject_t s;
    CHECK(cudaCreateSurfaceObject(&s, &res));
    // x in bytes; 4-byte aligned, as the texel size requires
    std::vector<int2> p = {make_int2(0, 0), make_int2(12, 2), make_int2(-4, 0), make_int2(0, -1), make_int2(16, 1),
                           make_int2(12, 3), make_int2(400, 1), make_int2(-400, -5), make_int2(4, 100)};
    int n = (int)p.size();
    int2* dp;
    float* dout;
    CHECK(cudaMalloc(&dp, n * sizeof(int2)));
    CHECK(cudaMalloc(&dout, 2 * n * sizeof(float)));
    CHECK(cudaMemcpy(dp, p.data(), n * sizeof(int2), cudaMemcpyHostToDevice));
    surf_read<<<1, n>>>(s, dp, dout, n);
    std::vector<float> got(2 * n);
    CHECK(cudaMemcpy(got.data(), dout, 2 * n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        printf("surf.read.zero %d %d -> %08x\n", p[i].x, p[i].y, bits(got[2 * i]));
        printf("surf.read.clamp %d %d -> %08x\n", p[i].x, p[i].y, bits(got[2 * i + 1]));
    }
    // writes: .zero drops those outside, .clamp moves them (to y + 1, so the two don't overwrite)
    surf_write<<<1, 1>>>(s, dp, n);
    CHECK(cudaGetLastError());
    float back[w * h];
    CHECK(cudaMemcpy2DFromArray(back, w * 4, a, 0, 0, w * 4, h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < w * h; i++) printf("surf.written %d %d -> %08x\n", i % w * 4, i / w, bits(back[i]));
    // .trap: inside reads; outside ends the context, so it comes last
    surf_trap<<<1, 1>>>(s, 8, 1, dout);
    CHECK(cudaMemcpy(got.data(), dout, sizeof(float), cudaMemcpyDeviceToHost));
    printf("surf.read.trap 8 1 -> %08x\n", bits(got[0]));
    surf_trap<<<1, 1>>>(s, 16, 1, dout);
    printf("surf.read.trap 16 1 -> %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
}

int main() {
    one_and_two_d();
    weights();
    three_d_layered_cube();
    rgba_gather_linear();
    trilinear();
    halves();
    surfaces();
    return 0;
}

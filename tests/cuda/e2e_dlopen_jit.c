/* A C client that dlopens the driver itself (argv[1]: "libcuda.so.1" by default, or an
 * absolute path such as NVIDIA's /usr/lib/x86_64-linux-gnu/libcuda.so.1; "linked": use the
 * libcuda the program was linked against with -lcuda, found through its RPATH), JIT-loads PTX text
 * with cuModuleLoadData, launches it, reads a module global with cuModuleGetGlobal, and links
 * two PTX modules with cuLinkCreate/AddData/Complete. No CUDA headers: the few types it needs
 * are declared here. Build: nvcc -cudart none e2e_dlopen_jit.c -ldl */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUlinkState;
typedef unsigned long long CUdeviceptr;

static const char *SAXPY_PTX =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .global .align 4 .u32 launches;\n"
    ".visible .entry saxpy(.param .u64 x, .param .u64 y, .param .f32 a, .param .u32 n)\n{\n"
    "  .reg .pred %p<3>; .reg .b32 %r<8>; .reg .f32 %f<5>; .reg .b64 %rd<8>;\n"
    "  ld.param.u64 %rd1, [x]; ld.param.u64 %rd2, [y]; ld.param.f32 %f1, [a]; ld.param.u32 %r1, [n];\n"
    "  mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;\n"
    "  mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "  setp.ne.u32 %p2, %r5, 0;\n"
    "  @%p2 bra WORK;\n"
    "  atom.global.add.u32 %r6, [launches], 1;\n"
    "WORK:\n"
    "  setp.ge.u32 %p1, %r5, %r1;\n"
    "  @%p1 bra DONE;\n"
    "  cvta.to.global.u64 %rd3, %rd1; cvta.to.global.u64 %rd4, %rd2;\n"
    "  mul.wide.u32 %rd5, %r5, 4;\n"
    "  add.s64 %rd6, %rd3, %rd5; add.s64 %rd7, %rd4, %rd5;\n"
    "  ld.global.f32 %f2, [%rd6]; ld.global.f32 %f3, [%rd7];\n"
    "  fma.rn.f32 %f4, %f1, %f2, %f3;\n"
    "  st.global.f32 [%rd7], %f4;\n"
    "DONE:\n  ret;\n}\n";

/* Two modules for the linker: the kernel calls a function the other module defines. */
static const char *CALLER_PTX =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".extern .func (.param .b32 r) triple_plus(.param .b32 v);\n"
    ".visible .entry call_it(.param .u64 out)\n{\n"
    "  .reg .b32 %r<4>; .reg .b64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [out];\n"
    "  mov.u32 %r1, %tid.x;\n"
    "  { .param .b32 a; .param .b32 r; st.param.b32 [a], %r1;\n"
    "    call (r), triple_plus, (a); ld.param.b32 %r2, [r]; }\n"
    "  mul.wide.u32 %rd2, %r1, 4; add.s64 %rd3, %rd1, %rd2;\n"
    "  st.global.u32 [%rd3], %r2;\n  ret;\n}\n";
static const char *CALLEE_PTX =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .func (.param .b32 r) triple_plus(.param .b32 v)\n{\n"
    "  .reg .b32 %r<3>;\n  ld.param.b32 %r1, [v];\n  mad.lo.s32 %r2, %r1, 3, 11;\n"
    "  st.param.b32 [r], %r2;\n  ret;\n}\n";

static void *lib;
static int failures;

static void *sym(const char *name) {
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "missing %s\n", name);
        exit(3);
    }
    return p;
}

#define CALL(name, proto, ...) ((CUresult(*) proto)sym(#name))(__VA_ARGS__)
#define CHECK(expr)                                                                        \
    do {                                                                                   \
        CUresult rc_ = (expr);                                                             \
        if (rc_ != 0) { fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #expr, rc_); failures++; } \
    } while (0)

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "libcuda.so.1";
    int use_linked = !strcmp(path, "linked");
    lib = use_linked ? RTLD_DEFAULT : dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!use_linked && !lib) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return 2;
    }
    void *(*is_ours)(void) = (void *(*)(void))dlsym(lib, "zluda_shim_path");
    printf("driver: %s\n", is_ours ? "zluda" : "other");

    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CHECK(CALL(cuInit, (unsigned), 0));
    CHECK(CALL(cuCtxCreate_v2, (CUcontext *, unsigned, int), &ctx, 0, 0));
    CHECK(CALL(cuModuleLoadData, (CUmodule *, const void *), &mod, SAXPY_PTX));
    CHECK(CALL(cuModuleGetFunction, (CUfunction *, CUmodule, const char *), &fn, mod, "saxpy"));

    enum { N = 3000 };
    static float x[N], y[N], out[N];
    for (int i = 0; i < N; i++) {
        x[i] = i * 0.5f;
        y[i] = (float)(i % 7);
    }
    CUdeviceptr dx, dy;
    CHECK(CALL(cuMemAlloc_v2, (CUdeviceptr *, size_t), &dx, sizeof x));
    CHECK(CALL(cuMemAlloc_v2, (CUdeviceptr *, size_t), &dy, sizeof y));
    CHECK(CALL(cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t), dx, x, sizeof x));
    CHECK(CALL(cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t), dy, y, sizeof y));
    float a = 2.0f;
    unsigned n = N;
    void *params[] = {&dx, &dy, &a, &n};
    for (int launch = 0; launch < 2; launch++)
        CHECK(CALL(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    void *, void **, void **),
                   fn, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
    CHECK(CALL(cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t), out, dy, sizeof out));
    for (int i = 0; i < N; i++)
        if (out[i] != (float)(i % 7) + 2 * 2.0f * i * 0.5f && failures++ < 5)
            fprintf(stderr, "saxpy[%d] = %f\n", i, out[i]);

    CUdeviceptr gaddr;
    size_t gsize;
    unsigned launches = 0;
    CHECK(CALL(cuModuleGetGlobal_v2, (CUdeviceptr *, size_t *, CUmodule, const char *), &gaddr, &gsize, mod, "launches"));
    CHECK(CALL(cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t), &launches, gaddr, sizeof launches));
    if (gsize != 4 || launches != 2) {
        fprintf(stderr, "global launches: size %zu value %u\n", gsize, launches);
        failures++;
    }
    if (CALL(cuModuleGetGlobal_v2, (CUdeviceptr *, size_t *, CUmodule, const char *), &gaddr, &gsize, mod, "nope") != 500) {
        fprintf(stderr, "a missing global is not CUDA_ERROR_NOT_FOUND\n");
        failures++;
    }

    /* the linker: CU_JIT_INPUT_PTX = 1 */
    CUlinkState link;
    void *cubin;
    size_t cubin_size;
    CUmodule linked;
    CUfunction call_it;
    CHECK(CALL(cuLinkCreate_v2, (unsigned, void *, void **, CUlinkState *), 0, NULL, NULL, &link));
    CHECK(CALL(cuLinkAddData_v2, (CUlinkState, int, void *, size_t, const char *, unsigned, void *, void **), link, 1,
               (void *)CALLER_PTX, strlen(CALLER_PTX) + 1, "caller.ptx", 0, NULL, NULL));
    CHECK(CALL(cuLinkAddData_v2, (CUlinkState, int, void *, size_t, const char *, unsigned, void *, void **), link, 1,
               (void *)CALLEE_PTX, strlen(CALLEE_PTX) + 1, "callee.ptx", 0, NULL, NULL));
    CHECK(CALL(cuLinkComplete, (CUlinkState, void **, size_t *), link, &cubin, &cubin_size));
    CHECK(CALL(cuModuleLoadData, (CUmodule *, const void *), &linked, cubin));
    CHECK(CALL(cuLinkDestroy, (CUlinkState), link));
    CHECK(CALL(cuModuleGetFunction, (CUfunction *, CUmodule, const char *), &call_it, linked, "call_it"));
    CUdeviceptr dres;
    int res[64];
    CHECK(CALL(cuMemAlloc_v2, (CUdeviceptr *, size_t), &dres, sizeof res));
    void *link_params[] = {&dres};
    CHECK(CALL(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                void *, void **, void **),
               call_it, 1, 1, 1, 64, 1, 1, 0, NULL, link_params, NULL));
    CHECK(CALL(cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t), res, dres, sizeof res));
    for (int i = 0; i < 64; i++)
        if (res[i] != i * 3 + 11 && failures++ < 5) fprintf(stderr, "linked[%d] = %d\n", i, res[i]);

    CHECK(CALL(cuModuleUnload, (CUmodule), linked));
    CHECK(CALL(cuModuleUnload, (CUmodule), mod));
    CHECK(CALL(cuCtxDestroy_v2, (CUcontext), ctx));
    printf("dlopen jit: %s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}

/* A C host for process-life checks (tests/e2e/test_process_life.py); argv[1] picks the case:
 *   spin          launch a kernel that never ends and wait for it ("spinning" on stdout first);
 *   spin-handler  the same with the program's own SIGINT handler (prints "handler", exits 42);
 *   dispositions  after the driver ran a kernel, print SIGINT/SIGTERM/SIGPIPE's disposition;
 *   fork          fork after cuInit and an allocation: the child's calls print their results,
 *                 the parent then copies its data back ("parent: ok").
 * No CUDA headers: the few types it needs are declared here. Build: nvcc -cudart none -ldl */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int CUresult;
typedef void *CUcontext, *CUmodule, *CUfunction;
typedef unsigned long long CUdeviceptr;

/* loops until `stop` is set, which nothing does */
static const char *SPIN_PTX =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .global .align 4 .u32 stop;\n"
    ".visible .entry spin()\n{\n"
    "  .reg .pred %p<2>; .reg .b32 %r<2>;\n"
    "LOOP:\n"
    "  ld.volatile.global.u32 %r1, [stop];\n"
    "  setp.eq.u32 %p1, %r1, 0;\n"
    "  @%p1 bra LOOP;\n"
    "  ret;\n}\n";

static const char *TOUCH_PTX =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry touch(.param .u64 out)\n{\n"
    "  .reg .b64 %rd<2>;\n"
    "  ld.param.u64 %rd1, [out];\n"
    "  st.global.u32 [%rd1], 7;\n"
    "  ret;\n}\n";

static void *lib;

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
        if (rc_ != 0) { fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #expr, rc_); exit(1); } \
    } while (0)
#define LAUNCH(fn, params)                                                                               \
    CALL(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, \
                          void *, void **, void **), fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL)

static CUfunction load(const char *ptx, const char *name) {
    CUmodule mod;
    CUfunction fn;
    CHECK(CALL(cuModuleLoadData, (CUmodule *, const void *), &mod, ptx));
    CHECK(CALL(cuModuleGetFunction, (CUfunction *, CUmodule, const char *), &fn, mod, name));
    return fn;
}

static void on_sigint(int sig) {
    (void)sig;
    static const char msg[] = "handler\n";
    if (write(1, msg, sizeof msg - 1) < 0) _exit(43);
    _exit(42);
}

static const char *disposition(int sig) {
    struct sigaction sa;
    sigaction(sig, NULL, &sa);
    if (sa.sa_handler == SIG_DFL) return "default";
    if (sa.sa_handler == SIG_IGN) return "ignored";
    return "handler";
}

static void spin(void) {
    CHECK(LAUNCH(load(SPIN_PTX, "spin"), NULL));
    printf("spinning\n");
    fflush(stdout);
    CUresult rc = CALL(cuCtxSynchronize, (void));
    printf("cuCtxSynchronize returned %d\n", rc);
}

static int fork_case(void) {
    CUdeviceptr d;
    int data[4] = {1, 2, 3, 4}, back[4] = {0};
    CHECK(CALL(cuMemAlloc_v2, (CUdeviceptr *, size_t), &d, sizeof data));
    CHECK(CALL(cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t), d, data, sizeof data));
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        CUdeviceptr d2;
        CUcontext ctx;
        int dev;
        printf("child cuInit %d\n", CALL(cuInit, (unsigned), 0));
        printf("child cuDeviceGet %d\n", CALL(cuDeviceGet, (int *, int), &dev, 0));
        printf("child cuCtxGetCurrent %d\n", CALL(cuCtxGetCurrent, (CUcontext *), &ctx));
        printf("child cuMemAlloc %d\n", CALL(cuMemAlloc_v2, (CUdeviceptr *, size_t), &d2, 16));
        printf("child cuMemcpyDtoH %d\n", CALL(cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t), back, d, sizeof back));
        printf("child cuCtxSynchronize %d\n", CALL(cuCtxSynchronize, (void)));
        fflush(stdout);
        _exit(0);
    }
    int status;
    waitpid(child, &status, 0);
    CHECK(CALL(cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t), back, d, sizeof back));
    if (memcmp(back, data, sizeof data)) {
        printf("parent: wrong data\n");
        return 1;
    }
    printf("parent: ok\n");
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "spin";
    if (!strcmp(mode, "spin-handler")) signal(SIGINT, on_sigint);
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    CUcontext ctx;
    CHECK(CALL(cuInit, (unsigned), 0));
    CHECK(CALL(cuCtxCreate_v2, (CUcontext *, unsigned, int), &ctx, 0, 0));
    if (!strncmp(mode, "spin", 4)) {
        spin();
        return 0;
    }
    if (!strcmp(mode, "dispositions")) {
        CUdeviceptr d;
        CHECK(CALL(cuMemAlloc_v2, (CUdeviceptr *, size_t), &d, 4));
        void *params[] = {&d};
        CHECK(LAUNCH(load(TOUCH_PTX, "touch"), params));
        CHECK(CALL(cuCtxSynchronize, (void)));
        printf("SIGINT %s\nSIGTERM %s\nSIGPIPE %s\n", disposition(SIGINT), disposition(SIGTERM), disposition(SIGPIPE));
        return 0;
    }
    if (!strcmp(mode, "fork")) return fork_case();
    fprintf(stderr, "unknown case %s\n", mode);
    return 2;
}

/* A C host of the driver, as cudart is one: dlopens "libcuda.so.1" RTLD_LOCAL, JIT-loads the
 * two-kernel module argv[1] (e2e_startup.ptx: with ZLUDA_SPLIT_IR_LINES=0 it takes the parallel
 * code generation path, child processes) and runs both; then calls the driver from atexit handlers, one
 * registered before cuInit (it runs after the driver has shut down: CUDA_ERROR_DEINITIALIZED)
 * and one after (the driver still runs). Build: cc e2e_startup.c -ldl */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDriverGetVersion)(int *);
static CUresult (*cuDeviceGetCount)(int *);
static CUresult (*cuDevicePrimaryCtxRetain)(void **, int);
static CUresult (*cuCtxSetCurrent)(void *);
static CUresult (*cuCtxSynchronize)(void);
static CUresult (*cuModuleLoadData)(void **, const void *);
static CUresult (*cuModuleGetFunction)(void **, void *, const char *);
static CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*cuMemFree)(CUdeviceptr);
static CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
static CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
static CUresult (*cuLaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  void *, void **, void **);
static CUdeviceptr buffer;

static void before_init_handler(void) { printf("atexit before cuInit: cuMemFree %d\n", cuMemFree(buffer)); }
static void after_init_handler(void) { printf("atexit after cuInit: cuCtxSynchronize %d\n", cuCtxSynchronize()); }

#define LOAD(name, symbol) *(void **)&name = dlsym(lib, symbol)
#define CHECK(call)                                                    \
    do {                                                               \
        CUresult rc_ = (call);                                         \
        if (rc_) {                                                     \
            printf("%s: %d\n", #call, rc_);                            \
            return 1;                                                  \
        }                                                              \
    } while (0)

static char ptx[1 << 16];

int main(int argc, char **argv) {
    FILE *f = argc > 1 ? fopen(argv[1], "r") : NULL;
    if (!f || !fread(ptx, 1, sizeof ptx - 1, f)) {
        printf("usage: %s MODULE.ptx\n", argv[0]);
        return 2;
    }
    fclose(f);
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("dlopen: %s\n", dlerror());
        return 1;
    }
    LOAD(cuInit, "cuInit");
    LOAD(cuDriverGetVersion, "cuDriverGetVersion");
    LOAD(cuDeviceGetCount, "cuDeviceGetCount");
    LOAD(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    LOAD(cuCtxSetCurrent, "cuCtxSetCurrent");
    LOAD(cuCtxSynchronize, "cuCtxSynchronize");
    LOAD(cuModuleLoadData, "cuModuleLoadData");
    LOAD(cuModuleGetFunction, "cuModuleGetFunction");
    LOAD(cuMemAlloc, "cuMemAlloc_v2");
    LOAD(cuMemFree, "cuMemFree_v2");
    LOAD(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    LOAD(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    LOAD(cuLaunchKernel, "cuLaunchKernel");
    atexit(before_init_handler);

    int version = 0, count = 0;
    CUresult init = cuInit(0);
    printf("cuInit %d cuDriverGetVersion %d cuDeviceGetCount %d\n", init, cuDriverGetVersion(&version),
           cuDeviceGetCount(&count));
    if (init) return 1;
    printf("devices %d version %d\n", count, version / 1000);
    void *ctx, *module, *add_one, *times_three;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&module, ptx));
    CHECK(cuModuleGetFunction(&add_one, module, "add_one"));
    CHECK(cuModuleGetFunction(&times_three, module, "times_three"));
    unsigned host[64];
    for (int i = 0; i < 64; i++) host[i] = i;
    CHECK(cuMemAlloc(&buffer, sizeof host));
    CHECK(cuMemcpyHtoD(buffer, host, sizeof host));
    void *params[] = {&buffer};
    CHECK(cuLaunchKernel(add_one, 1, 1, 1, 64, 1, 1, 0, NULL, params, NULL));
    CHECK(cuLaunchKernel(times_three, 1, 1, 1, 64, 1, 1, 0, NULL, params, NULL));
    CHECK(cuMemcpyDtoH(host, buffer, sizeof host));
    int wrong = 0;
    for (int i = 0; i < 64; i++) wrong += host[i] != (unsigned)(i + 1) * 3;
    printf("kernels: %s\n", wrong ? "WRONG" : "ok");
    atexit(after_init_handler);
    return wrong != 0;
}

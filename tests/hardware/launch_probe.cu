// Which code each caller gets for an invalid launch configuration, on NVIDIA's stack: through
// cudart (<<<>>>, cudaLaunchKernel) and straight from the driver (cuLaunchKernel from dlsym, as
// a program linked with -lcuda gets it, and as cuGetProcAddress hands it out). Prints `case: code name` lines; run with interpose.so preloaded
// to also see what the driver returned to cudart. Not built in CI (no NVIDIA driver there); the
// recorded output is tests/hardware/golden/launch_probe_*.txt.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <cstdio>

__global__ void k(int* p) { p[threadIdx.x] = 1; }

// cudaFuncAttributes' constSizeBytes / sharedSizeBytes for kernels with and without them
__constant__ float cvals[64];
__constant__ int cother[10];
__global__ void uses_const(float* p) { p[threadIdx.x] = cvals[threadIdx.x]; }
__global__ void uses_shared(float* p) {
    __shared__ float s[100];
    s[threadIdx.x] = p[threadIdx.x];
    __syncthreads();
    p[threadIdx.x] = s[99 - threadIdx.x];
}

// sizes that are not a multiple of 16, mixed alignments, and static beside dynamic shared memory
__global__ void shared_40(float* p) {
    __shared__ float s[10];
    s[threadIdx.x % 10] = p[threadIdx.x];
    __syncthreads();
    p[threadIdx.x] = s[9 - threadIdx.x % 10];
}
__global__ void shared_mixed(double* p) {
    __shared__ char c[3];
    __shared__ double d[2];
    if (threadIdx.x < 3) c[threadIdx.x] = (char)threadIdx.x;
    if (threadIdx.x < 2) d[threadIdx.x] = p[threadIdx.x];
    __syncthreads();
    p[threadIdx.x] = d[threadIdx.x % 2] + c[threadIdx.x % 3];
}
__global__ void shared_40_dynamic(float* p) {
    __shared__ float s[10];
    extern __shared__ float dyn[];
    s[threadIdx.x % 10] = p[threadIdx.x];
    dyn[threadIdx.x] = p[threadIdx.x];
    __syncthreads();
    p[threadIdx.x] = s[9 - threadIdx.x % 10] + dyn[threadIdx.x];
}

static void attrs(const char* name, const void* fn) {
    cudaFuncAttributes a;
    cudaError_t e = cudaFuncGetAttributes(&a, fn);
    printf("attr %s: %d const %zu shared %zu maxThreads %d\n", name, (int)e, a.constSizeBytes, a.sharedSizeBytes,
           a.maxThreadsPerBlock);
}

static void rt(const char* what) {
    cudaError_t e = cudaGetLastError();
    printf("runtime %s: %d %s\n", what, (int)e, cudaGetErrorName(e));
}

static CUresult (*getErrorName)(CUresult, const char**);

static void drv(const char* what, CUresult r) {
    const char* name = "?";
    getErrorName(r, &name);
    printf("driver %s: %d %s\n", what, (int)r, name ? name : "?");
    cudaGetLastError();
}

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void**, void**);

#define SYM(name) decltype(&name) p_##name = (decltype(&name))dlsym(lib, #name)

int main() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    getErrorName = (decltype(getErrorName))dlsym(lib, "cuGetErrorName");
    SYM(cuLaunchKernel);
    SYM(cuLaunchKernelEx);
    SYM(cuModuleLoadData);
    SYM(cuModuleGetFunction);
    SYM(cuCtxSynchronize);
    SYM(cuGetProcAddress_v2);
    int* d;
    cudaMalloc(&d, 4096 * sizeof(int));
    void* args[] = {&d};
    k<<<1, 2048>>>(d);
    rt("<<<1,2048>>>");
    k<<<dim3(1, 1, 1), dim3(8, 8, 128)>>>(d);
    rt("<<<1,(8,8,128)>>>");
    k<<<dim3(1, 70000, 1), 32>>>(d);
    rt("<<<(1,70000),32>>>");
    k<<<1, 32, 1 << 20>>>(d);
    rt("<<<1,32,1MiB>>>");
    cudaLaunchKernel((const void*)k, dim3(1), dim3(2048), args, 0, 0);
    rt("cudaLaunchKernel block 2048");
    k<<<1, 32>>>(d);
    rt("<<<1,32>>> valid");

    CUfunction f;
    cudaGetFuncBySymbol(&f, (const void*)k);
    drv("cuLaunchKernel block 2048", p_cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, 0, args, 0));
    drv("cuLaunchKernel block (8,8,128)", p_cuLaunchKernel(f, 1, 1, 1, 8, 8, 128, 0, 0, args, 0));
    drv("cuLaunchKernel grid (1,70000)", p_cuLaunchKernel(f, 1, 70000, 1, 32, 1, 1, 0, 0, args, 0));
    drv("cuLaunchKernel 1MiB shared", p_cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 1 << 20, 0, args, 0));
    drv("cuLaunchKernel grid 0", p_cuLaunchKernel(f, 0, 1, 1, 32, 1, 1, 0, 0, args, 0));
    for (int flags = 0; flags <= 2; flags += 2) {
        void* p = 0;
        CUdriverProcAddressQueryResult st;
        CUresult r = p_cuGetProcAddress_v2("cuLaunchKernel", &p, 13000, flags, &st);
        char what[80];
        snprintf(what, sizeof what, "cuGetProcAddress(cuLaunchKernel, 13000, flags %d) -> %d", flags, (int)r);
        if (p) drv(what, ((launch_fn)p)(f, 1, 1, 1, 2048, 1, 1, 0, 0, args, 0));
    }
    CUlaunchConfig cfg = {};
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 2048;
    cfg.blockDimY = cfg.blockDimZ = 1;
    drv("cuLaunchKernelEx block 2048", p_cuLaunchKernelEx(&cfg, f, args, 0));

    const char* ptx = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry e() { ret; }\n";
    CUmodule m;
    CUfunction e;
    drv("cuModuleLoadData", p_cuModuleLoadData(&m, ptx));
    drv("cuModuleGetFunction", p_cuModuleGetFunction(&e, m, "e"));
    drv("cuLaunchKernel (module) block 2048", p_cuLaunchKernel(e, 1, 1, 1, 2048, 1, 1, 0, 0, 0, 0));
    drv("cuLaunchKernel (module) block 1024", p_cuLaunchKernel(e, 1, 1, 1, 1024, 1, 1, 0, 0, 0, 0));
    drv("cuCtxSynchronize", p_cuCtxSynchronize());
    attrs("k", (const void*)k);
    attrs("uses_const", (const void*)uses_const);
    attrs("uses_shared", (const void*)uses_shared);
    attrs("shared_40", (const void*)shared_40);
    attrs("shared_mixed", (const void*)shared_mixed);
    attrs("shared_40_dynamic", (const void*)shared_40_dynamic);
    return 0;
}

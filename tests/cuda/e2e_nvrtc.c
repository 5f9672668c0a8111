/* A C client of NVRTC (linked against libnvrtc.so.13) and the driver API: compiles C++ with a
 * program-supplied header for -arch=sm_86, takes nvrtcGetCUBIN's "cubin", writes it to the file
 * argv[1], reads it back and launches it. Also checks that a compile error still comes back
 * with NVRTC's diagnostics. Prints "cubin: ELF machine 190" and "ok" on success.
 * Build: nvcc -cudart none e2e_nvrtc.c -I<nvrtc include> -L<nvrtc lib> -l:libnvrtc.so.13 -lcuda */
#include <cuda.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVRTC(call) do { nvrtcResult r_ = (call); if (r_ != NVRTC_SUCCESS) { \
    fprintf(stderr, "%s: %s\n", #call, nvrtcGetErrorString(r_)); exit(1); } } while (0)
#define CU(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { \
    fprintf(stderr, "%s: CUresult %d\n", #call, (int)r_); exit(1); } } while (0)

static const char *SOURCE =
    "#include \"factor.h\"\n"
    "template <typename T> __device__ T scaled(T v) { return v * FACTOR; }\n"
    "extern \"C\" __global__ void scale(float *x, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = scaled(x[i]) + __CUDA_ARCH__ / 100;\n"
    "}\n";
static const char *HEADER = "#define FACTOR 3.0f\n";

static char *compile_to_cubin(size_t *size) {
    const char *headers[] = {HEADER}, *names[] = {"factor.h"};
    nvrtcProgram prog;
    NVRTC(nvrtcCreateProgram(&prog, SOURCE, "scale.cu", 1, headers, names));
    const char *opts[] = {"-arch=sm_86", "--std=c++17"};
    nvrtcResult rc = nvrtcCompileProgram(prog, 2, opts);
    if (rc != NVRTC_SUCCESS) {
        size_t n;
        nvrtcGetProgramLogSize(prog, &n);
        char *log = malloc(n);
        nvrtcGetProgramLog(prog, log);
        fprintf(stderr, "compile failed: %s\n%s\n", nvrtcGetErrorString(rc), log);
        exit(1);
    }
    NVRTC(nvrtcGetCUBINSize(prog, size));
    char *cubin = malloc(*size);
    NVRTC(nvrtcGetCUBIN(prog, cubin));
    NVRTC(nvrtcDestroyProgram(&prog));
    return cubin;
}

/* a syntax error must still fail with NVRTC's own log */
static void check_diagnostics(void) {
    nvrtcProgram prog;
    NVRTC(nvrtcCreateProgram(&prog, "__global__ void k() { undeclared_name = 1; }\n", "bad.cu", 0, NULL, NULL));
    const char *opts[] = {"--gpu-architecture=sm_86"};
    nvrtcResult rc = nvrtcCompileProgram(prog, 1, opts);
    size_t n;
    NVRTC(nvrtcGetProgramLogSize(prog, &n));
    char *log = malloc(n);
    NVRTC(nvrtcGetProgramLog(prog, log));
    printf("bad program: %s, log names it: %s\n", nvrtcGetErrorString(rc), strstr(log, "undeclared_name") ? "yes" : "no");
    free(log);
    nvrtcDestroyProgram(&prog);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    check_diagnostics();
    size_t size;
    char *cubin = compile_to_cubin(&size);
    const unsigned char *h = (const unsigned char *)cubin;
    printf("cubin: ELF machine %d\n", !memcmp(h, "\x7f" "ELF", 4) ? h[18] | h[19] << 8 : -1);
    FILE *f = fopen(argv[1], "wb");
    if (!f || fwrite(cubin, 1, size, f) != size || fclose(f)) return 3;
    free(cubin);

    /* what a kernel cache does: the file, in a buffer of its own */
    f = fopen(argv[1], "rb");
    char *image = malloc(size);
    if (!f || fread(image, 1, size, f) != size) return 4;
    fclose(f);

    enum { N = 1000 };
    float host[N];
    for (int i = 0; i < N; i++) host[i] = (float)i;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CUdeviceptr d;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    CU(cuModuleLoadData(&mod, image));
    free(image);
    CU(cuModuleGetFunction(&fn, mod, "scale"));
    CU(cuMemAlloc(&d, sizeof host));
    CU(cuMemcpyHtoD(d, host, sizeof host));
    int n = N;
    void *params[] = {&d, &n};
    CU(cuLaunchKernel(fn, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
    CU(cuMemcpyDtoH(host, d, sizeof host));
    for (int i = 0; i < N; i++)
        if (host[i] != 3.0f * (float)i + 8.0f) {
            printf("mismatch at %d: %f\n", i, host[i]);
            return 1;
        }
    printf("ok\n");
    return 0;
}

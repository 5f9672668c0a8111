/* One CUDA runtime, any release: dlopens the libcudart.so.12/.13 named on the command line
 * and drives it through the runtime API by dlsym, so a single binary (no nvcc host code)
 * exercises every cudart version against the driver.
 *   cudart_versions LIBCUDART [FATBIN]
 * With FATBIN (nvcc -fatbin of cudart_versions_kernel.cu) the kernel is registered the way
 * nvcc's host stubs do (__cudaRegisterFatBinary/Function/FatBinaryEnd) and launched with
 * cudaLaunchKernel. Prints "cudart <version>: PASSED" when every result checks out. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int cudaError_t;
typedef void *cudaStream_t;
typedef void *cudaEvent_t;
typedef struct { unsigned x, y, z; } dim3;
enum { H2D = 1, D2H = 2, D2D = 3 };
enum { ATTR_MAX_THREADS_PER_BLOCK = 1, ATTR_MULTIPROCESSOR_COUNT = 16, ATTR_CC_MAJOR = 75 };

static void *cudart;
static const char *(*get_error_string)(cudaError_t);

static void *sym(const char *name) {
    void *p = dlsym(cudart, name);
    if (!p) {
        fprintf(stderr, "cudart has no %s\n", name);
        exit(2);
    }
    return p;
}

#define CHECK(call)                                                                              \
    do {                                                                                         \
        cudaError_t err_ = (call);                                                               \
        if (err_) {                                                                              \
            fprintf(stderr, "line %d: %s: error %d %s\n", __LINE__, #call, err_, get_error_string(err_)); \
            return 1;                                                                            \
        }                                                                                        \
    } while (0)

/* the fatbin wrapper nvcc puts in .nvFatBinSegment */
typedef struct { unsigned magic, version; const void *data; void *filename_or_fatbins; } fatbin_wrapper;
static char kernel_stub; /* the "host function" the kernel is registered under */

static int launch(const char *fatbin_path, float *dx, float *dy, int n) {
    FILE *f = fopen(fatbin_path, "rb");
    if (!f) { perror(fatbin_path); return 1; }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *image = aligned_alloc(16, (size_t)(size + 15) & ~(size_t)15);
    if (fread(image, 1, (size_t)size, f) != (size_t)size) { fclose(f); return 1; }
    fclose(f);
    static fatbin_wrapper wrapper = {0x466243b1, 1, NULL, NULL};
    wrapper.data = image;

    void **(*register_fatbin)(void *) = sym("__cudaRegisterFatBinary");
    void (*register_end)(void **) = sym("__cudaRegisterFatBinaryEnd");
    void (*register_function)(void **, const char *, char *, const char *, int, void *, void *, void *, void *,
                              int *) = sym("__cudaRegisterFunction");
    void (*unregister_fatbin)(void **) = sym("__cudaUnregisterFatBinary");
    cudaError_t (*launch_kernel)(const void *, dim3, dim3, void **, size_t, cudaStream_t) = sym("cudaLaunchKernel");
    cudaError_t (*get_last_error)(void) = sym("cudaGetLastError");
    cudaError_t (*sync)(void) = sym("cudaDeviceSynchronize");

    void **handle = register_fatbin(&wrapper);
    register_function(handle, &kernel_stub, "scale_add", "scale_add", -1, NULL, NULL, NULL, NULL, NULL);
    register_end(handle);
    float a = 3.0f;
    void *args[] = {&dy, &dx, &a, &n};
    dim3 grid = {(unsigned)(n + 127) / 128, 1, 1}, block = {128, 1, 1};
    CHECK(launch_kernel(&kernel_stub, grid, block, args, 0, NULL));
    CHECK(get_last_error());
    CHECK(sync());
    unregister_fatbin(handle);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s LIBCUDART [FATBIN]\n", argv[0]);
        return 2;
    }
    cudart = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!cudart) {
        fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
    get_error_string = sym("cudaGetErrorString");
    cudaError_t (*runtime_version)(int *) = sym("cudaRuntimeGetVersion");
    cudaError_t (*driver_version)(int *) = sym("cudaDriverGetVersion");
    cudaError_t (*device_count)(int *) = sym("cudaGetDeviceCount");
    cudaError_t (*set_device)(int) = sym("cudaSetDevice");
    cudaError_t (*get_device)(int *) = sym("cudaGetDevice");
    cudaError_t (*device_attribute)(int *, int, int) = sym("cudaDeviceGetAttribute");
    cudaError_t (*mem_get_info)(size_t *, size_t *) = sym("cudaMemGetInfo");
    cudaError_t (*malloc_)(void **, size_t) = sym("cudaMalloc");
    cudaError_t (*malloc_host)(void **, size_t) = sym("cudaMallocHost");
    cudaError_t (*free_)(void *) = sym("cudaFree");
    cudaError_t (*free_host)(void *) = sym("cudaFreeHost");
    cudaError_t (*memcpy_)(void *, const void *, size_t, int) = sym("cudaMemcpy");
    cudaError_t (*memcpy_async)(void *, const void *, size_t, int, cudaStream_t) = sym("cudaMemcpyAsync");
    cudaError_t (*memset_)(void *, int, size_t) = sym("cudaMemset");
    cudaError_t (*stream_create)(cudaStream_t *) = sym("cudaStreamCreate");
    cudaError_t (*stream_sync)(cudaStream_t) = sym("cudaStreamSynchronize");
    cudaError_t (*stream_destroy)(cudaStream_t) = sym("cudaStreamDestroy");
    cudaError_t (*event_create)(cudaEvent_t *) = sym("cudaEventCreate");
    cudaError_t (*event_record)(cudaEvent_t, cudaStream_t) = sym("cudaEventRecord");
    cudaError_t (*event_sync)(cudaEvent_t) = sym("cudaEventSynchronize");
    cudaError_t (*event_elapsed)(float *, cudaEvent_t, cudaEvent_t) = sym("cudaEventElapsedTime");
    cudaError_t (*event_destroy)(cudaEvent_t) = sym("cudaEventDestroy");
    cudaError_t (*device_sync)(void) = sym("cudaDeviceSynchronize");

    int rt = 0, drv = 0, count = 0, dev = -1, threads = 0, sms = 0, major = 0;
    CHECK(runtime_version(&rt));
    CHECK(driver_version(&drv));
    CHECK(device_count(&count));
    if (count < 1) { fprintf(stderr, "no device\n"); return 1; }
    CHECK(set_device(0));
    CHECK(get_device(&dev));
    CHECK(device_attribute(&threads, ATTR_MAX_THREADS_PER_BLOCK, 0));
    CHECK(device_attribute(&sms, ATTR_MULTIPROCESSOR_COUNT, 0));
    CHECK(device_attribute(&major, ATTR_CC_MAJOR, 0));
    size_t free_mem = 0, total_mem = 0;
    CHECK(mem_get_info(&free_mem, &total_mem));
    printf("runtime %d, driver %d, %d device(s), cc major %d, %d SMs, %d threads/block\n", rt, drv, count, major, sms,
           threads);
    if (dev != 0 || threads < 1 || sms < 1 || major < 1 || total_mem == 0 || drv < rt) {
        fprintf(stderr, "implausible device answers\n");
        return 1;
    }

    const int n = 1 << 16;
    const size_t bytes = n * sizeof(float);
    float *hx, *hy = malloc(bytes), *dx, *dy, *dz;
    CHECK(malloc_host((void **)&hx, bytes));
    for (int i = 0; i < n; i++) hx[i] = (float)i;
    CHECK(malloc_((void **)&dx, bytes));
    CHECK(malloc_((void **)&dy, bytes));
    CHECK(malloc_((void **)&dz, bytes));
    CHECK(memcpy_(dx, hx, bytes, H2D));
    CHECK(memset_(dy, 0, bytes));

    cudaStream_t stream;
    cudaEvent_t start, stop;
    CHECK(stream_create(&stream));
    CHECK(event_create(&start));
    CHECK(event_create(&stop));
    CHECK(event_record(start, stream));
    CHECK(memcpy_async(dz, dx, bytes, D2D, stream));
    CHECK(event_record(stop, stream));
    CHECK(stream_sync(stream));
    CHECK(event_sync(stop));
    float ms = -1;
    CHECK(event_elapsed(&ms, start, stop));
    CHECK(memcpy_(hy, dz, bytes, D2H));
    int bad = ms < 0;
    for (int i = 0; i < n; i++) bad += hy[i] != (float)i;

    if (argc > 2) { /* y = 3 * x + y, y zeroed above */
        if (launch(argv[2], dx, dy, n)) return 1;
        CHECK(memcpy_(hy, dy, bytes, D2H));
        for (int i = 0; i < n; i++) bad += hy[i] != 3.0f * (float)i;
    }

    CHECK(device_sync());
    CHECK(event_destroy(start));
    CHECK(event_destroy(stop));
    CHECK(stream_destroy(stream));
    CHECK(free_(dx));
    CHECK(free_(dy));
    CHECK(free_(dz));
    CHECK(free_host(hx));
    free(hy);
    printf("cudart %d: %s\n", rt, bad ? "FAILED" : "PASSED");
    return bad ? 1 : 0;
}

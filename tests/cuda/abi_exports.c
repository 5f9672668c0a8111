/* Linked with -lcuda against our library: entry points we do not implement must link (under
 * their versioned ABI names, as cuda.h maps them) and answer an error, never success; a name
 * looked up with dlsym must resolve. Prints one line per check. */
#include <cuda.h>
#include <cudaProfiler.h>
#include <dlfcn.h>
#include <stdio.h>

int main(void) {
    if (cuInit(0) != CUDA_SUCCESS) return 2;
    CUcontext ctx;
    if (cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) return 3;
    CUDA_ARRAY_SPARSE_PROPERTIES props;
    printf("cuMipmappedArrayGetSparseProperties %d\n", (int)cuMipmappedArrayGetSparseProperties(&props, NULL));
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    typedef CUresult (*get_properties_fn)(CUdevprop *, CUdevice);
    get_properties_fn get_properties = lib ? (get_properties_fn)dlsym(lib, "cuDeviceGetProperties") : NULL;
    if (!get_properties) {
        printf("dlsym cuDeviceGetProperties: %s\n", dlerror());
        return 4;
    }
    CUdevprop prop;
    CUresult rc = get_properties(&prop, 0);
    printf("cuDeviceGetProperties %d %d %d %d %d\n", (int)rc, prop.maxThreadsPerBlock, prop.maxThreadsDim[2],
           prop.SIMDWidth, prop.regsPerBlock);
    printf("cuProfilerStart %d\n", (int)cuProfilerStart());
    printf("cuProfilerStop %d\n", (int)cuProfilerStop());
    return 0;
}

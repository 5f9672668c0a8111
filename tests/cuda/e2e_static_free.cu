// A C++ static whose destructor frees device memory: it runs at exit, after cudart and the
// driver have shut down (the static was made before either started), and must get an error
// code back, not a crash or a traceback.
#include <cstdio>
#include <cuda_runtime.h>

struct DeviceBuffer {
    int *p = nullptr;
    ~DeviceBuffer() { std::printf("static destructor: cudaFree %d\n", (int)cudaFree(p)); }
} buffer;

__global__ void set_one(int *p) { *p = 1; }

int main() {
    cudaMalloc(&buffer.p, sizeof(int));
    set_one<<<1, 1>>>(buffer.p);
    std::printf("kernel: %d\n", (int)cudaDeviceSynchronize());
    std::fflush(stdout);
    return 0;
}

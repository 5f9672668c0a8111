// Runtime API without kernels: device properties, memory in every form, streams, events,
// host callbacks, and the error paths (the context keeps working after each). Every check
// compares against values computed on the host.
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

static int failures = 0;
#define EXPECT(cond)                                                              \
    do {                                                                          \
        if (!(cond)) { fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); failures++; } \
    } while (0)
#define OK(call) EXPECT((call) == cudaSuccess)

static void CUDART_CB record_order(void* user) {
    int* order = (int*)user;
    order[order[0] + 1] = order[0];
    order[0]++;
}

static void CUDART_CB stream_callback(cudaStream_t, cudaError_t status, void* user) {
    *(int*)user = status == cudaSuccess ? 42 : -1;
}

int main() {
    int count = 0;
    OK(cudaGetDeviceCount(&count));
    EXPECT(count == 1);
    cudaDeviceProp prop;
    OK(cudaGetDeviceProperties(&prop, 0));
    EXPECT(prop.warpSize == 32 && prop.maxThreadsPerBlock == 1024 && prop.major == 8 && prop.minor == 6);
    int version = 0;
    OK(cudaDriverGetVersion(&version));
    EXPECT(version >= 13000);

    // memory: device, memset, 2D copies
    const int n = 4096;
    int *d = nullptr, h[n], back[n];
    for (int i = 0; i < n; i++) h[i] = i * 3 - 7;
    OK(cudaMalloc(&d, n * sizeof(int)));
    OK(cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice));
    OK(cudaMemset(d + 10, 0xFF, 5 * sizeof(int)));
    OK(cudaMemcpy(back, d, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT(back[i] == (i >= 10 && i < 15 ? -1 : h[i]));
    int* d2 = nullptr;
    OK(cudaMalloc(&d2, n * sizeof(int)));
    OK(cudaMemcpy(d2, d, n * sizeof(int), cudaMemcpyDeviceToDevice));
    OK(cudaMemcpy(back, d2, n * sizeof(int), cudaMemcpyDefault));
    EXPECT(back[100] == h[100] && back[12] == -1);

    size_t pitch = 0;
    float* img = nullptr;
    float hostimg[16][20], out[16][20];
    for (int y = 0; y < 16; y++) for (int x = 0; x < 20; x++) hostimg[y][x] = y * 100.0f + x;
    OK(cudaMallocPitch(&img, &pitch, 20 * sizeof(float), 16));
    EXPECT(pitch >= 20 * sizeof(float));
    OK(cudaMemcpy2D(img, pitch, hostimg, sizeof(hostimg[0]), 20 * sizeof(float), 16, cudaMemcpyHostToDevice));
    memset(out, 0, sizeof(out));
    OK(cudaMemcpy2D(out, sizeof(out[0]), img, pitch, 20 * sizeof(float), 16, cudaMemcpyDeviceToHost));
    EXPECT(memcmp(out, hostimg, sizeof(out)) == 0);

    // pinned and managed memory
    int* pinned = nullptr;
    OK(cudaHostAlloc(&pinned, n * sizeof(int), cudaHostAllocDefault));
    OK(cudaMemcpy(pinned, d, n * sizeof(int), cudaMemcpyDeviceToHost));
    EXPECT(pinned[2000] == h[2000]);
    cudaPointerAttributes attrs;
    OK(cudaPointerGetAttributes(&attrs, pinned));
    EXPECT(attrs.type == cudaMemoryTypeHost);
    OK(cudaPointerGetAttributes(&attrs, d + 5));
    EXPECT(attrs.type == cudaMemoryTypeDevice && attrs.devicePointer == d + 5);
    int* managed = nullptr;
    OK(cudaMallocManaged(&managed, 64 * sizeof(int)));
    for (int i = 0; i < 64; i++) managed[i] = i;
    OK(cudaMemcpy(back, managed, 64 * sizeof(int), cudaMemcpyDefault));
    EXPECT(back[63] == 63);
    OK(cudaPointerGetAttributes(&attrs, managed));
    EXPECT(attrs.type == cudaMemoryTypeManaged);

    // streams, events, host functions and callbacks, in order
    cudaStream_t s1, s2;
    OK(cudaStreamCreate(&s1));
    OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t e1, e2;
    OK(cudaEventCreate(&e1));
    OK(cudaEventCreate(&e2));
    int order[8] = {0};
    OK(cudaEventRecord(e1, s1));
    OK(cudaMemcpyAsync(d2, pinned, n * sizeof(int), cudaMemcpyHostToDevice, s1));
    OK(cudaLaunchHostFunc(s1, record_order, order));
    OK(cudaStreamWaitEvent(s2, e1, 0));
    OK(cudaLaunchHostFunc(s1, record_order, order));
    OK(cudaEventRecord(e2, s1));
    int callback_value = 0;
    OK(cudaStreamAddCallback(s1, stream_callback, &callback_value, 0));
    OK(cudaStreamSynchronize(s1));
    EXPECT(order[0] == 2 && order[1] == 0 && order[2] == 1 && callback_value == 42);
    float ms = -1;
    OK(cudaEventElapsedTime(&ms, e1, e2));
    EXPECT(ms >= 0.0f);
    OK(cudaMemsetAsync(d2, 0, n * sizeof(int), s2));
    OK(cudaStreamSynchronize(s2));
    OK(cudaMemcpy(back, d2, sizeof(int) * 4, cudaMemcpyDeviceToHost));
    EXPECT(back[0] == 0 && back[3] == 0);

    // error paths: each returns NVIDIA's code and the context keeps working
    EXPECT(cudaSetDevice(7) == cudaErrorInvalidDevice);
    EXPECT(cudaFree((void*)0x1234) == cudaErrorInvalidValue);
    EXPECT(cudaMemcpy(d, h, (n + 1) * sizeof(int), cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    cudaGetLastError();
    OK(cudaMemcpy(back, d, sizeof(int), cudaMemcpyDeviceToHost));
    EXPECT(back[0] == h[0]);

    OK(cudaEventDestroy(e1));
    OK(cudaEventDestroy(e2));
    OK(cudaStreamDestroy(s1));
    OK(cudaStreamDestroy(s2));
    OK(cudaFreeHost(pinned));
    OK(cudaFree(managed));
    OK(cudaFree(img));
    OK(cudaFree(d));
    OK(cudaFree(d2));
    OK(cudaDeviceSynchronize());
    printf("runtime api: %s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}

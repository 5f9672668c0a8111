// Driver behaviours the documentation leaves open, as NVIDIA's stack answers them: prints
// `api <what>: <code> <name>` lines (tests/hardware/golden/api_probe.txt; compared with our
// driver by tests/e2e/test_nvidia_golden.py).
#include <cuda_runtime.h>
#include <cstdio>

static void say(const char* what, cudaError_t e) {
    printf("api %s: %d %s\n", what, (int)e, cudaGetErrorName(e));
    cudaGetLastError();
}

int main() {
    cudaStream_t s;
    cudaStreamCreate(&s);

    // a pool with a size limit (cudaMemPoolProps.maxSize): what a request beyond it gets
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    props.maxSize = 4 << 20;
    cudaMemPool_t pool;
    say("pool create maxSize 4 MiB", cudaMemPoolCreate(&pool, &props));
    void *a = 0, *b = 0, *c = 0;
    say("pool alloc 8 MiB", cudaMallocFromPoolAsync(&c, 8 << 20, pool, s));
    say("pool alloc 8 MiB sync", cudaStreamSynchronize(s));
    say("pool alloc 3 MiB", cudaMallocFromPoolAsync(&a, 3 << 20, pool, s));
    say("pool alloc another 3 MiB", cudaMallocFromPoolAsync(&b, 3 << 20, pool, s));
    say("pool sync", cudaStreamSynchronize(s));
    if (a) say("pool free a", cudaFreeAsync(a, s));
    if (b) say("pool free b", cudaFreeAsync(b, s));
    if (c) say("pool free c", cudaFreeAsync(c, s));
    say("pool sync again", cudaStreamSynchronize(s));
    say("pool destroy", cudaMemPoolDestroy(pool));

    // IPC: opening a handle in the process that made it
    void* d;
    cudaMalloc(&d, 1 << 20);
    cudaIpcMemHandle_t h;
    say("ipc get handle", cudaIpcGetMemHandle(&h, d));
    void* mapped = 0;
    say("ipc open own handle", cudaIpcOpenMemHandle(&mapped, h, cudaIpcMemLazyEnablePeerAccess));
    say("ipc get handle of an inner pointer", cudaIpcGetMemHandle(&h, (char*)d + 256));
    cudaEvent_t ev;
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming | cudaEventInterprocess);
    cudaIpcEventHandle_t eh;
    say("ipc event handle", cudaIpcGetEventHandle(&eh, ev));
    cudaEvent_t ev2;
    cudaEventCreate(&ev2);
    say("ipc event handle without the interprocess flag", cudaIpcGetEventHandle(&eh, ev2));
    cudaFree(d);
    return 0;
}

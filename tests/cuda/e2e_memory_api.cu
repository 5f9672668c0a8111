// Memory the modern way, through cudart: stream-ordered pools (cudaMallocAsync, a created
// pool, attributes, release threshold, trim), virtual memory management (a buffer grown by
// mapping more physical memory behind it, driver entry points from cudaGetDriverEntryPoint),
// and IPC (a child process opens a memory handle and an event handle, changes the memory, and
// the parent sees it). Checked against host-computed results. Sections: pool, vmm, ipc.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <unistd.h>
#include <sys/wait.h>
#include <cuda.h>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(e_)); exit(1); } } while (0)
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
    fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #x, (int)r_); exit(1); } } while (0)
#define EXPECT(c) do { if (!(c)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

__global__ void iota(int *x, int base, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) x[i] = base + (int)i;
}

__global__ void axpy(int *y, const int *x, int a, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}

static void launch_iota(int *x, int base, size_t n, cudaStream_t s) { iota<<<(n + 255) / 256, 256, 0, s>>>(x, base, n); }

// rounds of allocate-compute-free on two streams; freed blocks come back from the pool
static void pool_section() {
    cudaStream_t s[2];
    for (auto &x : s) CHECK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    unsigned long long threshold = ~0ull;  // keep everything: frees feed later allocations
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    const size_t n = 1 << 16;
    std::vector<int> host(n);
    int *seen[2] = {};
    for (int round = 0; round < 6; round++) {
        cudaStream_t st = s[round % 2];
        int *x, *y;
        CHECK(cudaMallocAsync(&x, n * sizeof(int), st));
        CHECK(cudaMallocAsync(&y, n * sizeof(int), st));
        launch_iota(x, round, n, st);
        launch_iota(y, 1000 * round, n, st);
        axpy<<<n / 256, 256, 0, st>>>(y, x, 3, n);
        CHECK(cudaMemcpyAsync(host.data(), y, n * sizeof(int), cudaMemcpyDeviceToHost, st));
        CHECK(cudaFreeAsync(x, st));  // ordered after the kernels that use it
        CHECK(cudaFreeAsync(y, st));
        CHECK(cudaStreamSynchronize(st));
        for (size_t i = 0; i < n; i++) EXPECT(host[i] == 1000 * round + (int)i + 3 * (round + (int)i));
        if (round < 2) seen[round] = x;
        else EXPECT(x == seen[0] || x == seen[1] || y == seen[0] || y == seen[1]);  // reused
    }
    unsigned long long used = 1, reserved = 0;
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
    EXPECT(used == 0 && reserved >= 2 * n * sizeof(int));
    CHECK(cudaMemPoolTrimTo(pool, 0));
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
    EXPECT(reserved == 0);

    // a pool of its own, with a size limit that NVIDIA's driver does not enforce
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    props.maxSize = 4 << 20;
    cudaMemPool_t mine;
    CHECK(cudaMemPoolCreate(&mine, &props));
    int *z;
    CHECK(cudaMallocFromPoolAsync(&z, 1 << 20, mine, s[0]));
    launch_iota(z, 7, 1 << 18, s[0]);
    int *beyond;  // maxSize limits nothing on NVIDIA's driver (an H200: tests/hardware/golden/api_probe.txt)
    CHECK(cudaMallocFromPoolAsync(&beyond, 8 << 20, mine, s[0]));
    CHECK(cudaFreeAsync(beyond, s[0]));
    int last;
    CHECK(cudaMemcpyAsync(&last, z + (1 << 18) - 1, sizeof(int), cudaMemcpyDeviceToHost, s[0]));
    CHECK(cudaFreeAsync(z, s[0]));
    CHECK(cudaStreamSynchronize(s[0]));
    EXPECT(last == 7 + (1 << 18) - 1);
    CHECK(cudaMemPoolDestroy(mine));
    printf("pool: PASSED\n");
}

template <typename F> static F entry(const char *name) {
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult status;
    CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &status));
    EXPECT(status == cudaDriverEntryPointSuccess && fn);
    return (F)fn;
}

// a buffer that grows by mapping more physical memory right after what it has
static void vmm_section() {
    auto granularity_of = entry<CUresult (*)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags)>("cuMemGetAllocationGranularity");
    auto reserve = entry<CUresult (*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long)>("cuMemAddressReserve");
    auto create = entry<CUresult (*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long)>("cuMemCreate");
    auto map = entry<CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long)>("cuMemMap");
    auto set_access = entry<CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t)>("cuMemSetAccess");
    auto release = entry<CUresult (*)(CUmemGenericAllocationHandle)>("cuMemRelease");
    auto unmap = entry<CUresult (*)(CUdeviceptr, size_t)>("cuMemUnmap");
    auto free_range = entry<CUresult (*)(CUdeviceptr, size_t)>("cuMemAddressFree");
    CHECK(cudaFree(0));  // a current context
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CU(granularity_of(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    EXPECT(gran && (gran & (gran - 1)) == 0);
    const int chunks = 4;
    CUdeviceptr base;
    CU(reserve(&base, chunks * gran, 0, 0, 0));
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    std::vector<CUmemGenericAllocationHandle> handles;
    std::vector<int> host;
    int *buf = (int *)base;
    for (int c = 1; c <= chunks; c++) {  // grow by one chunk, fill the new part, check all of it
        CUmemGenericAllocationHandle h;
        CU(create(&h, gran, &prop, 0));
        CU(map(base + (c - 1) * gran, gran, 0, h, 0));
        CU(set_access(base + (c - 1) * gran, gran, &access, 1));
        handles.push_back(h);
        size_t old_n = (c - 1) * gran / sizeof(int), n = c * gran / sizeof(int);
        launch_iota(buf + old_n, (int)old_n, n - old_n, 0);
        axpy<<<(n + 255) / 256, 256>>>(buf, buf, 1, n);  // doubles every element, across chunks
        host.resize(n);
        CHECK(cudaMemcpy(host.data(), buf, n * sizeof(int), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) {
            int want = (int)i << (c - (int)(i / (gran / sizeof(int))));
            if (host[i] != want) {
                fprintf(stderr, "after %d chunks: buf[%zu] = %d, want %d\n", c, i, host[i], want);
                exit(1);
            }
        }
    }
    CU(unmap(base, chunks * gran));
    for (auto h : handles) CU(release(h));
    CU(free_range(base, chunks * gran));
    printf("vmm: PASSED\n");
}

static std::string hex(const void *p, size_t n) {
    std::string s;
    char b[3];
    for (size_t i = 0; i < n; i++) { snprintf(b, 3, "%02x", ((const unsigned char *)p)[i]); s += b; }
    return s;
}

static void unhex(const char *s, void *p, size_t n) {
    for (size_t i = 0; i < n; i++) sscanf(s + 2 * i, "%2hhx", (unsigned char *)p + i);
}

// the child: wait for the parent's event, add i to element i, signal by exiting
static int ipc_child(const char *mem, const char *event, size_t n) {
    cudaIpcMemHandle_t mh;
    cudaIpcEventHandle_t eh;
    unhex(mem, &mh, sizeof mh);
    unhex(event, &eh, sizeof eh);
    int *x;
    CHECK(cudaIpcOpenMemHandle((void **)&x, mh, cudaIpcMemLazyEnablePeerAccess));
    cudaEvent_t ready;
    CHECK(cudaIpcOpenEventHandle(&ready, eh));
    CHECK(cudaStreamWaitEvent(0, ready, 0));  // the parent's kernel has filled x
    axpy<<<(n + 255) / 256, 256>>>(x, x, 1, n);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaIpcCloseMemHandle(x));
    printf("ipc child: PASSED\n");
    return 0;
}

static void ipc_section(const char *self) {
    const size_t n = 1 << 20;
    int *x;
    CHECK(cudaMalloc(&x, n * sizeof(int)));
    cudaEvent_t ready;
    CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming | cudaEventInterprocess));
    cudaIpcMemHandle_t mh;
    cudaIpcEventHandle_t eh;
    CHECK(cudaIpcGetMemHandle(&mh, x));
    CHECK(cudaIpcGetEventHandle(&eh, ready));
    int *same;
    EXPECT(cudaIpcOpenMemHandle((void **)&same, mh, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess);  // not in its own process
    cudaGetLastError();
    launch_iota(x, 5, n, 0);
    CHECK(cudaEventRecord(ready, 0));
    std::string m = hex(&mh, sizeof mh), e = hex(&eh, sizeof eh);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, "ipc-child", m.c_str(), e.c_str(), (char *)nullptr);
        _exit(127);
    }
    int status = 0;
    EXPECT(waitpid(pid, &status, 0) == pid);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    std::vector<int> host(n);
    CHECK(cudaMemcpy(host.data(), x, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) EXPECT(host[i] == 2 * (5 + (int)i));  // the child's doubling is here
    CHECK(cudaFree(x));
    printf("ipc: PASSED\n");
}

int main(int argc, char **argv) {
    const char *section = argc > 1 ? argv[1] : "all";
    if (!strcmp(section, "ipc-child")) return ipc_child(argv[2], argv[3], 1 << 20);
    bool all = !strcmp(section, "all");
    if (all || !strcmp(section, "pool")) pool_section();
    if (all || !strcmp(section, "vmm")) vmm_section();
    if (all || !strcmp(section, "ipc")) ipc_section("/proc/self/exe");
    printf("memory api %s: PASSED\n", section);
    return 0;
}

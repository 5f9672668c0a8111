// __managed__ variables (PTX `.global .attribute(.managed)`): written by the host before a
// launch and read back after it without copies, and managed memory to the runtime's managed
// calls as the CUDA Programming Guide and the runtime reference describe them: the pointer
// attributes of a managed allocation, cudaMemAdvise/cudaMemPrefetchAsync recorded and reported
// by cudaMemRangeGetAttribute, each variable its own range. A __device__ variable is not managed.
#include <cstdio>
#include <cuda_runtime.h>

static int failures = 0;
#define EXPECT(cond)                                                                                   \
    do {                                                                                               \
        if (!(cond) && failures++ < 10) fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); \
    } while (0)
#define OK(call) EXPECT((call) == cudaSuccess)

constexpr int N = 2048;  // 8 KiB: two or more CPU pages
__managed__ int values[N];
__managed__ float scale = 2.5f;  // the initializer is what the host sees before any launch
__device__ int plain[4];

__global__ void scale_add(int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) values[i] = static_cast<int>(values[i] * scale) + i;
}

// The advice and prefetch calls with a device ordinal or cudaCpuDeviceId (CUDA 13 takes a location).
static cudaError_t advise(const void* p, size_t n, cudaMemoryAdvise advice, int device) {
#if CUDART_VERSION >= 13000
    cudaMemLocation where{};
    where.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    where.id = device;
    return cudaMemAdvise(p, n, advice, where);
#else
    return cudaMemAdvise(p, n, advice, device);
#endif
}

static cudaError_t prefetch(const void* p, size_t n, int device) {
#if CUDART_VERSION >= 13000
    cudaMemLocation where{};
    where.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    where.id = device;
    return cudaMemPrefetchAsync(p, n, where, 0, 0);
#else
    return cudaMemPrefetchAsync(p, n, device, 0);
#endif
}

static int range_attribute(cudaMemRangeAttribute attribute, const void* p, size_t n) {
    int value = 12345;
    OK(cudaMemRangeGetAttribute(&value, sizeof value, attribute, p, n));
    return value;
}

int main() {
    // host and device share the variables: no copies
    EXPECT(scale == 2.5f);
    for (int i = 0; i < N; i++) values[i] = i * 2;
    scale = 1.5f;
    scale_add<<<(N + 255) / 256, 256>>>(N);
    OK(cudaDeviceSynchronize());
    int wrong = 0;
    for (int i = 0; i < N; i++) wrong += values[i] != static_cast<int>(i * 2 * 1.5f) + i;
    EXPECT(wrong == 0);

    // pointer attributes: a managed allocation, the same address for host and device
    cudaPointerAttributes attr{};
    OK(cudaPointerGetAttributes(&attr, values + 5));
    EXPECT(attr.type == cudaMemoryTypeManaged);
    EXPECT(attr.device == 0);
    EXPECT(attr.devicePointer == values + 5 && attr.hostPointer == values + 5);
    void* plain_address = nullptr;
    OK(cudaGetSymbolAddress(&plain_address, plain));
    OK(cudaPointerGetAttributes(&attr, plain_address));
    EXPECT(attr.type == cudaMemoryTypeDevice);
    EXPECT(attr.devicePointer == plain_address);

    // advice and prefetches: what the range queries report afterwards
    EXPECT(range_attribute(cudaMemRangeAttributeReadMostly, values, sizeof values) == 0);
    EXPECT(range_attribute(cudaMemRangeAttributePreferredLocation, values, sizeof values) == cudaInvalidDeviceId);
    OK(advise(values, sizeof values, cudaMemAdviseSetReadMostly, 0));
    OK(advise(values, sizeof values, cudaMemAdviseSetPreferredLocation, 0));
    OK(advise(values, sizeof values, cudaMemAdviseSetAccessedBy, 0));
    EXPECT(range_attribute(cudaMemRangeAttributeReadMostly, values, sizeof values) == 1);
    EXPECT(range_attribute(cudaMemRangeAttributePreferredLocation, values, sizeof values) == 0);
    int accessed_by[3] = {7, 7, 7};
    OK(cudaMemRangeGetAttribute(accessed_by, sizeof accessed_by, cudaMemRangeAttributeAccessedBy, values,
                                sizeof values));
    EXPECT(accessed_by[0] == 0 && accessed_by[1] == cudaInvalidDeviceId && accessed_by[2] == cudaInvalidDeviceId);
    OK(prefetch(values, sizeof values, cudaCpuDeviceId));
    OK(cudaStreamSynchronize(0));
    EXPECT(range_attribute(cudaMemRangeAttributeLastPrefetchLocation, values, sizeof values) == cudaCpuDeviceId);
    OK(prefetch(values, sizeof values, 0));
    OK(cudaStreamSynchronize(0));
    EXPECT(range_attribute(cudaMemRangeAttributeLastPrefetchLocation, values, sizeof values) == 0);
    // the other variable is a range of its own: none of that advice reached it
    EXPECT(range_attribute(cudaMemRangeAttributeReadMostly, &scale, sizeof scale) == 0);
    EXPECT(range_attribute(cudaMemRangeAttributePreferredLocation, &scale, sizeof scale) == cudaInvalidDeviceId);
    OK(advise(values, sizeof values, cudaMemAdviseUnsetReadMostly, 0));
    EXPECT(range_attribute(cudaMemRangeAttributeReadMostly, values, sizeof values) == 0);

    // a __device__ variable is not managed memory: cudaErrorInvalidValue
    EXPECT(advise(plain_address, sizeof plain, cudaMemAdviseSetReadMostly, 0) == cudaErrorInvalidValue);
    EXPECT(prefetch(plain_address, sizeof plain, 0) == cudaErrorInvalidValue);
    int ignored = 0;
    EXPECT(cudaMemRangeGetAttribute(&ignored, sizeof ignored, cudaMemRangeAttributeReadMostly, plain_address,
                                    sizeof plain) == cudaErrorInvalidValue);
    cudaGetLastError();

    // still correct after the advice
    scale_add<<<(N + 255) / 256, 256>>>(N);
    OK(cudaDeviceSynchronize());
    wrong = 0;
    for (int i = 0; i < N; i++) {
        int first = static_cast<int>(i * 2 * 1.5f) + i;
        wrong += values[i] != static_cast<int>(first * 1.5f) + i;
    }
    EXPECT(wrong == 0);
    printf("managed variables: %s\n", failures ? "FAILED" : "PASSED");
    return failures != 0;
}

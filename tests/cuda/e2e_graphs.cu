// CUDA graphs through cudart: a captured graph (two streams forked and joined with events,
// kernels, copies, a memset, a host function, stream-ordered allocation) and a hand-built one
// (every node kind cudart offers), both launched repeatedly and updated in place; plus the
// errors of calls that are illegal during capture. Checked against host-computed results.
// Sections: capture, manual, errors, memory.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(e_)); exit(1); } } while (0)
#define EXPECT(c) do { if (!(c)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

__global__ void scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

__global__ void add(float *out, const float *a, const float *b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

__global__ void fill_index(float *x, float base, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = base + i;
}

static int host_calls = 0;
static void CUDART_CB count_call(void *data) { host_calls += *(int *)data; }

static const int N = 1000;
static const int T = 128, B = (N + T - 1) / T;

// out = (in * a) + (in * b), the two products made on two streams
static void capture_section() {
    cudaStream_t s0, s1;
    CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    cudaEvent_t fork, join;
    CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    std::vector<float> in(N), out(N);
    for (int i = 0; i < N; i++) in[i] = 0.5f * i - 7;
    float *h_in, *h_out;  // pinned: async copies stay asynchronous
    CHECK(cudaMallocHost(&h_in, N * sizeof(float)));
    CHECK(cudaMallocHost(&h_out, N * sizeof(float)));
    float *d_in, *d_p, *d_q, *d_out;
    CHECK(cudaMalloc(&d_in, N * sizeof(float)));
    CHECK(cudaMalloc(&d_out, N * sizeof(float)));
    int one = 1;

    cudaStreamCaptureStatus status;
    CHECK(cudaStreamIsCapturing(s0, &status));
    EXPECT(status == cudaStreamCaptureStatusNone);
    float a = 2.0f, b = 3.0f;
    cudaGraph_t graph;
    for (int round = 0; round < 2; round++) {
        CHECK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeGlobal));
        CHECK(cudaStreamIsCapturing(s0, &status));
        EXPECT(status == cudaStreamCaptureStatusActive);
        CHECK(cudaMallocAsync(&d_p, N * sizeof(float), s0));
        CHECK(cudaMallocAsync(&d_q, N * sizeof(float), s0));
        CHECK(cudaMemcpyAsync(d_in, h_in, N * sizeof(float), cudaMemcpyHostToDevice, s0));
        CHECK(cudaMemsetAsync(d_out, 0xff, N * sizeof(float), s0));
        CHECK(cudaEventRecord(fork, s0));
        CHECK(cudaStreamWaitEvent(s1, fork, 0));  // s1 joins the capture
        CHECK(cudaStreamIsCapturing(s1, &status));
        EXPECT(status == cudaStreamCaptureStatusActive);
        CHECK(cudaMemcpyAsync(d_q, d_in, N * sizeof(float), cudaMemcpyDeviceToDevice, s1));
        scale<<<B, T, 0, s1>>>(d_q, b, N);
        CHECK(cudaEventRecord(join, s1));
        CHECK(cudaMemcpyAsync(d_p, d_in, N * sizeof(float), cudaMemcpyDeviceToDevice, s0));
        scale<<<B, T, 0, s0>>>(d_p, a, N);
        CHECK(cudaStreamWaitEvent(s0, join, 0));  // joined back
        add<<<B, T, 0, s0>>>(d_out, d_p, d_q, N);
        CHECK(cudaMemcpyAsync(h_out, d_out, N * sizeof(float), cudaMemcpyDeviceToHost, s0));
        CHECK(cudaLaunchHostFunc(s0, count_call, &one));
        CHECK(cudaFreeAsync(d_p, s0));
        CHECK(cudaFreeAsync(d_q, s0));
        cudaGraph_t captured;
        CHECK(cudaStreamEndCapture(s0, &captured));
        CHECK(cudaStreamIsCapturing(s1, &status));
        EXPECT(status == cudaStreamCaptureStatusNone);
        size_t nodes = 0;
        CHECK(cudaGraphGetNodes(captured, nullptr, &nodes));
        EXPECT(nodes == 13);  // 2 allocs, 3 copies in, memset, 3 kernels, copy out, host, 2 frees
        static cudaGraphExec_t exec;
        if (round == 0) {
            graph = captured;
            CHECK(cudaGraphInstantiate(&exec, graph, 0));
        } else {  // the recapture, with other scale factors, updates the instantiated graph
            cudaGraphExecUpdateResultInfo info;
            CHECK(cudaGraphExecUpdate(exec, captured, &info));
            EXPECT(info.result == cudaGraphExecUpdateSuccess);
            CHECK(cudaGraphDestroy(captured));
        }
        for (int launch = 0; launch < 3; launch++) {
            for (int i = 0; i < N; i++) h_in[i] = in[i] + launch;
            CHECK(cudaGraphLaunch(exec, s0));
            CHECK(cudaStreamSynchronize(s0));
            for (int i = 0; i < N; i++) {
                float x = in[i] + launch, want = x * a + x * b;
                if (h_out[i] != want) {
                    fprintf(stderr, "round %d launch %d: out[%d] = %f, want %f\n", round, launch, i, h_out[i], want);
                    exit(1);
                }
            }
        }
        EXPECT(host_calls == 3 * (round + 1));
        if (round == 1) CHECK(cudaGraphExecDestroy(exec));
        a = -1.5f;
        b = 0.25f;
    }
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaFree(d_in));
    CHECK(cudaFree(d_out));
    CHECK(cudaFreeHost(h_in));
    CHECK(cudaFreeHost(h_out));
    printf("capture: PASSED\n");
}

// x = index + base; child graph: x *= 2; then y = x + x; a host node counts launches;
// an event record node lets another stream wait for the graph
static void manual_section() {
    float *d_x, *d_y, *h_y;
    CHECK(cudaMalloc(&d_x, N * sizeof(float)));
    CHECK(cudaMalloc(&d_y, N * sizeof(float)));
    CHECK(cudaMallocHost(&h_y, N * sizeof(float)));
    cudaGraph_t graph, child;
    CHECK(cudaGraphCreate(&graph, 0));
    CHECK(cudaGraphCreate(&child, 0));

    float base = 10.0f, two = 2.0f;
    int n = N;
    void *fill_args[] = {&d_x, &base, &n};
    cudaKernelNodeParams kp = {};
    kp.func = (void *)fill_index;
    kp.gridDim = dim3(B);
    kp.blockDim = dim3(T);
    kp.kernelParams = fill_args;
    cudaGraphNode_t memset_node, fill, scale_node, child_node, add_node, copy, host, empty, record;
    cudaMemsetParams mp = {};
    mp.dst = d_y;
    mp.value = 0;
    mp.elementSize = 4;
    mp.width = N;
    mp.height = 1;
    CHECK(cudaGraphAddMemsetNode(&memset_node, graph, nullptr, 0, &mp));
    CHECK(cudaGraphAddKernelNode(&fill, graph, nullptr, 0, &kp));

    void *scale_args[] = {&d_x, &two, &n};
    cudaKernelNodeParams sp = kp;
    sp.func = (void *)scale;
    sp.kernelParams = scale_args;
    CHECK(cudaGraphAddKernelNode(&scale_node, child, nullptr, 0, &sp));
    CHECK(cudaGraphAddChildGraphNode(&child_node, graph, &fill, 1, child));

    void *add_args[] = {&d_y, &d_x, &d_x, &n};
    cudaKernelNodeParams ap = kp;
    ap.func = (void *)add;
    ap.kernelParams = add_args;
    cudaGraphNode_t before_add[] = {child_node, memset_node};
    CHECK(cudaGraphAddKernelNode(&add_node, graph, before_add, 2, &ap));
    CHECK(cudaGraphAddMemcpyNode1D(&copy, graph, &add_node, 1, h_y, d_y, N * sizeof(float), cudaMemcpyDeviceToHost));
    int weight = 5;
    cudaHostNodeParams hp = {count_call, &weight};
    CHECK(cudaGraphAddHostNode(&host, graph, &copy, 1, &hp));
    CHECK(cudaGraphAddEmptyNode(&empty, graph, &host, 1));
    cudaEvent_t done;
    CHECK(cudaEventCreate(&done));
    CHECK(cudaGraphAddEventRecordNode(&record, graph, &empty, 1, done));

    size_t count = 0;
    CHECK(cudaGraphGetNodes(graph, nullptr, &count));
    EXPECT(count == 8);
    CHECK(cudaGraphGetRootNodes(graph, nullptr, &count));
    EXPECT(count == 2);
    CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &count));
    EXPECT(count == 7);
    cudaGraphNodeType type;
    CHECK(cudaGraphNodeGetType(child_node, &type));
    EXPECT(type == cudaGraphNodeTypeGraph);
    cudaKernelNodeParams got = {};
    CHECK(cudaGraphKernelNodeGetParams(fill, &got));
    EXPECT(got.gridDim.x == (unsigned)B && got.blockDim.x == (unsigned)T && *(float *)got.kernelParams[1] == base);

    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    host_calls = 0;
    auto check = [&](float b, float factor, const char *what) {
        for (int i = 0; i < N; i++) {
            float want = 2 * (b + i) * factor;
            if (h_y[i] != want) {
                fprintf(stderr, "%s: y[%d] = %f, want %f\n", what, i, h_y[i], want);
                exit(1);
            }
        }
    };
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaEventSynchronize(done));  // the record node completes with the graph
    check(base, 2, "first launch");
    EXPECT(host_calls == 5);

    // an exec setter changes the instantiated graph only
    float base2 = -300.0f;
    void *fill_args2[] = {&d_x, &base2, &n};
    kp.kernelParams = fill_args2;
    CHECK(cudaGraphExecKernelNodeSetParams(exec, fill, &kp));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    check(base2, 2, "after cudaGraphExecKernelNodeSetParams");

    // a clone with the scale changed in its child updates the exec whole
    cudaGraph_t clone;
    CHECK(cudaGraphClone(&clone, graph));
    cudaGraphNode_t child_in_clone;
    CHECK(cudaGraphNodeFindInClone(&child_in_clone, child_node, clone));
    float three = 3.0f;
    void *scale_args3[] = {&d_x, &three, &n};
    sp.kernelParams = scale_args3;
    cudaGraph_t child2;
    CHECK(cudaGraphCreate(&child2, 0));
    CHECK(cudaGraphAddKernelNode(&scale_node, child2, nullptr, 0, &sp));
    CHECK(cudaGraphExecChildGraphNodeSetParams(exec, child_node, child2));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    check(base2, 3, "after cudaGraphExecChildGraphNodeSetParams");
    cudaGraphExecUpdateResultInfo info;
    CHECK(cudaGraphExecUpdate(exec, clone, &info));  // back to the original parameters
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    check(base, 2, "after cudaGraphExecUpdate");
    EXPECT(host_calls == 20);

    // a graph of another shape does not update it
    CHECK(cudaGraphAddEmptyNode(&empty, clone, nullptr, 0));
    EXPECT(cudaGraphExecUpdate(exec, clone, &info) == cudaErrorGraphExecUpdateFailure);
    EXPECT(info.result == cudaGraphExecUpdateErrorTopologyChanged);
    cudaGetLastError();

    CHECK(cudaGraphDebugDotPrint(graph, "/dev/null", cudaGraphDebugDotFlagsVerbose));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(clone));
    CHECK(cudaGraphDestroy(child2));
    CHECK(cudaGraphDestroy(child));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_y));
    CHECK(cudaFreeHost(h_y));
    printf("manual: PASSED\n");
}

static void errors_section() {
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    float *d;
    CHECK(cudaMalloc(&d, 64));
    cudaGraph_t g;
    // a synchronization of the capturing stream fails and invalidates the capture
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    EXPECT(cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported);
    cudaStreamCaptureStatus status;
    CHECK(cudaStreamIsCapturing(s, &status));
    EXPECT(status == cudaStreamCaptureStatusInvalidated);
    EXPECT(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated);
    EXPECT(g == nullptr);
    cudaGetLastError();
    // a synchronous allocation during a global capture is refused
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    float *p;
    EXPECT(cudaMalloc(&p, 64) == cudaErrorStreamCaptureUnsupported);
    EXPECT(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated);
    cudaGetLastError();
    // ... and allowed in relaxed mode
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    CHECK(cudaMalloc(&p, 64));
    scale<<<1, 16, 0, s>>>(d, 2.0f, 16);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaFree(p));
    CHECK(cudaGraphDestroy(g));
    // the legacy default stream cannot be captured
    EXPECT(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal) == cudaErrorStreamCaptureUnsupported);
    cudaGetLastError();
    // a forked stream left unjoined
    cudaStream_t s2;
    CHECK(cudaStreamCreate(&s2));
    cudaEvent_t e;
    CHECK(cudaEventCreate(&e));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaEventRecord(e, s));
    CHECK(cudaStreamWaitEvent(s2, e, 0));
    scale<<<1, 16, 0, s2>>>(d, 2.0f, 16);
    EXPECT(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureUnjoined);
    cudaGetLastError();
    CHECK(cudaStreamIsCapturing(s2, &status));
    EXPECT(status == cudaStreamCaptureStatusNone);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(d));
    printf("errors: PASSED\n");
}

// graphMemoryNodes' pattern: a graph allocates and never frees; the program frees the memory
// outside the graph, and each launch makes it again at the node's address (programming guide,
// "Graph memory nodes"); a launch while it is still allocated is cudaErrorInvalidValue
// (cuGraphLaunch) unless the exec frees it on launch (cudaGraphInstantiateFlagAutoFreeOnLaunch)
static void memory_section() {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int dev;
    CHECK(cudaGetDevice(&dev));
    float *out;
    CHECK(cudaMalloc(&out, N * sizeof(float)));
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaMemAllocNodeParams ap = {};
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = dev;
    ap.bytesize = N * sizeof(float);
    cudaGraphNode_t alloc, fill, sum;
    CHECK(cudaGraphAddMemAllocNode(&alloc, g, nullptr, 0, &ap));
    float *p = (float *)ap.dptr, base = 0.0f;
    int n = N;
    void *fill_args[] = {&p, &base, &n}, *sum_args[] = {&out, &p, &p, &n};
    cudaKernelNodeParams fp = {}, sp = {};
    fp.func = (void *)fill_index; fp.gridDim = dim3(B); fp.blockDim = dim3(T); fp.kernelParams = fill_args;
    sp = fp; sp.func = (void *)add; sp.kernelParams = sum_args;
    CHECK(cudaGraphAddKernelNode(&fill, g, &alloc, 1, &fp));
    CHECK(cudaGraphAddKernelNode(&sum, g, &fill, 1, &sp));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, g, 0));
    std::vector<float> h(N);
    for (int launch = 0; launch < 4; launch++) {
        base = (float)launch;  // each launch writes other values through the same address
        CHECK(cudaGraphExecKernelNodeSetParams(exec, fill, &fp));
        CHECK(cudaGraphLaunch(exec, s));
        CHECK(cudaMemcpyAsync(h.data(), out, N * sizeof(float), cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        for (int i = 0; i < N; i++) EXPECT(h[i] == 2.0f * (launch + i));
        cudaMemAllocNodeParams got;
        CHECK(cudaGraphMemAllocNodeGetParams(alloc, &got));
        EXPECT(got.dptr == p);
        if (launch == 1) {  // still allocated: the launch is refused
            EXPECT(cudaGraphLaunch(exec, s) == cudaErrorInvalidValue);
            cudaGetLastError();
        }
        if (launch % 2) CHECK(cudaFree(p));
        else CHECK(cudaFreeAsync(p, s));
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphInstantiate(&exec, g, cudaGraphInstantiateFlagAutoFreeOnLaunch));
    for (int launch = 0; launch < 2; launch++) CHECK(cudaGraphLaunch(exec, s));  // no free between them
    CHECK(cudaMemcpyAsync(h.data(), out, N * sizeof(float), cudaMemcpyDeviceToHost, s));
    CHECK(cudaFreeAsync(p, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < N; i++) EXPECT(h[i] == 2.0f * i);  // the graph's own parameters: base 0
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaFree(out));
    CHECK(cudaStreamDestroy(s));
    printf("memory: PASSED\n");
}

int main(int argc, char **argv) {
    const char *section = argc > 1 ? argv[1] : "all";
    bool all = !strcmp(section, "all");
    if (all || !strcmp(section, "capture")) capture_section();
    if (all || !strcmp(section, "manual")) manual_section();
    if (all || !strcmp(section, "errors")) errors_section();
    if (all || !strcmp(section, "memory")) memory_section();
    printf("graphs %s: PASSED\n", section);
    return 0;
}

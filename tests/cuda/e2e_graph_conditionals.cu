// Conditional graph nodes (CUDA 12.4+): if/else, while and switch bodies chosen by a condition
// a kernel sets with cudaGraphSetConditional, the default a handle gets at each launch, and a
// body filled by stream capture ended without asking for the graph back. Each launch's trace
// (the kernels that ran, in order) is compared with what the host expects.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int TRACE = 64;
struct Trace { int n; int ids[TRACE]; };

__device__ void record(Trace *t, int id) { t->ids[t->n++] = id; }

__global__ void set_condition(Trace *t, const int *input, cudaGraphConditionalHandle h) {
    record(t, 1);
    cudaGraphSetConditional(h, *input);
}
__global__ void mark(Trace *t, int id) { record(t, id); }
// while body: counts *counter down, the loop ends when it reaches 0
__global__ void count_down(Trace *t, int *counter, cudaGraphConditionalHandle h) {
    record(t, 100 + *counter);
    cudaGraphSetConditional(h, --*counter);
}

static int failures = 0;

static void check_trace(Trace *d, const char *what, const int *want, int n) {
    Trace h;
    CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    bool ok = h.n == n;
    for (int i = 0; ok && i < n; i++) ok = h.ids[i] == want[i];
    if (!ok) {
        fprintf(stderr, "FAILED: %s: trace", what);
        for (int i = 0; i < h.n && i < TRACE; i++) fprintf(stderr, " %d", h.ids[i]);
        fprintf(stderr, ", want");
        for (int i = 0; i < n; i++) fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n");
        failures++;
    }
    CHECK(cudaMemset(d, 0, sizeof(Trace)));
}

static cudaGraphNode_t add_conditional(cudaGraph_t g, cudaGraphNode_t dep, cudaGraphConditionalHandle h,
                                       cudaGraphConditionalNodeType type, unsigned size, cudaGraph_t *bodies) {
    cudaGraphNodeParams p = {cudaGraphNodeTypeConditional};
    p.conditional.handle = h;
    p.conditional.type = type;
    p.conditional.size = size;
    cudaGraphNode_t node;
    CHECK(cudaGraphAddNode(&node, g, dep ? &dep : nullptr, nullptr, dep ? 1 : 0, &p));
    for (unsigned i = 0; i < size; i++) bodies[i] = p.conditional.phGraph_out[i];
    return node;
}

static cudaGraphNode_t add_kernel(cudaGraph_t g, cudaGraphNode_t dep, void *fn, void **args) {
    cudaGraphNodeParams p = {cudaGraphNodeTypeKernel};
    p.kernel.func = fn;
    p.kernel.gridDim = dim3(1);
    p.kernel.blockDim = dim3(1);
    p.kernel.kernelParams = args;
    cudaGraphNode_t node;
    CHECK(cudaGraphAddNode(&node, g, dep ? &dep : nullptr, nullptr, dep ? 1 : 0, &p));
    return node;
}

int main() {
    Trace *trace;
    int *input;
    CHECK(cudaMalloc(&trace, sizeof(Trace)));
    CHECK(cudaMalloc(&input, sizeof(int)));
    CHECK(cudaMemset(trace, 0, sizeof(Trace)));

    // if/else and switch: set_condition -> conditional node
    for (int type = 0; type < 2; type++) {
        cudaGraph_t g;
        CHECK(cudaGraphCreate(&g, 0));
        cudaGraphConditionalHandle h;
        CHECK(cudaGraphConditionalHandleCreate(&h, g));
        void *args[] = {&trace, &input, &h};
        cudaGraphNode_t a = add_kernel(g, nullptr, (void *)set_condition, args);
        unsigned size = type == 0 ? 2 : 3;
        cudaGraph_t bodies[3];
        add_conditional(g, a, h, type == 0 ? cudaGraphCondTypeIf : cudaGraphCondTypeSwitch, size, bodies);
        int ids[3] = {10, 11, 12};
        for (unsigned i = 0; i < size; i++) {
            void *body_args[] = {&trace, &ids[i]};
            add_kernel(bodies[i], nullptr, (void *)mark, body_args);
        }
        cudaGraphExec_t exec;
        CHECK(cudaGraphInstantiate(&exec, g, 0));
        for (int value = 0; value < 4; value++) {
            CHECK(cudaMemcpy(input, &value, sizeof value, cudaMemcpyHostToDevice));
            CHECK(cudaGraphLaunch(exec, 0));
            CHECK(cudaDeviceSynchronize());
            int body = type == 0 ? (value ? 10 : 11) : (value < 3 ? 10 + value : -1);
            int want[2] = {1, body};
            check_trace(trace, type == 0 ? "if/else" : "switch", want, body < 0 ? 1 : 2);
        }
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(g));
    }

    // while: the handle starts at its default (1) every launch; the body, captured into the
    // body graph, counts down from 3
    {
        cudaGraph_t g;
        CHECK(cudaGraphCreate(&g, 0));
        cudaGraphConditionalHandle h;
        CHECK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
        cudaGraph_t body;
        add_conditional(g, nullptr, h, cudaGraphCondTypeWhile, 1, &body);
        cudaStream_t s;
        CHECK(cudaStreamCreate(&s));
        CHECK(cudaStreamBeginCaptureToGraph(s, body, nullptr, nullptr, 0, cudaStreamCaptureModeGlobal));
        count_down<<<1, 1, 0, s>>>(trace, input, h);
        CHECK(cudaStreamEndCapture(s, nullptr));
        CHECK(cudaStreamDestroy(s));
        cudaGraphExec_t exec;
        CHECK(cudaGraphInstantiate(&exec, g, 0));
        for (int launch = 0; launch < 2; launch++) {
            int three = 3;
            CHECK(cudaMemcpy(input, &three, sizeof three, cudaMemcpyHostToDevice));
            CHECK(cudaGraphLaunch(exec, 0));
            CHECK(cudaDeviceSynchronize());
            int want[3] = {103, 102, 101};
            check_trace(trace, "while", want, 3);
        }
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(g));
    }
    if (failures) return 1;
    printf("graph_conditionals: PASSED\n");
    return 0;
}

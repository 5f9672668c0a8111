// Translation unit 2 of the -rdc=true fatbin test: defines the shared device function.
__device__ float fatbin_rdc_helper(float x) { return x * 0.5f - 4.0f; }

__global__ void fatbin_rdc_second(float* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = fatbin_rdc_helper(p[i]) + 1.0f;
}

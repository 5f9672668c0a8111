// The kernel cudart_versions.c registers and launches through each cudart: y = a * x + y.
extern "C" __global__ void scale_add(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

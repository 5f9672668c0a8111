// Translation unit 1 of the -rdc=true fatbin test: calls a device function defined in
// fatbin_rdc_b.cu, so the PTX of both units must be linked.
extern __device__ float fatbin_rdc_helper(float x);

__global__ void fatbin_rdc_first(float* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = fatbin_rdc_helper(p[i]);
}

#ifdef FATBIN_MAIN
int main() { return 0; }
#endif

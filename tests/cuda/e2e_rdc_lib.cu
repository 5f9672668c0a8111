// The library half of the two-file -rdc=true program (e2e_rdc_main.cu): a device function
// and a device variable the other translation unit uses, and a kernel of its own.
__device__ int rdc_scale = 3;
__device__ unsigned long long rdc_calls;

__device__ int rdc_transform(int x) {
    atomicAdd(&rdc_calls, 1ull);
    return x * rdc_scale + 1;
}

__global__ void rdc_set_scale(int scale) { rdc_scale = scale; }

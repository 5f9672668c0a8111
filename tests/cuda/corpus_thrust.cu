// PTX front-end corpus: Thrust and CUB kernels (deep templates, large PTX). Never run.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/warp/warp_reduce.cuh>
#include <thrust/device_vector.h>
#include <thrust/reduce.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

__global__ void cub_block(const int* in, int* out) {
    using Reduce = cub::BlockReduce<int, 128>;
    using Scan = cub::BlockScan<int, 128>;
    using Warp = cub::WarpReduce<float>;
    __shared__ typename Reduce::TempStorage rtmp;
    __shared__ typename Scan::TempStorage stmp;
    __shared__ typename Warp::TempStorage wtmp[4];
    int v = in[blockIdx.x * 128 + threadIdx.x];
    int sum = Reduce(rtmp).Sum(v);
    int scanned;
    Scan(stmp).ExclusiveSum(v, scanned);
    float w = Warp(wtmp[threadIdx.x / 32]).Sum((float)v);
    out[blockIdx.x * 128 + threadIdx.x] = scanned + (int)w;
    if (threadIdx.x == 0) out[blockIdx.x] += sum;
}

struct saxpy {
    float a;
    __host__ __device__ float operator()(float x, float y) const { return a * x + y; }
};

int thrust_work(int n) {
    thrust::device_vector<float> x(n, 1.0f), y(n, 2.0f);
    thrust::transform(x.begin(), x.end(), y.begin(), y.begin(), saxpy{3.0f});
    thrust::sort(y.begin(), y.end());
    return (int)thrust::reduce(y.begin(), y.end());
}

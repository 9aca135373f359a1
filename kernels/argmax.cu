// argmax.cu: ids[r] = argmax(x[r, :]) for f32 x [T, V] (greedy sampling; chapter 10).
// Ties go to the smallest index, as numpy's argmax. One block per row; each thread scans a
// strided slice keeping (best value, its index); warps merge with shuffles, then shared memory.
#include "common.cuh"

__device__ __forceinline__ void better(float& v, int& i, float v2, int i2) {
    if (v2 > v || (v2 == v && i2 < i)) { v = v2; i = i2; }
}

extern "C" __global__ void argmax_rows(const float* __restrict__ x, int* __restrict__ ids, int T, int V) {
    __shared__ float sv[32];
    __shared__ int si[32];
    const int r = blockIdx.x, tid = threadIdx.x, lane = tid % WARP, wid = tid / WARP;
    const float* xr = x + (size_t)r * V;
    float best = -INFINITY;
    int bi = 0x7fffffff;
    for (int i = tid; i < V; i += blockDim.x) {
        float v = xr[i];
        if (v > best || (bi == 0x7fffffff)) { best = v; bi = i; }   // strided: first hit has smallest index
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        better(best, bi, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, bi, o));
    if (lane == 0) { sv[wid] = best; si[wid] = bi; }
    __syncthreads();
    if (wid == 0) {
        const int nw = blockDim.x / WARP;
        best = lane < nw ? sv[lane] : -INFINITY;
        bi = lane < nw ? si[lane] : 0x7fffffff;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            better(best, bi, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, bi, o));
        if (lane == 0) ids[r] = bi;
    }
}

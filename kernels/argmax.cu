// argmax.cu: ids[r] = argmax(x[r, :]) for f32 x [T, V] (greedy sampling; chapter 10).
// Ties go to the smallest index, as numpy's argmax. One block per row; each thread scans a
// strided slice keeping (best value, its index); warps merge with shuffles, then shared memory.
#include "common.cuh"

__device__ __forceinline__ void better(float& v, int& i, float v2, int i2) {
    if (v2 > v || (v2 == v && i2 < i)) { v = v2; i = i2; }
}

extern "C" __global__ void argmax_rows(const float* __restrict__ x, int* __restrict__ ids, int T, int V) {
    pdl_wait();
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
PDL_READY(argmax_rows);

// Two passes for long rows: a 151936-entry vocabulary read by one block per row keeps one SM busy
// for ~30 us while the others idle. Pass 1: block (c, r) reduces chunk c of row r (ARGMAX_CHUNK
// values) to (value, index); pass 2: one warp per row merges its chunks in order. The tie rule
// survives: every merge keeps the smaller index of equal values.
#ifndef ARGMAX_CHUNK
#define ARGMAX_CHUNK 2048
#endif
extern "C" __global__ void argmax_chunks(const float* __restrict__ x, float* __restrict__ pv, int* __restrict__ pi,
                                         int V) {
    pdl_wait();
    __shared__ float sv[32];
    __shared__ int si[32];
    const int r = blockIdx.y, c = blockIdx.x, tid = threadIdx.x, lane = tid % WARP, wid = tid / WARP;
    const float* xr = x + (size_t)r * V;
    const int lo = c * ARGMAX_CHUNK, hi = min(V, lo + ARGMAX_CHUNK);
    float best = -INFINITY;
    int bi = 0x7fffffff;
    for (int i = lo + tid; i < hi; i += blockDim.x) {
        float v = xr[i];
        if (v > best || (bi == 0x7fffffff)) { best = v; bi = i; }
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
        if (lane == 0) { pv[(size_t)r * gridDim.x + c] = best; pi[(size_t)r * gridDim.x + c] = bi; }
    }
}
PDL_READY(argmax_chunks);

extern "C" __global__ void argmax_merge(const float* __restrict__ pv, const int* __restrict__ pi,
                                        int* __restrict__ ids, int nch) {
    pdl_wait();
    const int r = blockIdx.x, lane = threadIdx.x;
    float best = -INFINITY;
    int bi = 0x7fffffff;
    for (int j = lane; j < nch; j += WARP) {
        const float v = pv[(size_t)r * nch + j];
        const int i = pi[(size_t)r * nch + j];
        if (j == lane) { best = v; bi = i; }               // a lane's first chunk: taken as it is
        else better(best, bi, v, i);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        better(best, bi, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, bi, o));
    if (lane == 0) ids[r] = bi;
}
PDL_READY(argmax_merge);

// softmax.cu: y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max)), f32 [T, N] (chapter 10).
#include "common.cuh"
#ifndef BLOCK
#define BLOCK 256
#endif

// v1: one thread per row, three passes (max, sum, write) over an uncoalesced row.
extern "C" __global__ void softmax_v1(const float* __restrict__ x, float* __restrict__ y, int T, int N) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= T) return;
    const float* xr = x + (size_t)r * N;
    float m = -INFINITY;
    for (int i = 0; i < N; i++) m = fmaxf(m, xr[i]);
    float s = 0.f;
    for (int i = 0; i < N; i++) s += expf(xr[i] - m);
    for (int i = 0; i < N; i++) y[(size_t)r * N + i] = expf(xr[i] - m) / s;
}

// v2: one block per row, shared-memory tree reductions for the max and for the sum.
extern "C" __global__ void softmax_v2(const float* __restrict__ x, float* __restrict__ y, int T, int N) {
    __shared__ float sh[BLOCK];
    const int r = blockIdx.x, tid = threadIdx.x;
    const float* xr = x + (size_t)r * N;
    float m = -INFINITY;
    for (int i = tid; i < N; i += BLOCK) m = fmaxf(m, xr[i]);
    sh[tid] = m;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) sh[tid] = fmaxf(sh[tid], sh[tid + s]);
        __syncthreads();
    }
    m = sh[0];
    __syncthreads();
    float sum = 0.f;
    for (int i = tid; i < N; i += BLOCK) sum += expf(xr[i] - m);
    sh[tid] = sum;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) sh[tid] += sh[tid + s];
        __syncthreads();
    }
    float inv = 1.f / sh[0];
    for (int i = tid; i < N; i += BLOCK) y[(size_t)r * N + i] = expf(xr[i] - m) * inv;
}

// v3: one block per row, ONLINE softmax: one read pass keeps a running (max m, sum l) per thread,
// rescaling l by exp(m_old - m_new) when the max grows (Milakov & Gimelshein 2018; the idea flash
// attention is built on, chapter 12). The (m, l) pairs merge with warp shuffles, then one more
// pass writes. Two passes over the row instead of three.
__device__ __forceinline__ void merge_ml(float& m, float& l, float m2, float l2) {
    float mm = fmaxf(m, m2);
    if (mm == -INFINITY) return;   // both empty
    l = l * __expf(m - mm) + l2 * __expf(m2 - mm);
    m = mm;
}
extern "C" __global__ void softmax_v3(const float* __restrict__ x, float* __restrict__ y, int T, int N) {
    __shared__ float sm[32], sl[32];
    const int r = blockIdx.x, tid = threadIdx.x, lane = tid % WARP, wid = tid / WARP;
    const float* xr = x + (size_t)r * N;
    float m = -INFINITY, l = 0.f;
    for (int i = tid; i < N; i += blockDim.x) {
        float v = xr[i];
        if (v > m) { l = l * __expf(m - v) + 1.f; m = v; }
        else if (m != -INFINITY) l += __expf(v - m);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), l2 = __shfl_xor_sync(0xffffffffu, l, o);
        merge_ml(m, l, m2, l2);
    }
    if (lane == 0) { sm[wid] = m; sl[wid] = l; }
    __syncthreads();
    if (wid == 0) {
        const int nw = blockDim.x / WARP;
        m = lane < nw ? sm[lane] : -INFINITY;
        l = lane < nw ? sl[lane] : 0.f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, o), l2 = __shfl_xor_sync(0xffffffffu, l, o);
            merge_ml(m, l, m2, l2);
        }
        if (lane == 0) { sm[0] = m; sl[0] = l; }
    }
    __syncthreads();
    m = sm[0];
    float inv = 1.f / sl[0];
    for (int i = tid; i < N; i += blockDim.x) y[(size_t)r * N + i] = __expf(xr[i] - m) * inv;
}

// A GEMV for weights stored as floats (F32, F16, BF16): a warp per output row n, its lanes along K,
// up to R rows of f32 activations against it (each row's sum in its own register, in the same order
// whatever R is: a row's result does not depend on the batch). GLU: the rows of a gate and an up
// matrix, y = silu(gate . x) * (up . x). Shared by gemv_f.cu (a matmul's few rows) and moe.cu (an
// expert's tile).
#pragma once
#include "common.cuh"

__device__ __forceinline__ float f32_of(float v) { return v; }
__device__ __forceinline__ float f32_of(__half v) { return __half2float(v); }
__device__ __forceinline__ float f32_of(__nv_bfloat16 v) { return __bfloat162float(v); }

// y[t, n] for t < nt (<= R): wr (and ur) the weight row(s) n [K], x [nt, K], y [nt, N]
template <int R, bool GLU, typename W>
__device__ __forceinline__ void gemv_f_rows(const W* __restrict__ wr, const W* __restrict__ ur,
                                            const float* __restrict__ x, float* __restrict__ y,
                                            int nt, int n, int N, int K)
{
    const int lane = threadIdx.x & 31;
    float a[R], b[R];
#pragma unroll
    for (int t = 0; t < R; ++t) a[t] = b[t] = 0.f;
    for (int i = lane; i < K; i += 32) {
        const float g = f32_of(wr[i]), u = GLU ? f32_of(ur[i]) : 0.f;
#pragma unroll
        for (int t = 0; t < R; ++t) {
            if (t >= nt) break;
            const float xv = x[(size_t)t * K + i];
            a[t] += g * xv;
            if (GLU) b[t] += u * xv;
        }
    }
#pragma unroll
    for (int t = 0; t < R; ++t) {
        if (t >= nt) break;
        float s = warp_sum(a[t]);
        if (GLU) s = silu(s) * warp_sum(b[t]);
        if (lane == 0) y[(size_t)t * N + n] = s;
    }
}

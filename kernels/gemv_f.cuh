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

// 8 consecutive values as floats, in 16-byte loads (p 16-byte aligned)
__device__ __forceinline__ void load8(const float* p, float* v) {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}
__device__ __forceinline__ void load8(const __half* p, float* v) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
    for (int j = 0; j < 4; ++j) { const float2 f = __half22float2(h[j]); v[2 * j] = f.x; v[2 * j + 1] = f.y; }
}
__device__ __forceinline__ void load8(const __nv_bfloat16* p, float* v) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
    for (int j = 0; j < 4; ++j) { const float2 f = __bfloat1622float2(h[j]); v[2 * j] = f.x; v[2 * j + 1] = f.y; }
}

// y[t, n] for t < nt (<= R): wr (and ur) the weight row(s) n [K], x [nt, K], y [nt, N]. Where K is a
// multiple of 8 and the rows 16-byte aligned, a lane takes 8 values at a time (16-byte loads: a
// warp reads 512 bytes of F16 weights a step, not 64); else one at a time.
template <int R, bool GLU, typename W>
__device__ __forceinline__ void gemv_f_rows(const W* __restrict__ wr, const W* __restrict__ ur,
                                            const float* __restrict__ x, float* __restrict__ y,
                                            int nt, int n, int N, int K)
{
    const int lane = threadIdx.x & 31;
    float a[R], b[R];
#pragma unroll
    for (int t = 0; t < R; ++t) a[t] = b[t] = 0.f;
    const bool vec = K % 8 == 0 && ((size_t)wr | (size_t)(GLU ? ur : wr) | (size_t)x) % 16 == 0;
    if (vec) {
        for (int i = 8 * lane; i < K; i += 256) {      // K % 8 == 0: every 8 values are some lane's
            float g[8], u[8];
            load8(wr + i, g);
            if (GLU) load8(ur + i, u);
#pragma unroll
            for (int t = 0; t < R; ++t) {
                if (t >= nt) break;
                float xv[8];
                load8(x + (size_t)t * K + i, xv);
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    a[t] += g[j] * xv[j];
                    if (GLU) b[t] += u[j] * xv[j];
                }
            }
        }
    } else {
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
    }
#pragma unroll
    for (int t = 0; t < R; ++t) {
        if (t >= nt) break;
        float s = warp_sum(a[t]);
        if (GLU) s = silu(s) * warp_sum(b[t]);
        if (lane == 0) y[(size_t)t * N + n] = s;
    }
}

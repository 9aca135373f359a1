// elementwise.cu: residual add and SwiGLU, plus f32 <-> f16 casts (chapter 10).
// All f32 [n] flat arrays. v1: one element per thread; v2: float4 (16-byte) loads and stores,
// grid-stride loop (needs n % 4 == 0 and 16-byte aligned pointers: cudaMalloc gives 256).
#include "common.cuh"

__device__ __forceinline__ float silu(float g) { return g / (1.f + __expf(-g)); }

extern "C" __global__ void add_v1(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a[i] + b[i];
}

extern "C" __global__ void add_v2(const float4* __restrict__ a, const float4* __restrict__ b,
                                  float4* __restrict__ y, long n4) {
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 u = a[i], v = b[i];
        y[i] = make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w);
    }
}

// swiglu(gate, up) = silu(gate) * up, silu(g) = g * sigmoid(g)
extern "C" __global__ void swiglu_v1(const float* __restrict__ g, const float* __restrict__ u,
                                     float* __restrict__ y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = silu(g[i]) * u[i];
}

extern "C" __global__ void swiglu_v2(const float4* __restrict__ g, const float4* __restrict__ u,
                                     float4* __restrict__ y, long n4) {
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 a = g[i], b = u[i];
        y[i] = make_float4(silu(a.x) * b.x, silu(a.y) * b.y, silu(a.z) * b.z, silu(a.w) * b.w);
    }
}

extern "C" __global__ void f32_to_f16(const float* __restrict__ x, __half* __restrict__ y, long n) {
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] = __float2half_rn(x[i]);
}

extern "C" __global__ void f16_to_f32(const __half* __restrict__ x, float* __restrict__ y, long n) {
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] = __half2float(x[i]);
}

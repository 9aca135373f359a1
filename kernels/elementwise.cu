// elementwise.cu: residual add, bias add, SwiGLU and GeGLU, a scale, plus casts between f32, f16 and bf16 (chapter 10).
// All f32 [n] flat arrays. v1: one element per thread; v2: float4 (16-byte) loads and stores,
// grid-stride loop (needs n % 4 == 0 and 16-byte aligned pointers: cudaMalloc gives 256).
#include "common.cuh"

extern "C" __global__ void add_v1(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a[i] + b[i];
}

extern "C" __global__ void add_v2(const float4* __restrict__ a, const float4* __restrict__ b,
                                  float4* __restrict__ y, long n4) {
    pdl_wait();
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 u = a[i], v = b[i];
        y[i] = make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w);
    }
}
PDL_READY(add_v2);

// a bias: y[r, j] = a[r, j] + b[j] for a [n / N, N] and b [N] (the attention biases, chapter 05b).
// Grid-stride over the n elements; b (a few KiB) stays in the cache.
extern "C" __global__ void add_rows(const float* __restrict__ a, const float* __restrict__ b,
                                    float* __restrict__ y, long n, int N) {
    pdl_wait();
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] = a[i] + b[i % N];
}
PDL_READY(add_rows);

// swiglu(gate, up) = silu(gate) * up, silu(g) = g * sigmoid(g)
extern "C" __global__ void swiglu_v1(const float* __restrict__ g, const float* __restrict__ u,
                                     float* __restrict__ y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = silu(g[i]) * u[i];
}

extern "C" __global__ void swiglu_v2(const float4* __restrict__ g, const float4* __restrict__ u,
                                     float4* __restrict__ y, long n4) {
    pdl_wait();
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 a = g[i], b = u[i];
        y[i] = make_float4(silu(a.x) * b.x, silu(a.y) * b.y, silu(a.z) * b.z, silu(a.w) * b.w);
    }
}
PDL_READY(swiglu_v2);

// geglu(gate, up) = gelu(gate) * up, GELU in its tanh form (Gemma's gated activation, chapter 08c)
__device__ __forceinline__ float gelu_tanh(float g) {
    return 0.5f * g * (1.f + tanhf(0.7978845608f * (g + 0.044715f * g * g * g)));   // sqrt(2/pi)
}
extern "C" __global__ void geglu_v1(const float* __restrict__ g, const float* __restrict__ u,
                                    float* __restrict__ y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = gelu_tanh(g[i]) * u[i];
}

extern "C" __global__ void geglu_v2(const float4* __restrict__ g, const float4* __restrict__ u,
                                    float4* __restrict__ y, long n4) {
    pdl_wait();
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 a = g[i], b = u[i];
        y[i] = make_float4(gelu_tanh(a.x) * b.x, gelu_tanh(a.y) * b.y, gelu_tanh(a.z) * b.z, gelu_tanh(a.w) * b.w);
    }
}
PDL_READY(geglu_v2);

// y = x * s (Gemma scales its embeddings by sqrt(hidden), chapter 08c)
extern "C" __global__ void scale_f32(const float* __restrict__ x, float* __restrict__ y, long n, float s) {
    pdl_wait();
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] = x[i] * s;
}
PDL_READY(scale_f32);

// Casts between the float types (activations into the 16-bit types of the tensor cores and of
// the KV cache), and a copy of a [R, K] 16-bit matrix into a zero-padded [R, Kp] one (odd K).
extern "C" __global__ void cast_f32_f16(const float* __restrict__ a, __half* __restrict__ b, long long n) {
    pdl_wait();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        b[i] = __float2half_rn(a[i]);
}
PDL_READY(cast_f32_f16);
extern "C" __global__ void cast_f32_bf16(const float* __restrict__ a, __nv_bfloat16* __restrict__ b, long long n) {
    pdl_wait();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        b[i] = __float2bfloat16_rn(a[i]);
}
PDL_READY(cast_f32_bf16);
extern "C" __global__ void cast_f16_bf16(const __half* __restrict__ a, __nv_bfloat16* __restrict__ b, long long n) {
    pdl_wait();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        b[i] = __float2bfloat16_rn(__half2float(a[i]));
}
PDL_READY(cast_f16_bf16);
extern "C" __global__ void cast_f16_f32(const __half* __restrict__ a, float* __restrict__ b, long long n) {
    pdl_wait();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        b[i] = __half2float(a[i]);
}
PDL_READY(cast_f16_f32);
extern "C" __global__ void pad_cols_u16(const uint16_t* __restrict__ a, uint16_t* __restrict__ b, int R, int K, int Kp) {
    const long long n = (long long)R * Kp;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const int r = (int)(i / Kp), k = (int)(i % Kp);
        b[i] = k < K ? a[(size_t)r * K + k] : (uint16_t)0;
    }
}
extern "C" __global__ void cast_bf16_f32(const __nv_bfloat16* __restrict__ a, float* __restrict__ b, long long n) {
    pdl_wait();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        b[i] = __bfloat162float(a[i]);
}
PDL_READY(cast_bf16_f32);

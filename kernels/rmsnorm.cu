// rmsnorm.cu: y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w   (chapter 10)
// x, y: f32 [T, D] row-major; w: f32 [D]. Four versions, slowest to fastest.
#include "common.cuh"
#ifndef BLOCK
#define BLOCK 256          // threads per block (v2, v3); a multiple of 32
#endif

// v1: one thread per row. Each thread walks its own row: neighbouring threads read addresses
// D floats apart, so a warp's 32 loads touch 32 different cache lines (uncoalesced).
extern "C" __global__ void rmsnorm_v1(const float* __restrict__ x, const float* __restrict__ w,
                                      float* __restrict__ y, int T, int D, float eps) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= T) return;
    const float* xr = x + (size_t)r * D;
    float ss = 0.f;
    for (int d = 0; d < D; d++) ss += xr[d] * xr[d];
    float inv = rsqrtf(ss / D + eps);
    for (int d = 0; d < D; d++) y[(size_t)r * D + d] = xr[d] * inv * w[d];
}

// v2: one block per row; threads stride over the row (coalesced), then a shared-memory tree
// reduction: log2(BLOCK) rounds, each followed by __syncthreads().
extern "C" __global__ void rmsnorm_v2(const float* __restrict__ x, const float* __restrict__ w,
                                      float* __restrict__ y, int T, int D, float eps) {
    __shared__ float sh[BLOCK];
    const int r = blockIdx.x, tid = threadIdx.x;
    const float* xr = x + (size_t)r * D;
    float ss = 0.f;
    for (int d = tid; d < D; d += BLOCK) ss += xr[d] * xr[d];
    sh[tid] = ss;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) sh[tid] += sh[tid + s];
        __syncthreads();
    }
    float inv = rsqrtf(sh[0] / D + eps);
    for (int d = tid; d < D; d += BLOCK) y[(size_t)r * D + d] = xr[d] * inv * w[d];
}

// v3: one block per row, 16-byte loads (float4; needs D % 4 == 0) and warp shuffles: a warp sums
// its 32 values in 5 register-to-register steps, and only one value per warp goes through shared
// memory. The second pass re-reads the row, which is still in L1/L2.
extern "C" __global__ void rmsnorm_v3(const float* __restrict__ x, const float* __restrict__ w,
                                      float* __restrict__ y, int T, int D, float eps) {
    __shared__ float red[32];
    const int r = blockIdx.x, tid = threadIdx.x, D4 = D / 4;
    const float4* xr = reinterpret_cast<const float4*>(x + (size_t)r * D);
    const float4* w4 = reinterpret_cast<const float4*>(w);
    float4* yr = reinterpret_cast<float4*>(y + (size_t)r * D);
    float ss = 0.f;
    for (int i = tid; i < D4; i += blockDim.x) {
        float4 v = xr[i];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    float inv = rsqrtf(block_sum(ss, red) / D + eps);
    for (int i = tid; i < D4; i += blockDim.x) {
        float4 v = xr[i], g = w4[i];
        yr[i] = make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z, v.w * inv * g.w);
    }
}

// v4: one WARP per row, for short rows (D <= a few thousand; e.g. Qwen3's per-head q/k norm,
// D = 128): a block per row would leave most of its threads idle. No shared memory, no
// __syncthreads(); BLOCK/32 rows per block. Needs D % 4 == 0.
extern "C" __global__ void rmsnorm_v4(const float* __restrict__ x, const float* __restrict__ w,
                                      float* __restrict__ y, int T, int D, float eps) {
    const int lane = threadIdx.x % WARP;
    const int r = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP;
    if (r >= T) return;
    const int D4 = D / 4;
    const float4* xr = reinterpret_cast<const float4*>(x + (size_t)r * D);
    const float4* w4 = reinterpret_cast<const float4*>(w);
    float4* yr = reinterpret_cast<float4*>(y + (size_t)r * D);
    float ss = 0.f;
    for (int i = lane; i < D4; i += WARP) {
        float4 v = xr[i];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    float inv = rsqrtf(warp_sum(ss) / D + eps);
    for (int i = lane; i < D4; i += WARP) {
        float4 v = xr[i], g = w4[i];
        yr[i] = make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z, v.w * inv * g.w);
    }
}

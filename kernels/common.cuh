// common.cuh: small device helpers shared by tffedu's kernels (chapters 10-12).
// Plain CUDA C; compiled at run time by PyCUDA's SourceModule (no_extern_c=True, so every
// kernel that Python looks up by name is declared extern "C").
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#define WARP 32

// SwiGLU's gate: silu(g) = g * sigmoid(g) (elementwise.cu, and the Q8_0 GEMV's and GEMM's epilogues).
__device__ __forceinline__ float silu(float g) { return g / (1.f + __expf(-g)); }

// Sum / max of a float over the 32 lanes of a warp: every lane gets the result.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Block-wide sum with warp shuffles: one partial per warp goes through shared memory.
// `red` must hold 32 floats. Every thread gets the result. blockDim.x must be a multiple of 32.
__device__ __forceinline__ float block_sum(float v, float* red) {
    const int lane = threadIdx.x % WARP, wid = threadIdx.x / WARP, nw = blockDim.x / WARP;
    v = warp_sum(v);
    __syncthreads();                       // `red` may still be read by a previous call
    if (lane == 0) red[wid] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : 0.f;
    return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* red) {
    const int lane = threadIdx.x % WARP, wid = threadIdx.x / WARP, nw = blockDim.x / WARP;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) red[wid] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : -INFINITY;
    return warp_max(v);
}

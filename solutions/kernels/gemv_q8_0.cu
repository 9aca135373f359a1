// Exercise 11.3 (GPU), reference: the Q8_0 GEMV with one warp per weight row.
#include <cuda_fp16.h>

extern "C" __global__ void gemv_q8_0_warp_ex(const unsigned char* __restrict__ w, const float* __restrict__ x,
                                             float* __restrict__ y, int N, int K) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const unsigned char* r = w + (size_t)row * (K / 32) * 34;   // this row's blocks
    float acc = 0.0f;
    for (int b = lane; b < K / 32; b += 32) {
        const unsigned char* blk = r + b * 34;                   // 34-byte blocks: 2-byte aligned
        const float d = __half2float(*reinterpret_cast<const __half*>(blk));
        const signed char* q = reinterpret_cast<const signed char*>(blk + 2);
        float dot = 0.0f;
        for (int i = 0; i < 32; ++i) dot += q[i] * x[b * 32 + i];
        acc += d * dot;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) y[row] = acc;
}

// Exercise 11.3 (GPU): the Q8_0 GEMV with one warp per weight row, y = W x. A row of W is K/32 raw
// blocks of 34 bytes: an fp16 scale d, then 32 int8 codes q; its weights are d * q. Lane `lane` of
// the row's warp takes blocks lane, lane + 32, lane + 64, ...: for each, d times the dot product of
// the 32 codes with the 32 matching x values, added into `acc`. Then the 32 lanes' sums are added
// (__shfl_xor_sync, as in chapter 10's reductions) and lane 0 writes y[row].
// Check it: python -m tffedu.exercises ch11
#include <cuda_fp16.h>

extern "C" __global__ void gemv_q8_0_warp_ex(const unsigned char* __restrict__ w, const float* __restrict__ x,
                                             float* __restrict__ y, int N, int K) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const unsigned char* r = w + (size_t)row * (K / 32) * 34;   // this row's blocks
    float acc = 0.0f;
    // TODO: yours
    if (lane == 0) y[row] = acc;
}

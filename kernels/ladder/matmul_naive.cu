// Chapter 11, version 1: the naive matmul.  y[M,N] = x[M,K] @ w[N,K]^T   (fp32)
//
// w is stored the GGUF way: row n of w holds the K weights of output n, so both operands are
// contiguous along K ("NT" layout).  One thread computes one output element: it walks a row of x
// and a row of w.  Every thread of a warp reads a different row of w (stride K floats), so each
// load instruction touches 32 different cache lines: correct, simple, and about 1% of the card.
#include <stdint.h>

extern "C" __global__ void matmul_naive_f32(const float* __restrict__ x, const float* __restrict__ w,
                                            float* __restrict__ y, int M, int N, int K)
{
    const int n = blockIdx.x * blockDim.x + threadIdx.x;   // output column (a row of w)
    const int m = blockIdx.y * blockDim.y + threadIdx.y;   // output row (a row of x)
    if (m >= M || n >= N) return;
    const float* xr = x + (size_t)m * K;
    const float* wr = w + (size_t)n * K;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += xr[k] * wr[k];
    y[(size_t)m * N + n] = acc;
}

// Chapter 11b: y f32 [T, N] = x f32 [T, K] @ w[N, K].T for weights stored as floats (WT), where the
// fp32 GEMM's 128 x 128 tiles would leave the card idle: a few rows (decode), or a few columns (a
// mixture's router: N = the experts, 128). A warp per weight row, 4 a block; blockIdx.y takes ROWS
// rows of x (grid (N / 4, T / ROWS) rounded up). The weights are read once per ROWS rows of x
// (from L2 after the first), so the matmul op takes this road only while they are small.
#include "gemv_f.cuh"

#ifndef WT
#define WT float
#endif
#ifndef ROWS
#define ROWS 8
#endif

extern "C" __global__ void __launch_bounds__(128) gemv_f(const WT* __restrict__ w, const float* __restrict__ x,
                                                          float* __restrict__ y, int T, int N, int K)
{
    pdl_wait();
    const int n = blockIdx.x * 4 + (threadIdx.x >> 5), m0 = blockIdx.y * ROWS;
    if (n >= N) return;
    gemv_f_rows<ROWS, false>(w + (size_t)n * K, (const WT*)nullptr, x + (size_t)m0 * K, y + (size_t)m0 * N,
                             min(ROWS, T - m0), n, N, K);
}
PDL_READY(gemv_f);

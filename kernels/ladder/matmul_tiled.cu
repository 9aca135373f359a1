// Chapter 11, version 2: shared-memory tiling.  y[M,N] = x[M,K] @ w[N,K]^T   (fp32)
//
// A TILE x TILE block of threads computes a TILE x TILE block of y.  Each step it copies a
// TILE x TILE tile of x and one of w into shared memory (coalesced: consecutive threads read
// consecutive k), waits, and then every thread reuses the tiles TILE times.  Global traffic
// drops by a factor TILE; the +1 padding keeps the column reads of ws free of bank conflicts.
#ifndef TILE
#define TILE 32
#endif

extern "C" __global__ void matmul_tiled_f32(const float* __restrict__ x, const float* __restrict__ w,
                                            float* __restrict__ y, int M, int N, int K)
{
    __shared__ float xs[TILE][TILE + 1];
    __shared__ float ws[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int k = k0 + tx;
        // xs[ty][tx] = x[m0+ty][k0+tx];  ws[ty][tx] = w[n0+ty][k0+tx]   (zero outside the matrix)
        xs[ty][tx] = (m0 + ty < M && k < K) ? x[(size_t)(m0 + ty) * K + k] : 0.f;
        ws[ty][tx] = (n0 + ty < N && k < K) ? w[(size_t)(n0 + ty) * K + k] : 0.f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += xs[ty][kk] * ws[tx][kk];
        __syncthreads();
    }
    if (m0 + ty < M && n0 + tx < N) y[(size_t)(m0 + ty) * N + n0 + tx] = acc;
}

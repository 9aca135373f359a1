// Chapter 11, version 3: register blocking (2D thread tiles).  y[M,N] = x[M,K] @ w[N,K]^T  (fp32)
//
// Version 2 does one FMA per two shared-memory loads.  Here a block of (BM/TM)*(BN/TN) threads
// computes a BM x BN tile of y and each thread owns a TM x TN sub-tile held in registers: per k it
// loads TM values of x and TN values of w from shared memory (float4 loads) and does TM*TN FMAs.
// Tiles are stored k-major in shared memory (xs[k][m], ws[k][n]) so that those loads are
// contiguous; the +4 padding keeps the transposing stores free of bank conflicts and the rows
// 16-byte aligned.  Out-of-range elements load as zeros and are never stored.
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif
#define NTHREADS ((BM / TM) * (BN / TN))
#define PAD 4

extern "C" __global__ void __launch_bounds__(NTHREADS)
matmul_regblock_f32(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                    int M, int N, int K)
{
    __shared__ __align__(16) float xs[BK][BM + PAD];
    __shared__ __align__(16) float ws[BK][BN + PAD];
    const int tid = threadIdx.x;
    const int tx = tid % (BN / TN), ty = tid / (BN / TN);
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // cooperative load: element e of the tile is row e / BK, column e % BK
#pragma unroll
        for (int e = tid; e < BM * BK; e += NTHREADS) {
            const int r = e / BK, k = k0 + e % BK;
            xs[e % BK][r] = (m0 + r < M && k < K) ? x[(size_t)(m0 + r) * K + k] : 0.f;
        }
#pragma unroll
        for (int e = tid; e < BN * BK; e += NTHREADS) {
            const int r = e / BK, k = k0 + e % BK;
            ws[e % BK][r] = (n0 + r < N && k < K) ? w[(size_t)(n0 + r) * K + k] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&xs[kk][ty * TM + i]);
                a[i] = v.x; a[i + 1] = v.y; a[i + 2] = v.z; a[i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&ws[kk][tx * TN + j]);
                b[j] = v.x; b[j + 1] = v.y; b[j + 2] = v.z; b[j + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + ty * TM + i;
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int n = n0 + tx * TN + j;
            if (n < N) y[(size_t)m * N + n] = acc[i][j];
        }
    }
}

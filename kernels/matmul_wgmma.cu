// Chapter 11, version 5: Hopper's warpgroup MMA.  y[M,N] (fp32) = x[M,K] @ w[N,K]^T, fp16/bf16 in.
//
// Version 4 feeds the tensor cores one warp at a time with mma.sync, every operand passing through
// registers (ldmatrix).  Hopper adds wgmma: a *warpgroup* (4 consecutive warps, 128 threads) issues
// one asynchronous m64nNk16 product whose operands the tensor cores read straight from shared memory,
// described by a 64-bit "matrix descriptor" (address, stride between 8-row groups, swizzle mode).
//   * the block has 2 warpgroups (256 threads); each owns 64 rows of the BM = 128-row tile and the
//     whole BN (128 or 256) width: one wgmma.m64n{BN}k16 per 16-wide k step, 4 per BK = 64 tile;
//   * tiles arrive with cp.async (STAGES-deep ring) in exactly the hardware's 128-byte swizzle:
//     rows of BK = 64 halves = 128 bytes, 16-byte chunk c of row r stored at c ^ (r % 8), tile bases
//     1024-byte aligned; so a descriptor with "128B swizzle" and an 8-row stride of 1024 bytes
//     describes it, and stepping 16 elements along k is adding 32 bytes to the start address;
//   * cp.async writes go through the generic proxy, wgmma reads through the async proxy:
//     fence.proxy.async before the barrier that publishes a tile;
//   * one wgmma batch stays in flight (wgmma.wait_group 1) while the next is issued, so the refill
//     distance is STAGES-2 tiles.
// Needs sm_90a (compile with -arch sm_90a).  K % 8 == 0, x and w 16-byte aligned; M, N any.
#include "wgmma.cuh"

#ifndef BN
#define BN 128
#endif
#ifndef STAGES
#define STAGES 5
#endif
#define BM 128
#define BK 64
#define NTHREADS 256
#define CPR (BK / 8)
static_assert(BN == 128 || BN == 256, "BN must be 128 or 256");
static_assert(STAGES >= 3, "STAGES >= 3");

// rows [r0, r0+ROWS) x k-tile kt of src [R, K] -> swizzled smem tile (zero-filled outside)
template <typename T, int ROWS>
__device__ __forceinline__ void load_tile(T* dst, const T* __restrict__ src, int r0, int R, int K, int kt) {
    const int k0 = kt * BK;
#pragma unroll
    for (int i = 0; i < ROWS * CPR / NTHREADS; ++i) {
        const int e = threadIdx.x + i * NTHREADS;
        const int r = e / CPR, c = e % CPR;
        const int gr = r0 + r, gk = k0 + c * 8;
        const bool ok = gr < R && gk < K;
        const T* g = ok ? src + (size_t)gr * K + gk : src;
        cp_async16(smem_u32(dst + r * BK + ((c ^ (r & 7)) * 8)), g, ok ? 16 : 0);
    }
}

template <typename T>
__device__ __forceinline__ void gemm_wgmma(const T* __restrict__ x, const T* __restrict__ w, float* __restrict__ y,
                                           int M, int N, int K, int ldy)
{
    extern __shared__ unsigned char smem_raw[];
    // 1024-byte aligned base (the launcher asks for 1 KB extra)
    unsigned char* base = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    T* sx = reinterpret_cast<T*>(base);                 // [STAGES][BM][BK]
    T* sw = sx + STAGES * BM * BK;                      // [STAGES][BN][BK]
    const int tid = threadIdx.x, wg = tid >> 7, wid = (tid >> 5) & 3, lane = tid & 31;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int KT = (K + BK - 1) / BK;
    constexpr int PF = STAGES - 2;                      // refill distance

    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

#pragma unroll
    for (int s = 0; s < PF; ++s) {
        if (s < KT) {
            load_tile<T, BM>(sx + s * BM * BK, x, m0, M, K, s);
            load_tile<T, BN>(sw + s * BN * BK, w, n0, N, K, s);
        }
        cp_async_commit();
    }
    for (int kt = 0; kt < KT; ++kt) {
        cp_async_wait<PF - 1>();      // tile kt landed (this thread's copies)
        fence_proxy_async();          // make them visible to the tensor cores' (async) proxy
        __syncthreads();              // everybody's; and batch kt-2 is finished in both warpgroups
        const int nk = kt + PF;
        if (nk < KT) {
            load_tile<T, BM>(sx + (nk % STAGES) * BM * BK, x, m0, M, K, nk);
            load_tile<T, BN>(sw + (nk % STAGES) * BN * BK, w, n0, N, K, nk);
        }
        cp_async_commit();
        const T* tx = sx + (kt % STAGES) * BM * BK + wg * 64 * BK;
        const T* tw = sw + (kt % STAGES) * BN * BK;
        const uint64_t da = make_desc(tx), db = make_desc(tw);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) Wgmma<T, BN>::run(acc, da + 2 * kk, db + 2 * kk);   // +32 bytes per k16
        wgmma_commit();
        wgmma_wait<1>();              // keep one batch in flight
    }
    wgmma_wait<0>();
    cp_async_wait<0>();
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) fence_reg(acc[i]);

    // accumulator layout of m64nNk16: warp wid of the warpgroup holds rows 16*wid..+15; for each n8
    // chunk j: acc[4j], acc[4j+1] -> (row g, cols 8j+2t, +1), acc[4j+2], acc[4j+3] -> (row g+8, ...)
    const int g = lane >> 2, t = lane & 3;
    const int mrow = m0 + wg * 64 + wid * 16 + g;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int n = n0 + j * 8 + 2 * t;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = mrow + 8 * h;
            if (m >= M) continue;
            float* p = y + (size_t)m * ldy + n;
            const float a = acc[4 * j + 2 * h], b = acc[4 * j + 2 * h + 1];
            if (n + 1 < N && ((reinterpret_cast<uintptr_t>(p) & 7) == 0)) {
                *reinterpret_cast<float2*>(p) = make_float2(a, b);
            } else {
                if (n < N) p[0] = a;
                if (n + 1 < N) p[1] = b;
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(NTHREADS, 1)
matmul_wgmma_f16(const __half* __restrict__ x, const __half* __restrict__ w, float* __restrict__ y,
                 int M, int N, int K, int ldy)
{
    gemm_wgmma<__half>(x, w, y, M, N, K, ldy);
}

extern "C" __global__ void __launch_bounds__(NTHREADS, 1)
matmul_wgmma_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, float* __restrict__ y,
                  int M, int N, int K, int ldy)
{
    gemm_wgmma<__nv_bfloat16>(x, w, y, M, N, K, ldy);
}

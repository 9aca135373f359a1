// Chapter 11, version 4: tensor cores.  y[M,N] (fp32) = x[M,K] @ w[N,K]^T, x and w fp16 or bf16.
//
// The same block tiling as version 3, but the inner product runs on the tensor cores with the
// warp-level instruction  mma.sync.m16n8k16 (16x16 of x times 16x8 of w^T, fp32 accumulate).
//   * cp.async: global -> shared copies that bypass the registers, STAGES tiles in flight
//     (a multi-stage software pipeline: while the tensor cores chew on tile k, tiles k+1..k+STAGES-1
//     are on their way);
//   * ldmatrix.x4: one instruction loads a whole 16x16 fragment from shared memory in the exact
//     register layout mma expects;
//   * an XOR swizzle of the 16-byte chunks of every shared-memory row, so that the 8 row addresses of
//     each ldmatrix phase hit 8 different bank groups (no padding needed);
//   * each warp owns a WM x WN tile of y: (WM/16)*(WN/8) mma per 16-wide k step, fed by
//     WM/16 + WN/16 ldmatrix.x4.
// w in GGUF layout [N,K] is exactly the "col" operand of mma (K contiguous), so no transpose.
// Requirements (the launcher pads otherwise): K % 8 == 0, x and w 16-byte aligned.
// y has row stride ldy (>= N), so a launch can fill a column slice of a wider output.
// Rows/columns beyond M, N and the K tail are zero-filled by cp.async's src-size operand.
#include "common.cuh"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 64
#endif
#ifndef STAGES
#define STAGES 4
#endif
#define WARPS_M (BM / WM)
#define WARPS_N (BN / WN)
#define NTHREADS (WARPS_M * WARPS_N * 32)
#define MT (WM / 16)   // m16 tiles per warp
#define NT (WN / 8)    // n8 tiles per warp
#define CPR (BK / 8)   // 16-byte chunks per shared-memory row

static_assert(BK == 32 || BK == 64, "BK must be 32 or 64");
static_assert(WN % 16 == 0 && WM % 16 == 0, "warp tile must be a multiple of 16");

// Physical chunk of logical chunk c in row r.
__device__ __forceinline__ int swz(int r, int c) {
#if BK == 32
    return c ^ ((r >> 1) & 3);    // rows are 64 B: two rows share a 128-B bank line
#else
    return c ^ (r & 7);           // rows are 128 B: the classic 128-B swizzle
#endif
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

template <typename T> struct Mma;
template <> struct Mma<__half> {
    static __device__ __forceinline__ void run(float* c, const uint32_t* a, const uint32_t* b) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};
template <> struct Mma<__nv_bfloat16> {
    static __device__ __forceinline__ void run(float* c, const uint32_t* a, const uint32_t* b) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};

// Copy the BK-wide k-tile `kt` of rows [r0, r0+ROWS) of src [R, K] into a swizzled smem tile.
template <typename T, int ROWS>
__device__ __forceinline__ void load_tile(T* dst, const T* __restrict__ src, int r0, int R, int K, int kt) {
    const int k0 = kt * BK;
#pragma unroll
    for (int i = 0; i < (ROWS * CPR + NTHREADS - 1) / NTHREADS; ++i) {
        const int e = threadIdx.x + i * NTHREADS;
        if ((ROWS * CPR) % NTHREADS == 0 || e < ROWS * CPR) {
            const int r = e / CPR, c = e % CPR;
            const int gr = r0 + r, gk = k0 + c * 8;
            const bool ok = gr < R && gk < K;
            const T* g = ok ? src + (size_t)gr * K + gk : src;   // a valid address even when unused
            cp_async16(smem_u32(dst + r * BK + swz(r, c) * 8), g, ok ? 16 : 0);
        }
    }
}

__device__ __forceinline__ void store2(float* __restrict__ y, int M, int N, int ldy, int m, int n, float a, float b) {
    if (m >= M) return;
    float* p = y + (size_t)m * ldy + n;
    if (n + 1 < N && ((reinterpret_cast<uintptr_t>(p) & 7) == 0)) {
        *reinterpret_cast<float2*>(p) = make_float2(a, b);
    } else {
        if (n < N) p[0] = a;
        if (n + 1 < N) p[1] = b;
    }
}

template <typename T>
__device__ __forceinline__ void gemm_mma(const T* __restrict__ x, const T* __restrict__ w, float* __restrict__ y,
                                         int M, int N, int K, int ldy)
{
    extern __shared__ __align__(128) unsigned char smem[];
    T* sx = reinterpret_cast<T*>(smem);            // [STAGES][BM][BK]
    T* sw = sx + STAGES * BM * BK;                 // [STAGES][BN][BK]
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int KT = (K + BK - 1) / BK;

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.f;

    // prologue: STAGES-1 tiles in flight
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) {
            load_tile<T, BM>(sx + s * BM * BK, x, m0, M, K, s);
            load_tile<T, BN>(sw + s * BN * BK, w, n0, N, K, s);
        }
        cp_async_commit();
    }

    for (int kt = 0; kt < KT; ++kt) {
        cp_async_wait<STAGES - 2>();   // tile kt has landed (for this thread) ...
        __syncthreads();               // ... and for every thread; stage (kt-1)%STAGES is free again
        const int nk = kt + STAGES - 1;
        if (nk < KT) {
            load_tile<T, BM>(sx + (nk % STAGES) * BM * BK, x, m0, M, K, nk);
            load_tile<T, BN>(sw + (nk % STAGES) * BN * BK, w, n0, N, K, nk);
        }
        cp_async_commit();             // always commit (maybe an empty group) to keep the count

        const T* tx = sx + (kt % STAGES) * BM * BK;
        const T* tw = sw + (kt % STAGES) * BN * BK;
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            uint32_t af[MT][4], bf[NT][2];
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                const int r = wm * WM + i * 16 + (lane & 15);
                const int c = kk * 2 + (lane >> 4);
                ldmatrix_x4(af[i], smem_u32(tx + r * BK + swz(r, c) * 8));
            }
#pragma unroll
            for (int j = 0; j < NT / 2; ++j) {
                const int r = wn * WN + j * 16 + (lane & 7) + ((lane >> 4) << 3);
                const int c = kk * 2 + ((lane >> 3) & 1);
                uint32_t t4[4];
                ldmatrix_x4(t4, smem_u32(tw + r * BK + swz(r, c) * 8));
                bf[2 * j][0] = t4[0]; bf[2 * j][1] = t4[1];
                bf[2 * j + 1][0] = t4[2]; bf[2 * j + 1][1] = t4[3];
            }
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j) Mma<T>::run(acc[i][j], af[i], bf[j]);
        }
    }
    cp_async_wait<0>();

    // epilogue: the mma accumulator layout: c0,c1 -> (row g, cols 2t,2t+1), c2,c3 -> (row g+8, ...)
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const int m = m0 + wm * WM + i * 16 + g;
            const int n = n0 + wn * WN + j * 8 + 2 * t;
            store2(y, M, N, ldy, m, n, acc[i][j][0], acc[i][j][1]);
            store2(y, M, N, ldy, m + 8, n, acc[i][j][2], acc[i][j][3]);
        }
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
matmul_mma_f16(const __half* __restrict__ x, const __half* __restrict__ w, float* __restrict__ y, int M, int N, int K, int ldy)
{
    gemm_mma<__half>(x, w, y, M, N, K, ldy);
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
matmul_mma_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, float* __restrict__ y,
                int M, int N, int K, int ldy)
{
    gemm_mma<__nv_bfloat16>(x, w, y, M, N, K, ldy);
}

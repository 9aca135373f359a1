// Chapter 11, the other road to tensor cores for Q8_0 (llama.cpp's MMQ idea): keep both operands
// in int8 and multiply them with the integer tensor-core instruction, instead of dequantizing the
// weights to fp16 (versions 6 and 7).
// y[M,N] (fp32) = x @ w^T with x given as int8 blocks (xq [M, K], one fp32 scale per 32: xd
// [M, K/32], what quantize_q8_act makes for GEMV v3) and w in GGUF's Q8_0 blocks [N, K/32 x 34 B].
//
// One Q8_0 block is exactly one k-step of mma.m16n8k32.s8: the instruction returns the int32 dot
// products of 32 quants, and the block's two scales turn them into floats:
//   y[m, n] = sum over blocks b of  d_w[n, b] * d_x[m, b] * (sum_i q_w[n, b, i] * q_x[m, b, i]),
// the arithmetic of GEMV v3 (q8_0_gemv_dp4a_ref). The price: every block's int32 results are
// converted and scaled one by one (three float instructions for each int32 result), where
// versions 6 and 7 let the tensor cores accumulate in fp32 across the whole of K.
//
// A block of 128 threads computes 64 weight rows x 64 tokens; warp w takes rows 32 (w & 1) .. +32
// and tokens 32 (w >> 1) .. +32: 2 x 4 tiles of m16n8, 32 fp32 sums per thread. A stage is 8 Q8_0
// blocks (256 k): 64 raw weight rows of 272 bytes (whole 16-byte copies: 272 = 17 x 16), 64 token
// rows of 256 quants and their 8 scales, by cp.async; STAGES of them in flight.
// Needs sm_80+, K % 256 == 0 (16-byte aligned rows of raw blocks and of xd).
#include "common.cuh"

#ifndef STAGES
#define STAGES 3
#endif
#define QK 32                      // weights per Q8_0 block
#define QBYTES 34                  // bytes per block: fp16 scale, 32 int8 quants
#define SB 8                       // Q8_0 blocks per stage (256 k)
#define BW 64                      // weight rows per block tile
#define BT 64                      // tokens per block tile
#define W_ROW (SB * QBYTES)        // 272 bytes of raw blocks per weight row and stage
#define X_ROW (SB * QK + 16)       // 272: 256 quants + 16 bytes of padding, so rows fall on other banks
#define W_BYTES (BW * W_ROW)
#define X_BYTES (BT * X_ROW)
#define D_BYTES (BT * SB * 4)
#define STAGE_BYTES (W_BYTES + X_BYTES + D_BYTES)
static_assert(W_ROW % 16 == 0 && X_ROW % 16 == 0 && STAGE_BYTES % 16 == 0, "stage rows are whole 16-byte copies");

// d[4] (int32, m16n8) = A (16 x 32 int8, 4 registers) @ B (32 x 8 int8, 2 registers), from zero
__device__ __forceinline__ void mma_s8(int* d, const uint32_t* a, const uint32_t* b) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(0));
}

// four int8 quants at p (2-byte aligned: a Q8_0 block's quants start 2 bytes into its 34)
__device__ __forceinline__ uint32_t quants4(const unsigned char* p) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
    return (uint32_t)h[0] | ((uint32_t)h[1] << 16);
}

// one stage: raw weight rows [n0, n0 + 64) and token rows [m0, m0 + 64), Q8_0 blocks [kb, kb + 8);
// rows past N or M are zeros (their sums are never stored)
__device__ __forceinline__ void load_stage(unsigned char* st, const unsigned char* __restrict__ w,
                                           const int8_t* __restrict__ xq, const float* __restrict__ xd,
                                           int n0, int m0, int N, int M, int K, int kb, int tid) {
    const size_t rb = (size_t)(K / QK) * QBYTES;
    for (int i = tid; i < BW * (W_ROW / 16); i += 128) {             // 17 copies per weight row
        const int r = i / (W_ROW / 16), c = i % (W_ROW / 16), n = n0 + r;
        cp_async16(st + r * W_ROW + 16 * c, w + (size_t)min(n, N - 1) * rb + (size_t)kb * QBYTES + 16 * c,
                   n < N ? 16 : 0);
    }
    unsigned char* sx = st + W_BYTES;
    for (int i = tid; i < BT * (SB * QK / 16); i += 128) {           // 16 copies per token row
        const int r = i / (SB * QK / 16), c = i % (SB * QK / 16), m = m0 + r;
        cp_async16(sx + r * X_ROW + 16 * c, xq + (size_t)min(m, M - 1) * K + (size_t)kb * QK + 16 * c,
                   m < M ? 16 : 0);
    }
    float* sd = reinterpret_cast<float*>(st + W_BYTES + X_BYTES);
    for (int i = tid; i < BT * (SB / 4); i += 128) {                  // 2 copies: a token's 8 scales
        const int r = i / (SB / 4), c = i % (SB / 4), m = m0 + r;
        cp_async16(sd + r * SB + 4 * c, xd + (size_t)min(m, M - 1) * (K / QK) + kb + 4 * c, m < M ? 16 : 0);
    }
}

// grid (ceil(N/64), ceil(M/64)), block 128, STAGES x STAGE_BYTES of dynamic shared memory
extern "C" __global__ void __launch_bounds__(128)
matmul_q8_0_mmq(const unsigned char* __restrict__ w, const int8_t* __restrict__ xq, const float* __restrict__ xd,
                float* __restrict__ y, int M, int N, int K)
{
    extern __shared__ __align__(16) unsigned char smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * BW, m0 = blockIdx.y * BT;
    const int wr = (warp & 1) * 32, wc = (warp >> 1) * 32;          // the warp's rows and tokens
    const int nst = K / (QK * SB);
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

    pdl_wait();                                                      // xq, xd: the quantization before
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < nst) load_stage(smem + s * STAGE_BYTES, w, xq, xd, n0, m0, N, M, K, s * SB, tid);
        cp_async_commit();
    }
    for (int ks = 0; ks < nst; ++ks) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();                                             // stage ks landed; ks-1 is free
        const int nx = ks + STAGES - 1;
        if (nx < nst) load_stage(smem + (nx % STAGES) * STAGE_BYTES, w, xq, xd, n0, m0, N, M, K, nx * SB, tid);
        cp_async_commit();
        const unsigned char* sw = smem + (ks % STAGES) * STAGE_BYTES;
        const unsigned char* sx = sw + W_BYTES;
        const float* sd = reinterpret_cast<const float*>(sw + W_BYTES + X_BYTES);
#pragma unroll 2
        for (int b = 0; b < SB; ++b) {                               // one Q8_0 block: one k32 step
            uint32_t a[2][4];
            float dw[2][2];
#pragma unroll
            for (int i = 0; i < 2; ++i) {                            // A: rows wr + 16 i + g (+ 8)
                const unsigned char* r0 = sw + (wr + 16 * i + g) * W_ROW + b * QBYTES;
                const unsigned char* r1 = r0 + 8 * W_ROW;
                a[i][0] = quants4(r0 + 2 + 4 * t);
                a[i][1] = quants4(r1 + 2 + 4 * t);
                a[i][2] = quants4(r0 + 18 + 4 * t);
                a[i][3] = quants4(r1 + 18 + 4 * t);
                dw[i][0] = __half2float(*reinterpret_cast<const __half*>(r0));
                dw[i][1] = __half2float(*reinterpret_cast<const __half*>(r1));
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {                            // B: tokens wc + 8 j + g
                const int8_t* xr = reinterpret_cast<const int8_t*>(sx) + (wc + 8 * j + g) * X_ROW + b * QK;
                const uint32_t bf[2] = {*reinterpret_cast<const uint32_t*>(xr + 4 * t),
                                        *reinterpret_cast<const uint32_t*>(xr + 16 + 4 * t)};
                const int c = wc + 8 * j + 2 * t;                    // this thread's two result tokens
                const float dx0 = sd[c * SB + b], dx1 = sd[(c + 1) * SB + b];
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    int d[4];
                    mma_s8(d, a[i], bf);
                    acc[i][j][0] = fmaf((float)d[0], dw[i][0] * dx0, acc[i][j][0]);
                    acc[i][j][1] = fmaf((float)d[1], dw[i][0] * dx1, acc[i][j][1]);
                    acc[i][j][2] = fmaf((float)d[2], dw[i][1] * dx0, acc[i][j][2]);
                    acc[i][j][3] = fmaf((float)d[3], dw[i][1] * dx1, acc[i][j][3]);
                }
            }
        }
    }
    cp_async_wait<0>();
    // d[0], d[1]: (row g, tokens 2t, 2t + 1); d[2], d[3]: (row g + 8, the same tokens)
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int n = n0 + wr + 16 * i + g + ((e & 2) ? 8 : 0), m = m0 + wc + 8 * j + 2 * t + (e & 1);
                if (n < N && m < M) y[(size_t)m * N + n] = acc[i][j][e];
            }
}
PDL_READY(matmul_q8_0_mmq);

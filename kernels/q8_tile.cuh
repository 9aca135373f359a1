// q8_tile.cuh: what chapter 11's two Q8_0 tensor-core GEMMs (v6, matmul_q8_wgmma.cu, and v7,
// matmul_q8_tma.cu) share: the dequantization of a weight tile straight into wgmma's A registers,
// and the store of the accumulator tile (with the residual or the planar parts of a cat).
#pragma once
#include "common.cuh"

#define QK 32              // weights per Q8_0 block
#define QBYTES 34          // bytes per block: fp16 scale d, 32 int8 quants

// two int8 quants (2 bytes at p) times the scale pair d2 -> an fp16 pair, exactly fp16(d * q): the
// pair is biased to bytes, placed under the exponent of 1024.0 (0x64XX = 1024 + byte), 1152 is
// subtracted (= q, exact), and one fp16 multiply by d rounds d * q once
__device__ __forceinline__ uint32_t dequant2(const unsigned char* p, __half2 d2) {
    const uint32_t b = *reinterpret_cast<const uint16_t*>(p) ^ 0x8080u;          // int8 -> biased byte
    uint32_t h = __byte_perm(b, 0x64646464u, 0x4140);                               // 1024 + byte, twice
    __half2 v = __hmul2(__hsub2(*reinterpret_cast<__half2*>(&h), __float2half2_rn(1152.f)), d2);
    return *reinterpret_cast<uint32_t*>(&v);
}

// this thread's A fragments of one 64-k tile (two Q8_0 blocks per row, the first at ra / rb for rows
// r and r + 8 of its warp's 16): four k16 slices; a[4j + 0..3] = (row r, k 16j+2t..+1), (row r+8,
// same), (row r, +8), (row r+8, +8) -- mma.sync's m16n8k16 A fragment, which wgmma's RS form reads
__device__ __forceinline__ void dequant_a(uint32_t* a, const unsigned char* ra, const unsigned char* rb, int t) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {                          // the two Q8_0 blocks of the 64-k tile
        const int b = h * QBYTES;
        const __half2 da = __half2half2(*reinterpret_cast<const __half*>(ra + b));
        const __half2 db = __half2half2(*reinterpret_cast<const __half*>(rb + b));
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {                   // k16 slice j = 2h + jj
            const int q = b + 2 + 16 * jj + 2 * t, j = 2 * h + jj;
            a[4 * j + 0] = dequant2(ra + q, da);
            a[4 * j + 1] = dequant2(rb + q, db);
            a[4 * j + 2] = dequant2(ra + q + 8, da);
            a[4 * j + 3] = dequant2(rb + q + 8, db);
        }
    }
}

// The accumulator of m64nNTk16 (NT tokens) to y: warp `wid` of a warpgroup holds weight rows 16*wid + g and + 8
// (`row` = this thread's first, block-relative); n8 chunk j: acc[4j], acc[4j+1] -> (row, tokens
// 8j+2t, +1), acc[4j+2], acc[4j+3] -> (row + 8, ...).  One weight (n1 = N): y [M, ldy] (+ res [M, N]
// when given); parts (PARTS, n1 < N): planar (cat_index), ldy = N.
template <int NT, bool PARTS>
__device__ __forceinline__ void store_acc(const float* acc, float* __restrict__ y, const float* __restrict__ res,
                                          int m0, int n0, int row, int t, int M, int N, int ldy, int n1, int n2) {
#pragma unroll
    for (int j = 0; j < NT / 8; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int n = n0 + row + 8 * h;
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int m = m0 + 8 * j + 2 * t + e;
                if (n < N && m < M) {
                    float v = acc[4 * j + 2 * h + e];
                    if (PARTS && n1 < N) {
                        y[cat_index(m, n, M, N, n1, n2)] = v;
                        continue;
                    }
                    if (res) v = v + res[(size_t)m * N + n];   // unsplit matmul_add: the reduction's sum
                    y[(size_t)m * ldy + n] = v;
                }
            }
        }
    }
}

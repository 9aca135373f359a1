// quant_blocks.cuh (chapter 11c): the GGUF block formats, read 32 weights at a time. What chapter
// 11c's GEMV (gemv_quant.cu) and its tensor-core GEMM (matmul_quant_tma.cu) share.
//
// Every format taken 32 weights at a time is a UNIT: a block of 32, or a sub-block of a super-block
// of 256. A unit is 32 small signed codes q, a scale a and a minimum b:  w_e = a[e / 16] * q_e + b
// (a[0] and a[1] differ only for Q6_K, which has a scale per 16 weights; b = -0 where a format has
// no minimum). Per format two functions read a unit at byte o of a block (j: the unit's index in
// it): scales_<type>(s, o, j) its a and b, and word_<type>(s, o, j, k) its codes of elements
// 4k..4k+3 as four int8 in one 32-bit word (element 4k + i in byte i), so that a reader takes only
// the words it needs. The products d * sc are exact in fp32 (11 x 8 bits at most), so values are bit
// for bit the numpy dequantization (chapter 03a).
#pragma once
#include "common.cuh"

// Blocks read as little-endian words at a byte offset that is even (every field is), from shared
// memory (stages of the GEMV and GEMM) or global memory (dequantization, get_rows): only the aligned
// words that hold the bytes asked for are read, never one past a tensor's end.
struct Stage {
    const uint32_t* w;
    __device__ __forceinline__ uint32_t u32(int o) const {
        const int i = o >> 2;
        return (o & 2) ? __funnelshift_r(w[i], w[i + 1], 16) : w[i];
    }
    __device__ __forceinline__ float f16(int o) const {
        return __half2float(__ushort_as_half((uint16_t)(w[o >> 2] >> ((o & 2) * 8))));
    }
    __device__ __forceinline__ int u8(int o) const { return (w[o >> 2] >> ((o & 3) * 8)) & 0xff; }
};

struct Scales {
    float a[2], b;
};

// each byte of v (every one < 128) minus the byte of k, wrapped to a signed int8: the bytes are
// lifted by 128 first so that no borrow crosses into the next byte (three instructions, where
// __vsubss4 is a dozen on GPUs without SIMD-in-a-word hardware)
__device__ __forceinline__ uint32_t bytes_minus(uint32_t v, uint32_t k) { return ((v | 0x80808080u) - k) ^ 0x80808080u; }
// the 4 fifth bits qh >> 0..3 moved to bit 4 of each byte (Q5_0 / Q5_1)
__device__ __forceinline__ uint32_t fifth_bits(uint32_t v) {
    return ((v & 1) << 4) | ((v & 2) << 11) | ((v & 4) << 18) | ((v & 8) << 25);
}
// Q4_K / Q5_K: the 6-bit scale and minimum of sub-block j from the 12 scale bytes at o
__device__ __forceinline__ void k_scale_min(const Stage& s, int o, int j, int& sc, int& m) {
    if (j < 4) {
        sc = s.u8(o + j) & 63;
        m = s.u8(o + j + 4) & 63;
    } else {
        sc = (s.u8(o + j + 4) & 0x0F) | ((s.u8(o + j - 4) >> 6) << 4);
        m = (s.u8(o + j + 4) >> 4) | ((s.u8(o + j) >> 6) << 4);
    }
}
__device__ __forceinline__ Scales scale_min(float a, float b) { return Scales{{a, a}, b}; }

// Q4_0: d f16, 16 bytes of nibbles (elements 0..15 low, 16..31 high); w = d (q - 8)
__device__ __forceinline__ Scales scales_q4_0(const Stage& s, int o, int) { return scale_min(s.f16(o), -0.f); }
__device__ __forceinline__ uint32_t word_q4_0(const Stage& s, int o, int, int k) {
    return bytes_minus((s.u32(o + 2 + 4 * (k & 3)) >> (k & 4)) & 0x0F0F0F0F, 0x08080808);
}
// Q4_1: d, m f16, nibbles; w = d q + m
__device__ __forceinline__ Scales scales_q4_1(const Stage& s, int o, int) { return scale_min(s.f16(o), s.f16(o + 2)); }
__device__ __forceinline__ uint32_t word_q4_1(const Stage& s, int o, int, int k) {
    return (s.u32(o + 4 + 4 * (k & 3)) >> (k & 4)) & 0x0F0F0F0F;
}
// Q5_0: d f16, qh (4 bytes: bit i is the fifth bit of element i), nibbles; w = d (q - 16)
__device__ __forceinline__ Scales scales_q5_0(const Stage& s, int o, int) { return scale_min(s.f16(o), -0.f); }
__device__ __forceinline__ uint32_t word_q5_0(const Stage& s, int o, int, int k) {
    const uint32_t v = ((s.u32(o + 6 + 4 * (k & 3)) >> (k & 4)) & 0x0F0F0F0F) | fifth_bits(s.u32(o + 2) >> (4 * k));
    return bytes_minus(v, 0x10101010);
}
// Q5_1: d, m f16, qh, nibbles; w = d q + m
__device__ __forceinline__ Scales scales_q5_1(const Stage& s, int o, int) { return scale_min(s.f16(o), s.f16(o + 2)); }
__device__ __forceinline__ uint32_t word_q5_1(const Stage& s, int o, int, int k) {
    return ((s.u32(o + 8 + 4 * (k & 3)) >> (k & 4)) & 0x0F0F0F0F) | fifth_bits(s.u32(o + 4) >> (4 * k));
}
// Q4_K: d, dmin f16, 12 scale bytes, 128 bytes of nibbles (sub-blocks 2c and 2c+1 in the low and
// high nibbles of bytes 32c..32c+31); unit j = sub-block j, w = (d sc_j) q - dmin m_j
__device__ __forceinline__ Scales scales_q4_k(const Stage& s, int o, int j) {
    int sc, m;
    k_scale_min(s, o + 4, j, sc, m);
    return scale_min(s.f16(o) * (float)sc, -(s.f16(o + 2) * (float)m));
}
__device__ __forceinline__ uint32_t word_q4_k(const Stage& s, int o, int j, int k) {
    return (s.u32(o + 16 + 32 * (j >> 1) + 4 * k) >> (4 * (j & 1))) & 0x0F0F0F0F;
}
// Q5_K: Q4_K's fields, then qh (32 bytes: bit j of byte l is the fifth bit of element l of
// sub-block j), then the nibbles
__device__ __forceinline__ uint32_t word_q5_k(const Stage& s, int o, int j, int k) {
    return ((s.u32(o + 48 + 32 * (j >> 1) + 4 * k) >> (4 * (j & 1))) & 0x0F0F0F0F)
           | (((s.u32(o + 16 + 4 * k) >> j) & 0x01010101) << 4);
}
// Q6_K: ql (128 bytes), qh (64), 16 int8 scales (one per 16 weights), d f16. Unit j = elements
// 32j..32j+31 of the super-block: half h = j / 4, quarter k4 = j % 4; element l of it takes its low
// 4 bits from ql[64h + 32(k4 & 1) + l] (low nibble for k4 < 2) and its high 2 from qh[32h + l].
__device__ __forceinline__ Scales scales_q6_k(const Stage& s, int o, int j) {
    const float d = s.f16(o + 208);
    return Scales{{d * (float)(int8_t)s.u8(o + 192 + 2 * j), d * (float)(int8_t)s.u8(o + 193 + 2 * j)}, -0.f};
}
__device__ __forceinline__ uint32_t word_q6_k(const Stage& s, int o, int j, int k) {
    const int h = j >> 2, k4 = j & 3;
    const uint32_t lo = (s.u32(o + 64 * h + 32 * (k4 & 1) + 4 * k) >> (4 * (k4 >> 1))) & 0x0F0F0F0F;
    const uint32_t hi = (s.u32(o + 128 + 32 * h + 4 * k) >> (2 * k4)) & 0x03030303;
    return bytes_minus(lo | (hi << 4), 0x20202020);                 // codes 0..63 -> -32..31
}
#define scales_q5_k scales_q4_k

// The GPU's regrouping of the blocks of 32 (chapter 11c, made at upload for rows of whole groups of
// 256): eight blocks side by side as one super-block of whole 16-byte vectors, laid out as Q4_K and
// Q5_K lay out theirs, so that the direct road reads every 4- and 5-bit format one way. First the
// eight blocks' scales (d_j f16; or d_j, m_j pairs), then for Q5_* 32 bytes of fifth bits (bit j of
// byte l: element l of block j), then 128 bytes of nibbles: block 2c in the low and 2c + 1 in the
// high nibbles of bytes 32c .. 32c + 31, element l in byte 32c + l. Values as the blocks of 32 say:
// Q4_0 w = d (q - 8), Q4_1 w = d q + m, Q5_0 w = d (q - 16), Q5_1 w = d q + m.
template <int HEAD, bool HIGH, int OFF>        // OFF: the code offset of a format without a minimum
__device__ __forceinline__ Scales scales_x8(const Stage& s, int o, int j) {
    return OFF ? scale_min(s.f16(o + 2 * j), -0.f) : scale_min(s.f16(o + 4 * j), s.f16(o + 4 * j + 2));
}
template <int HEAD, bool HIGH, int OFF>
__device__ __forceinline__ uint32_t word_x8(const Stage& s, int o, int j, int k) {
    uint32_t v = (s.u32(o + HEAD + (HIGH ? 32 : 0) + 32 * (j >> 1) + 4 * k) >> (4 * (j & 1))) & 0x0F0F0F0F;
    if (HIGH) v |= ((s.u32(o + HEAD + 4 * k) >> j) & 0x01010101) << 4;
    return OFF ? bytes_minus(v, OFF * 0x01010101u) : v;
}
#define scales_q4_0x8 scales_x8<16, false, 8>
#define word_q4_0x8 word_x8<16, false, 8>
#define scales_q4_1x8 scales_x8<32, false, 0>
#define word_q4_1x8 word_x8<32, false, 0>
#define scales_q5_0x8 scales_x8<16, true, 16>
#define word_q5_0x8 word_x8<16, true, 16>
#define scales_q5_1x8 scales_x8<32, true, 0>
#define word_q5_1x8 word_x8<32, true, 0>

// The formats: GGML type id -> weights and bytes per block, the unit's readers, and two facts a
// reader can use: MIN, the format has a minimum (b = -0 otherwise, and a dot product needs no sum
// of the activations); TWO, the unit has two scales (a[0] != a[1]: Q6_K). WTYPE picks one.
template <int ID> struct Fmt;
#define FORMAT(ID, QK_, BYTES_, NAME, MIN_, TWO_)                                                           \
    template <> struct Fmt<ID> {                                                                            \
        static constexpr int QK = QK_, BYTES = BYTES_;                                                      \
        static constexpr bool MIN = MIN_, TWO = TWO_;                                                       \
        __device__ static Scales scales(const Stage& s, int o, int j) { return scales_##NAME(s, o, j); }    \
        __device__ static uint32_t word(const Stage& s, int o, int j, int k) { return word_##NAME(s, o, j, k); } \
    };
FORMAT(2, 32, 18, q4_0, false, false)
FORMAT(3, 32, 20, q4_1, true, false)
FORMAT(6, 32, 22, q5_0, false, false)
FORMAT(7, 32, 24, q5_1, true, false)
FORMAT(12, 256, 144, q4_k, true, false)
FORMAT(13, 256, 176, q5_k, true, false)
FORMAT(14, 256, 210, q6_k, false, true)
FORMAT(102, 256, 144, q4_0x8, false, false)       // the regrouped blocks of 32: GGML id + 100
FORMAT(103, 256, 160, q4_1x8, true, false)
FORMAT(106, 256, 176, q5_0x8, false, false)
FORMAT(107, 256, 192, q5_1x8, true, false)
FORMAT(114, 256, 216, q6_k, false, true)         // Q6_K padded to 216 bytes: 8-byte aligned blocks

// A unit, decoded whole: its 32 codes (8 words) and scales
struct Unit {
    int q[8];
    Scales sc;
};
template <class F>
__device__ __forceinline__ Unit decode(const Stage& s, int o, int j) {
    Unit u;
    u.sc = F::scales(s, o, j);
#pragma unroll
    for (int k = 0; k < 8; ++k) u.q[k] = (int)F::word(s, o, j, k);
    return u;
}

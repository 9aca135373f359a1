// Chapter 11a: one GEMV for the other GGUF block formats, y[T,N] = x[T,K] @ dequant(w)[N,K]^T,
// w as stored in the file: Q4_0, Q4_1, Q5_0, Q5_1 (blocks of 32) and Q4_K, Q5_K, Q6_K (super-blocks
// of 256). Q8_0 has its own kernel (gemv_q8_0.cu); this one is that kernel's v3 made generic.
//
// Every format is read in UNITS of 32 weights: a block of 32, or a sub-block of a super-block.
// A unit meets one block of the int8 activations (quantize_act / rmsnorm_quantize_q8: 32 int8 and
// one fp32 scale dx), and its dot product is integer arithmetic (dp4a, four int8 products per
// instruction) scaled once:   sum_i w_i x_i = dx * (a * sum_i q_i xq_i + b * sum_i xq_i)
// where w_i = a * q_i + b is the format's decoding of the unit (signed codes q, a scale a, and a
// minimum b for the formats that have one). A decode_<type>() per format reads a unit's bytes;
// everything else, the pipeline, the epilogues, dequantization, is shared.
//
// The pipeline is v3's: the raw bytes of a tile of each row (32 units = 1024 weights) are copied to
// shared memory with 16-byte cp.async, NSTAGE tiles in flight; lane u of the warp decodes unit u of
// the tile, reading shared memory as 32-bit words at any 2-byte-aligned offset (funnel shifts), so
// blocks of 18 or 210 bytes need no alignment in global memory.
#include "common.cuh"

#ifndef WTYPE
#define WTYPE 12         // the format: its GGML type id (2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 12 Q4_K, 13 Q5_K, 14 Q6_K)
#endif
#ifndef BATCH
#define BATCH 1          // tokens per call: 1..8, a compile-time constant (registers!)
#endif
#ifndef ROWS
#define ROWS 2           // output rows per warp
#endif
#ifndef WARPS
#define WARPS 4          // warps per block
#endif
#ifndef NSTAGE
#define NSTAGE 4         // tiles in flight per warp
#endif
#define UNITS 32         // units (32 weights) per tile and row: one per lane

// Blocks read as little-endian words at a byte offset that is even (every field is), from shared
// memory (the GEMV's stages) or global memory (dequantization, get_rows): only the aligned words
// that hold the bytes asked for are read, never one past a tensor's end.
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

__device__ __forceinline__ int dot4(const int* q, const int* x) {   // 16 int8 products
    int s = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) s = __dp4a(q[k], x[k], s);
    return s;
}
// the 4 fifth bits qh >> 0..3 moved to bit 4 of each byte (Q5_0 / Q5_1)
__device__ __forceinline__ int fifth_bits(uint32_t v) {
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

// A unit, decoded: 32 signed int8 codes q (8 words, element e in byte e % 4 of word e / 4) and
// w_e = a[e / 16] * q_e + b. Every format is this, with its own codes and scales; a[0] and a[1]
// differ only for Q6_K (a scale per 16 weights). The products d * sc are exact in fp32 (11 x 8 bits
// at most), so values are bit for bit the numpy dequantization (chapter 03a); b = -0 where a
// format has no minimum (x + -0 = x keeps the sign of a zero product, as numpy's d * q does).
struct Unit {
    int q[8];
    float a[2], b;
};

// decode_<type>(s, o, j): unit j of the block at byte o of s.
// Q4_0: d f16, 16 bytes of nibbles (elements 0..15 low, 16..31 high); w = d (q - 8)
__device__ __forceinline__ Unit decode_q4_0(const Stage& s, int o, int) {
    Unit u;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const uint32_t v = s.u32(o + 2 + 4 * k);
        u.q[k] = __vsubss4(v & 0x0F0F0F0F, 0x08080808);
        u.q[k + 4] = __vsubss4((v >> 4) & 0x0F0F0F0F, 0x08080808);
    }
    u.a[0] = u.a[1] = s.f16(o);
    u.b = -0.f;
    return u;
}
// Q4_1: d, m f16, nibbles; w = d q + m
__device__ __forceinline__ Unit decode_q4_1(const Stage& s, int o, int) {
    Unit u;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const uint32_t v = s.u32(o + 4 + 4 * k);
        u.q[k] = v & 0x0F0F0F0F;
        u.q[k + 4] = (v >> 4) & 0x0F0F0F0F;
    }
    u.a[0] = u.a[1] = s.f16(o);
    u.b = s.f16(o + 2);
    return u;
}
// Q5_0: d f16, qh (4 bytes: bit i is the fifth bit of element i), nibbles; w = d (q - 16)
__device__ __forceinline__ Unit decode_q5_0(const Stage& s, int o, int) {
    Unit u;
    const uint32_t qh = s.u32(o + 2);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const uint32_t v = s.u32(o + 6 + 4 * k);
        u.q[k] = __vsubss4((v & 0x0F0F0F0F) | fifth_bits(qh >> (4 * k)), 0x10101010);
        u.q[k + 4] = __vsubss4(((v >> 4) & 0x0F0F0F0F) | fifth_bits(qh >> (16 + 4 * k)), 0x10101010);
    }
    u.a[0] = u.a[1] = s.f16(o);
    u.b = -0.f;
    return u;
}
// Q5_1: d, m f16, qh, nibbles; w = d q + m
__device__ __forceinline__ Unit decode_q5_1(const Stage& s, int o, int) {
    Unit u;
    const uint32_t qh = s.u32(o + 4);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const uint32_t v = s.u32(o + 8 + 4 * k);
        u.q[k] = (v & 0x0F0F0F0F) | fifth_bits(qh >> (4 * k));
        u.q[k + 4] = ((v >> 4) & 0x0F0F0F0F) | fifth_bits(qh >> (16 + 4 * k));
    }
    u.a[0] = u.a[1] = s.f16(o);
    u.b = s.f16(o + 2);
    return u;
}
// Q4_K: d, dmin f16, 12 scale bytes, 128 bytes of nibbles (sub-blocks 2c and 2c+1 in the low and
// high nibbles of bytes 32c..32c+31); unit j = sub-block j, w = (d sc_j) q - dmin m_j
__device__ __forceinline__ Unit decode_q4_k(const Stage& s, int o, int j) {
    Unit u;
    int sc, m;
    k_scale_min(s, o + 4, j, sc, m);
    const int base = o + 16 + 32 * (j >> 1), sh = 4 * (j & 1);
#pragma unroll
    for (int k = 0; k < 8; ++k) u.q[k] = (s.u32(base + 4 * k) >> sh) & 0x0F0F0F0F;
    u.a[0] = u.a[1] = s.f16(o) * (float)sc;
    u.b = -(s.f16(o + 2) * (float)m);
    return u;
}
// Q5_K: Q4_K's fields, then qh (32 bytes: bit j of byte l is the fifth bit of element l of
// sub-block j), then the nibbles
__device__ __forceinline__ Unit decode_q5_k(const Stage& s, int o, int j) {
    Unit u;
    int sc, m;
    k_scale_min(s, o + 4, j, sc, m);
    const int base = o + 48 + 32 * (j >> 1), sh = 4 * (j & 1);
#pragma unroll
    for (int k = 0; k < 8; ++k)
        u.q[k] = ((s.u32(base + 4 * k) >> sh) & 0x0F0F0F0F) | (((s.u32(o + 16 + 4 * k) >> j) & 0x01010101) << 4);
    u.a[0] = u.a[1] = s.f16(o) * (float)sc;
    u.b = -(s.f16(o + 2) * (float)m);
    return u;
}
// Q6_K: ql (128 bytes), qh (64), 16 int8 scales (one per 16 weights), d f16. Unit j = elements
// 32j..32j+31 of the super-block: half h = j / 4, quarter k4 = j % 4; element l of it takes its low
// 4 bits from ql[64h + 32(k4 & 1) + l] (low nibble for k4 < 2) and its high 2 from qh[32h + l].
__device__ __forceinline__ Unit decode_q6_k(const Stage& s, int o, int j) {
    Unit u;
    const int h = j >> 2, k4 = j & 3;
    const int lo = o + 64 * h + 32 * (k4 & 1), sh = 4 * (k4 >> 1), hi = o + 128 + 32 * h;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        const uint32_t v = ((s.u32(lo + 4 * k) >> sh) & 0x0F0F0F0F) | (((s.u32(hi + 4 * k) >> (2 * k4)) & 0x03030303) << 4);
        u.q[k] = __vsubss4(v, 0x20202020);                      // codes 0..63 -> -32..31
    }
    const float d = s.f16(o + 208);
    u.a[0] = d * (float)(int8_t)s.u8(o + 192 + 2 * j);
    u.a[1] = d * (float)(int8_t)s.u8(o + 193 + 2 * j);
    u.b = -0.f;
    return u;
}

// The formats: GGML type id -> weights and bytes per block, and the decoder. WTYPE picks one.
template <int ID> struct Fmt;
#define FORMAT(ID, QK_, BYTES_, DECODE)                                                          \
    template <> struct Fmt<ID> {                                                                 \
        static constexpr int QK = QK_, BYTES = BYTES_;                                           \
        __device__ static Unit decode(const Stage& s, int o, int j) { return DECODE(s, o, j); } \
    };
FORMAT(2, 32, 18, decode_q4_0)
FORMAT(3, 32, 20, decode_q4_1)
FORMAT(6, 32, 22, decode_q5_0)
FORMAT(7, 32, 24, decode_q5_1)
FORMAT(12, 256, 144, decode_q4_k)
FORMAT(13, 256, 176, decode_q5_k)
FORMAT(14, 256, 210, decode_q6_k)

using F = Fmt<WTYPE>;
#define UPB (F::QK / 32)                              // units per block
#define TILE_BLOCKS (UNITS / UPB)                     // blocks per tile and row
#define TILE_BYTES (TILE_BLOCKS * F::BYTES)
#define TILE_VEC ((TILE_BYTES + 15) / 16 + 1)         // uint4 slots per row and stage (+ misalignment)

// The epilogues are gemv_q8_0.cu's: 0 writes y; 1 adds a residual (y = res + x @ w^T); 2 reads gate
// (w) and up (w2) rows and writes silu(gate) * up; 3 streams the rows of w | w2 | w3 into a planar y.
#define EPI_NONE 0
#define EPI_ADD 1
#define EPI_GLU 2
#define EPI_CAT 3

__device__ __forceinline__ float warp_sum_f(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <int EPI>
__device__ __forceinline__ void gemv_body(uint4* smem, const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2,
                                          const float* __restrict__ res, const int8_t* __restrict__ xq,
                                          const float* __restrict__ xd, float* __restrict__ y, int N, int K,
                                          const uint8_t* __restrict__ w3 = nullptr, int n1 = 0, int n2 = 0)
{
    constexpr int RR = EPI == EPI_GLU ? 2 * ROWS : ROWS;          // weight rows this warp streams
    auto buf = reinterpret_cast<uint4 (*)[NSTAGE][RR][TILE_VEC]>(smem);
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int n0 = (blockIdx.x * WARPS + wid) * ROWS;
    if (n0 >= N) return;
    const int nb = K / F::QK, nu = K / 32;                        // blocks, units per row
    const size_t row_bytes = (size_t)nb * F::BYTES;
    const int ntiles = (nu + UNITS - 1) / UNITS;
    auto row_of = [&](int r) -> const uint8_t* {
        if (EPI == EPI_CAT) return cat_row(w, w2, w3, n0 + r, n1, n2, row_bytes);
        return EPI == EPI_GLU && r >= ROWS ? w2 + (size_t)(n0 + r - ROWS) * row_bytes
                                           : w + (size_t)(n0 + r) * row_bytes;
    };
    auto valid = [&](int r) { return n0 + (EPI == EPI_GLU && r >= ROWS ? r - ROWS : r) < N; };
    auto issue = [&](int tile, int st) {                          // tile's bytes of our rows -> stage st
        const int nblk = min(TILE_BLOCKS, nb - tile * TILE_BLOCKS);
#pragma unroll
        for (int r = 0; r < RR; ++r) {
            if (!valid(r)) continue;
            const uintptr_t a = reinterpret_cast<uintptr_t>(row_of(r) + (size_t)tile * TILE_BYTES);
            const uintptr_t a0 = a & ~(uintptr_t)15;
            const int nvec = (int)(((a + nblk * F::BYTES + 15) >> 4) - (a0 >> 4));
            const uint4* src = reinterpret_cast<const uint4*>(a0);
            for (int i = lane; i < nvec; i += 32) cp_async16(&buf[wid][st][r][i], src + i);
        }
    };

    float acc[RR][BATCH];
#pragma unroll
    for (int r = 0; r < RR; ++r)
#pragma unroll
        for (int t = 0; t < BATCH; ++t) acc[r][t] = 0.f;
#pragma unroll
    for (int s = 0; s < NSTAGE - 1; ++s) {                        // weights only before pdl_wait
        if (s < ntiles) issue(s, s);
        cp_async_commit();
    }
    pdl_wait();
    float res_mine = 0.f;
    if (EPI == EPI_ADD && lane < ROWS * BATCH && n0 + lane / BATCH < N)
        res_mine = __ldg(res + (size_t)(lane % BATCH) * N + n0 + lane / BATCH);
    for (int tile = 0; tile < ntiles; ++tile) {
        cp_async_wait<NSTAGE - 2>();
        __syncwarp();
        const int nt = tile + NSTAGE - 1;
        if (nt < ntiles) issue(nt, nt % NSTAGE);
        cp_async_commit();
        const int u = tile * UNITS + lane;                        // the unit this lane decodes
        if (u < nu) {
            const int o_blk = (lane / UPB) * F::BYTES, j = lane % UPB;
            Unit wu[RR];                                          // this unit of each row, decoded once
#pragma unroll
            for (int r = 0; r < RR; ++r) {
                const uintptr_t a = reinterpret_cast<uintptr_t>(row_of(r) + (size_t)tile * TILE_BYTES);
                const Stage s{reinterpret_cast<const uint32_t*>(&buf[wid][tile % NSTAGE][r][0])};
                wu[r] = valid(r) ? F::decode(s, (int)(a & 15) + o_blk, j) : Unit{};
            }
#pragma unroll
            for (int t = 0; t < BATCH; ++t) {
                const int4* xv = reinterpret_cast<const int4*>(xq + (size_t)t * K + (size_t)u * 32);
                const int4 x0 = __ldg(xv), x1 = __ldg(xv + 1);
                const int x[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
                int sx = 0;                                       // the sum of the 32 activations
#pragma unroll
                for (int k = 0; k < 8; ++k) sx = __dp4a(x[k], 0x01010101, sx);
                const float dx = __ldg(xd + (size_t)t * nu + u);
#pragma unroll
                for (int r = 0; r < RR; ++r)
                    acc[r][t] += dx * (wu[r].a[0] * (float)dot4(wu[r].q, x) + wu[r].a[1] * (float)dot4(wu[r].q + 4, x + 4)
                                       + wu[r].b * (float)sx);
            }
        }
        __syncwarp();
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int t = 0; t < BATCH; ++t) {
            float s = warp_sum_f(acc[r][t]);
            if (EPI == EPI_GLU) s = silu(s) * warp_sum_f(acc[ROWS + r][t]);
            if (EPI == EPI_ADD) s = __shfl_sync(0xffffffffu, res_mine, r * BATCH + t) + s;
            if (lane == 0 && n0 + r < N)
                y[EPI == EPI_CAT ? cat_index(t, n0 + r, BATCH, N, n1, n2) : (size_t)t * N + n0 + r] = s;
        }
}

extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_quant(const uint8_t* __restrict__ w, const int8_t* __restrict__ xq, const float* __restrict__ xd,
           float* __restrict__ y, int N, int K)
{
    __shared__ __align__(16) uint4 buf[WARPS * NSTAGE * ROWS * TILE_VEC];
    gemv_body<EPI_NONE>(buf, w, nullptr, nullptr, xq, xd, y, N, K);
}
PDL_READY(gemv_quant);
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_quant_add(const uint8_t* __restrict__ w, const float* __restrict__ res, const int8_t* __restrict__ xq,
               const float* __restrict__ xd, float* __restrict__ y, int N, int K)
{
    __shared__ __align__(16) uint4 buf[WARPS * NSTAGE * ROWS * TILE_VEC];
    gemv_body<EPI_ADD>(buf, w, nullptr, res, xq, xd, y, N, K);
}
PDL_READY(gemv_quant_add);
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_quant_cat(const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2, const uint8_t* __restrict__ w3,
               const int8_t* __restrict__ xq, const float* __restrict__ xd, float* __restrict__ y, int N, int K,
               int n1, int n2)
{
    __shared__ __align__(16) uint4 buf[WARPS * NSTAGE * ROWS * TILE_VEC];
    gemv_body<EPI_CAT>(buf, w, w2, nullptr, xq, xd, y, N, K, w3, n1, n2);
}
PDL_READY(gemv_quant_cat);
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_quant_glu(const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2, const int8_t* __restrict__ xq,
               const float* __restrict__ xd, float* __restrict__ y, int N, int K)
{
    extern __shared__ __align__(16) uint4 dyn[];      // twice the rows: sized by the launcher
    gemv_body<EPI_GLU>(dyn, w, w2, nullptr, xq, xd, y, N, K);
}
PDL_READY(gemv_quant_glu);

// ---------------------------------------------------------------- dequantization, for prefill
// Rows [0, R) of w -> fp16 out [R, K]: a thread per unit of 32 weights, decoded by the format's
// decode() as the GEMV does, written as 32 values. The tensor-core GEMM (chapter 11, version 5)
// then takes slabs of these rows; get_rows (the embedding) reads one row the same way.
__device__ __forceinline__ void unit_values(const Stage& s, int o, int j, float* v) {
    const Unit u = F::decode(s, o, j);
#pragma unroll
    for (int e = 0; e < 32; ++e)      // no fused multiply-add: the two roundings numpy does
        v[e] = __fadd_rn(__fmul_rn(u.a[e / 16], (float)(int8_t)(u.q[e / 4] >> (8 * (e % 4)))), u.b);
}

extern "C" __global__ void dequant_quant_f16(const uint8_t* __restrict__ w, __half* __restrict__ out, int R, int K)
{
    pdl_wait();
    const long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x;   // unit index over [R, K/32]
    const int nu = K / 32;
    if (u >= (long long)R * nu) return;
    const int r = (int)(u / nu), k = (int)(u % nu);
    const uint8_t* blk = w + (size_t)r * (K / F::QK) * F::BYTES + (size_t)(k / UPB) * F::BYTES;
    // the block's bytes as aligned words (a 2-byte-aligned block: start one half-word early)
    const uint32_t* base = reinterpret_cast<const uint32_t*>(reinterpret_cast<uintptr_t>(blk) & ~(uintptr_t)3);
    const Stage s{base};
    float v[32];
    unit_values(s, (int)(reinterpret_cast<uintptr_t>(blk) & 3), k % UPB, v);
    __half* o = out + (size_t)r * K + (size_t)k * 32;
#pragma unroll
    for (int e = 0; e < 32; e += 2) *reinterpret_cast<__half2*>(o + e) = __floats2half2_rn(v[e], v[e + 1]);
}
PDL_READY(dequant_quant_f16);

// out[t, :] = table[ids[t], :] as f32; an id outside [0, V) gives a row of NaN (embedding.cu's rule).
// A thread per unit of the row.
extern "C" __global__ void get_rows_quant(const uint8_t* __restrict__ table, const int* __restrict__ ids,
                                          float* __restrict__ out, int V, int D)
{
    pdl_wait();
    const int t = blockIdx.x, id = ids[t], nu = D / 32;
    float* o = out + (size_t)t * D;
    for (int k = blockIdx.y * blockDim.x + threadIdx.x; k < nu; k += gridDim.y * blockDim.x) {
        float v[32];
        if (id < 0 || id >= V) {
#pragma unroll
            for (int e = 0; e < 32; ++e) v[e] = __int_as_float(0x7fc00000);
        } else {
            const uint8_t* blk = table + (size_t)id * (D / F::QK) * F::BYTES + (size_t)(k / UPB) * F::BYTES;
            const Stage s{reinterpret_cast<const uint32_t*>(reinterpret_cast<uintptr_t>(blk) & ~(uintptr_t)3)};
            unit_values(s, (int)(reinterpret_cast<uintptr_t>(blk) & 3), k % UPB, v);
        }
#pragma unroll
        for (int e = 0; e < 32; ++e) o[k * 32 + e] = v[e];
    }
}
PDL_READY(get_rows_quant);

// Chapter 11c: one GEMV for the other GGUF block formats, y[T,N] = x[T,K] @ dequant(w)[N,K]^T,
// w as stored in the file: Q4_0, Q4_1, Q5_0, Q5_1 (blocks of 32) and Q4_K, Q5_K, Q6_K (super-blocks
// of 256), or in a layout of the GPU's own made at upload (chapter 11c's REPACKED). Q8_0 has its own kernel (gemv_q8_0.cu); this one is that kernel's v3 made generic.
//
// Every format is read in UNITS of 32 weights (quant_blocks.cuh: a block of 32, or a sub-block of a
// super-block; 32 signed codes q, a scale a and a minimum b, w_i = a * q_i + b). A unit meets one
// block of the int8 activations (quantize_act / rmsnorm_quantize_q8: 32 int8 and one fp32 scale
// dx), and its dot product is integer arithmetic (dp4a, four int8 products per instruction) scaled
// once:   sum_i w_i x_i = dx * (a * sum_i q_i xq_i + b * sum_i xq_i).
// The format is a template argument; the pipeline, the epilogues and dequantization are shared.
//
// The pipeline is v3's: the raw bytes of a tile of each row (32 units = 1024 weights) are copied to
// shared memory with 16-byte cp.async, NSTAGE tiles in flight; lane u of the warp decodes unit u of
// the tile, reading shared memory as 32-bit words at any 2-byte-aligned offset (funnel shifts), so
// blocks of 18 or 210 bytes need no alignment in global memory.
#include "quant_blocks.cuh"

#ifndef WTYPE
#define WTYPE 12         // the format: its GGML type id (2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 12 Q4_K, 13 Q5_K, 14 Q6_K;
                         // 102, 103, 106, 107: Q4_0 .. Q5_1 regrouped by eight; 114: Q6_K padded to
                         // 216 bytes; quant_blocks.cuh)
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
#define NSTAGE 4         // tiles in flight per warp (the direct road: steps of four super-blocks)
#endif
#ifndef DIRECT
#define DIRECT 0         // 1: super-blocks loaded straight into registers (the direct road, below)
#endif
#define UNITS 32         // units (32 weights) per tile and row: one per lane

__device__ __forceinline__ int dot4(const int* q, const int* x, int s = 0) {   // s + 16 int8 products
#pragma unroll
    for (int k = 0; k < 4; ++k) s = __dp4a(q[k], x[k], s);
    return s;
}
using F = Fmt<WTYPE>;
#define UPB (F::QK / 32)                              // units per block
#define TILE_BLOCKS (UNITS / UPB)                     // blocks per tile and row
#define TILE_BYTES (TILE_BLOCKS * F::BYTES)
#define TILE_VEC ((TILE_BYTES + 15) / 16 + 1)         // uint4 slots per row and stage (+ misalignment)

// The epilogues are gemv_q8_0.cu's (common.cuh's EPI_* and gemv_store): 0 writes y; 1 adds a residual
// (y = res + x @ w^T); 2 reads gate (w) and up (w2) rows and writes silu(gate) * up; 3 streams the
// rows of w | w2 | w3 into a planar y.

template <int EPI>
__device__ __forceinline__ void gemv_body(uint4* smem, const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2,
                                          const float* __restrict__ res, const int8_t* __restrict__ xq,
                                          const float* __restrict__ xd, float* __restrict__ y, int N, int K,
                                          const uint8_t* __restrict__ w3 = nullptr, int n1 = 0, int n2 = 0, int nt = BATCH)
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
            // blocks of a multiple of 4 bytes start 4-byte aligned (the launcher checks the tensors
            // do): said so, every word of them is one aligned read, no funnel shift
            const int mis = F::BYTES % 4 ? 15 : 12;
            Unit wu[RR];                                          // this unit of each row, decoded once
#pragma unroll
            for (int r = 0; r < RR; ++r) {
                const uintptr_t a = reinterpret_cast<uintptr_t>(row_of(r) + (size_t)tile * TILE_BYTES);
                const Stage s{reinterpret_cast<const uint32_t*>(&buf[wid][tile % NSTAGE][r][0])};
                wu[r] = valid(r) ? decode<F>(s, (int)(a & mis) + o_blk, j) : Unit{};
            }
#pragma unroll
            for (int t = 0; t < BATCH; ++t) {
                const int4* xv = reinterpret_cast<const int4*>(xq + (size_t)t * K + (size_t)u * 32);
                const int4 x0 = __ldg(xv), x1 = __ldg(xv + 1);
                const int x[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
                int sx = 0;                                       // the sum of the 32 activations
                if (F::MIN)
#pragma unroll
                    for (int k = 0; k < 8; ++k) sx = __dp4a(x[k], 0x01010101, sx);
                const float dx = __ldg(xd + (size_t)t * nu + u);
#pragma unroll
                for (int r = 0; r < RR; ++r) {
                    float v = F::TWO ? wu[r].sc.a[0] * (float)dot4(wu[r].q, x) + wu[r].sc.a[1] * (float)dot4(wu[r].q + 4, x + 4)
                                     : wu[r].sc.a[0] * (float)dot4(wu[r].q + 4, x + 4, dot4(wu[r].q, x));
                    if (F::MIN) v += wu[r].sc.b * (float)sx;
                    acc[r][t] += dx * v;
                }
            }
        }
        __syncwarp();
    }
    gemv_store<EPI, ROWS>(acc, res_mine, y, n0, N, n1, n2, nt);
}

// ---------------------------------------------------------------- the direct road (Q4_K, Q5_K, the regrouped 32s, padded Q6_K)
#if DIRECT
// A super-block of 144 (Q4_K) or 176 (Q5_K) bytes is a whole number of 16-byte vectors, so when the
// tensor starts 16-byte aligned (the launcher checks) every field can be loaded straight into
// registers: no shared-memory stages, no funnel shifts. Eight lanes share a super-block: lane c16 of
// them loads code bytes 16 c16 .. 16 c16 + 15, which hold 16 weights of two sub-blocks (j0 = 2c in
// the low nibbles, j0 + 1 in the high, c = c16 / 2), and the block's 16-byte head (d, dmin and the
// twelve 6-bit scale bytes, the same 16 bytes for the eight lanes: one transaction; of a regrouped
// Q4_0 or Q5_0 block only the word with the lane's two scales). A warp takes four super-blocks a
// STEP, and keeps NSTAGE steps of vectors in flight: a ring of registers, slot s refilled with the
// step NSTAGE ahead as soon as it is decoded. (ncu on the H200: the staged road executes ~200
// instructions per 32 Q4_K weights, Q8_0's v3 ~140.)
struct KHalf {                // a lane's 32 weights: 16 of sub-block j0 and 16 of j0 + 1
    int lo[4], hi[4];         // codes 0..15 (0..31 with a fifth bit), four per word
    float a0, b0, a1, b1;     // w = a q + b for either sub-block
};
// The super-blocks the direct road reads: 16-byte vectors of scales (HEADV), of fifth bits (HIGHV),
// then eight of nibbles. KQ: the K-quants' packed 6-bit scales; else the regrouped blocks of 32
// (quant_blocks.cuh), PAIRS: (d, m) per block, OFF: the code offset w = d (q - OFF) of the others.
template <int ID> struct KFmt;
template <> struct KFmt<12> { static constexpr int HEADV = 1, HIGHV = 0, OFF = 0; static constexpr bool KQ = true, PAIRS = false; };
template <> struct KFmt<13> { static constexpr int HEADV = 1, HIGHV = 2, OFF = 0; static constexpr bool KQ = true, PAIRS = false; };
template <> struct KFmt<102> { static constexpr int HEADV = 1, HIGHV = 0, OFF = 8; static constexpr bool KQ = false, PAIRS = false; };
template <> struct KFmt<103> { static constexpr int HEADV = 2, HIGHV = 0, OFF = 0; static constexpr bool KQ = false, PAIRS = true; };
template <> struct KFmt<106> { static constexpr int HEADV = 1, HIGHV = 2, OFF = 16; static constexpr bool KQ = false, PAIRS = false; };
template <> struct KFmt<107> { static constexpr int HEADV = 2, HIGHV = 2, OFF = 0; static constexpr bool KQ = false, PAIRS = true; };

template <int ID> struct KVec {   // the vectors a lane loads per row and step
    uint4 head, codes, high;      // head: the vector holding its scales; high: its fifth bits, if any
};
template <int ID>
__device__ __forceinline__ KVec<ID> kload(const uint8_t* blk, int c16) {
    using K = KFmt<ID>;
    const uint4* v = reinterpret_cast<const uint4*>(blk);
    KVec<ID> k;
    if (K::KQ || K::PAIRS)                                // pairs: blocks 4h .. 4h + 3 in vector h
        k.head = __ldg(v + (K::PAIRS ? c16 >> 2 : 0));
    else                                                  // d of the lane's two blocks: one word of the head
        k.head.x = __ldg(reinterpret_cast<const uint32_t*>(blk) + (c16 >> 1));
    k.codes = __ldg(v + K::HEADV + K::HIGHV + c16);
    if (K::HIGHV) k.high = __ldg(v + K::HEADV + (c16 & 1));
    return k;
}
// What a lane needs to find its two sub-blocks' 6-bit scales and minimums in a K-quant's head, fixed
// for the lane: sub-blocks 0..3 keep six bits in head bytes 0..7; 4..7 four bits in bytes 8..11 and
// two on top of bytes 0..7. Both cases are one formula, sc = (A & lo) | ((s0 >> 2) & hi), on two
// bytes at a time.
struct KLane {
    int c, sh;                // the lane's pair c = j0 / 2 of sub-blocks; its bytes' shift in the words
    uint32_t lo, hi;          // 0x3F3F, 0 (c < 2) or 0x0F0F, 0x3030 (c >= 2)
    int ja, jb;               // the units (sub-blocks of 32) of its low and high nibbles: j0, j0 + 1
};
template <int ID>
__device__ __forceinline__ KLane klane(int c16) {
    const int c = c16 >> 1;
    return KLane{c, 16 * (c & 1), c < 2 ? 0x3F3Fu : 0x0F0Fu, c < 2 ? 0u : 0x3030u, 2 * c, 2 * c + 1};
}
__device__ __forceinline__ float2 half2_of(uint32_t w) { return __half22float2(*reinterpret_cast<const __half2*>(&w)); }
template <int ID>
__device__ __forceinline__ KHalf kdecode(const KVec<ID>& k, const KLane& L) {
    using K = KFmt<ID>;
    KHalf h;
    if (K::KQ) {
        const uint32_t s0 = k.head.y >> L.sh, s1 = k.head.z >> L.sh, s2 = k.head.w >> L.sh;
        const uint32_t sc = ((L.c < 2 ? s0 : s2) & L.lo) | ((s0 >> 2) & L.hi);      // bytes: sc_j0, sc_j0+1
        const uint32_t m = ((L.c < 2 ? s1 : s2 >> 4) & L.lo) | ((s1 >> 2) & L.hi);  // m_j0, m_j0+1
        const float2 dm = half2_of(k.head.x);                                       // d, dmin
        h.a0 = dm.x * (float)(sc & 0xff); h.a1 = dm.x * (float)(sc >> 8);
        h.b0 = -(dm.y * (float)(m & 0xff)); h.b1 = -(dm.y * (float)(m >> 8));
    } else if (K::PAIRS) {                                // (d_j0, m_j0), (d_j0+1, m_j0+1): words 2(c & 1), + 1
        const float2 p0 = half2_of(L.c & 1 ? k.head.z : k.head.x), p1 = half2_of(L.c & 1 ? k.head.w : k.head.y);
        h.a0 = p0.x; h.b0 = p0.y; h.a1 = p1.x; h.b1 = p1.y;
    } else {                                              // d_j0, d_j0+1: word c of the head, as loaded
        const float2 d = half2_of(k.head.x);
        h.a0 = d.x; h.a1 = d.y; h.b0 = -(float)K::OFF * d.x; h.b1 = -(float)K::OFF * d.y;
    }
    const uint32_t q[4] = {k.codes.x, k.codes.y, k.codes.z, k.codes.w};
    const uint32_t e[4] = {k.high.x, k.high.y, k.high.z, k.high.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        h.lo[i] = q[i] & 0x0F0F0F0F;
        h.hi[i] = (q[i] >> 4) & 0x0F0F0F0F;
        if (K::HIGHV) {                                   // bit j of byte l: the fifth bit of element l of sub-block j
            h.lo[i] |= ((e[i] >> (2 * L.c)) & 0x01010101) << 4;
            h.hi[i] |= ((e[i] >> (2 * L.c + 1)) & 0x01010101) << 4;
        }
    }
    return h;
}

// Q6_K padded to 216 bytes at upload (chapter 11c: "Q6_KP"), so that every block starts 8-byte aligned:
// the file's ql (128 bytes), qh (64), 16 int8 scales and d, then 6 bytes of padding. A lane reads ql
// bytes 16 c16 .. 16 c16 + 15 (two 8-byte loads): elements l0 .. l0 + 15 of units ja = 4 h + a (low
// nibbles) and ja + 2 (high nibbles), h = c16 / 4, a = c16 / 2 % 2; their 2 high bits from qh[32 h + l]
// at bit 2 a and 2 a + 4; their scales, bytes 2 a + c16 % 2 of scale words 2 h and 2 h + 1; and d.
// Codes 0..63 with w = a (q - 32): the minimum b = -32 a.
template <> struct KVec<114> {
    uint2 q0, q1, e0, e1, sc;
    uint32_t d;
};
template <>
__device__ __forceinline__ KVec<114> kload<114>(const uint8_t* blk, int c16) {
    const uint2* v = reinterpret_cast<const uint2*>(blk);          // 27 eight-byte words
    const int h = c16 >> 2;
    KVec<114> k;
    k.q0 = __ldg(v + 2 * c16);
    k.q1 = __ldg(v + 2 * c16 + 1);
    k.e0 = __ldg(v + 16 + 4 * h + 2 * (c16 & 1));
    k.e1 = __ldg(v + 17 + 4 * h + 2 * (c16 & 1));
    k.sc = __ldg(v + 24 + h);
    k.d = __ldg(reinterpret_cast<const uint32_t*>(blk) + 52);    // d in the low half, padding above
    return k;
}
template <>
__device__ __forceinline__ KLane klane<114>(int c16) {
    const int a = (c16 >> 1) & 1, ja = 4 * (c16 >> 2) + a;
    return KLane{a, 8 * (2 * a + (c16 & 1)), 0u, 0u, ja, ja + 2};  // c: a; sh: the scale byte's shift
}
template <>
__device__ __forceinline__ KHalf kdecode<114>(const KVec<114>& k, const KLane& L) {
    KHalf h;
    const float d = __half2float(__ushort_as_half((uint16_t)(k.d & 0xffff)));
    h.a0 = d * (float)(int8_t)(k.sc.x >> L.sh);
    h.a1 = d * (float)(int8_t)(k.sc.y >> L.sh);
    h.b0 = -32.f * h.a0;
    h.b1 = -32.f * h.a1;
    const uint32_t q[4] = {k.q0.x, k.q0.y, k.q1.x, k.q1.y}, e[4] = {k.e0.x, k.e0.y, k.e1.x, k.e1.y};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        h.lo[i] = (q[i] & 0x0F0F0F0F) | (((e[i] >> (2 * L.c)) & 0x03030303) << 4);
        h.hi[i] = ((q[i] >> 4) & 0x0F0F0F0F) | (((e[i] >> (2 * L.c + 4)) & 0x03030303) << 4);
    }
    return h;
}

// One step of the direct road for every row: the lane's two units (decoded: h) against the
// activation blocks u, v of super-block b, into acc.
template <int RR>
__device__ __forceinline__ void direct_dot(const KHalf (&h)[RR], float (&acc)[RR][BATCH], const int8_t* __restrict__ xq,
                                           const float* __restrict__ xd, int K, int b, const KLane& L, int l0)
{
    const int nu = K / 32;
#pragma unroll
    for (int t = 0; t < BATCH; ++t) {
        const int u = b * 8 + L.ja, v = b * 8 + L.jb;   // the activation blocks of the lane's two units
        const int4 xa = __ldg(reinterpret_cast<const int4*>(xq + (size_t)t * K + (size_t)u * 32 + l0));
        const int4 xb = __ldg(reinterpret_cast<const int4*>(xq + (size_t)t * K + (size_t)v * 32 + l0));
        const int x0[4] = {xa.x, xa.y, xa.z, xa.w}, x1[4] = {xb.x, xb.y, xb.z, xb.w};
        int sx0 = 0, sx1 = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            sx0 = __dp4a(x0[i], 0x01010101, sx0);
            sx1 = __dp4a(x1[i], 0x01010101, sx1);
        }
        const float dx0 = __ldg(xd + (size_t)t * nu + u), dx1 = __ldg(xd + (size_t)t * nu + v);
#pragma unroll
        for (int r = 0; r < RR; ++r) {
            int d0 = 0, d1 = 0;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                d0 = __dp4a(h[r].lo[i], x0[i], d0);
                d1 = __dp4a(h[r].hi[i], x1[i], d1);
            }
            acc[r][t] += dx0 * (h[r].a0 * (float)d0 + h[r].b0 * (float)sx0)
                       + dx1 * (h[r].a1 * (float)d1 + h[r].b1 * (float)sx1);
        }
    }
}

template <int EPI>
__device__ __forceinline__ void gemv_direct(const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2,
                                            const float* __restrict__ res, const int8_t* __restrict__ xq,
                                            const float* __restrict__ xd, float* __restrict__ y, int N, int K,
                                            const uint8_t* __restrict__ w3 = nullptr, int n1 = 0, int n2 = 0, int nt = BATCH)
{
    static_assert(F::QK == 256 && F::BYTES % 8 == 0, "the direct road takes super-blocks of whole vectors");
    constexpr int RR = EPI == EPI_GLU ? 2 * ROWS : ROWS;
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int n0 = (blockIdx.x * WARPS + wid) * ROWS;
    if (n0 >= N) return;
    const int nb = K / 256, steps = (nb + 3) / 4;
    const size_t row_bytes = (size_t)nb * F::BYTES;
    const int c16 = lane & 7, l0 = 16 * (c16 & 1), sb = lane >> 3;   // sb: super-block in a step
    const KLane L = klane<WTYPE>(c16);
    const uint8_t* row[RR];
    bool ok[RR];
#pragma unroll
    for (int r = 0; r < RR; ++r) {
        const int n = n0 + (EPI == EPI_GLU && r >= ROWS ? r - ROWS : r);
        ok[r] = n < N;
        row[r] = EPI == EPI_CAT ? cat_row(w, w2, w3, n0 + r, n1, n2, row_bytes)
                 : EPI == EPI_GLU && r >= ROWS ? w2 + (size_t)n * row_bytes : w + (size_t)n * row_bytes;
    }
    float acc[RR][BATCH];
#pragma unroll
    for (int r = 0; r < RR; ++r)
#pragma unroll
        for (int t = 0; t < BATCH; ++t) acc[r][t] = 0.f;
    KVec<WTYPE> ring[NSTAGE][RR];                         // steps s, s + 1, ..., s + NSTAGE - 1
#pragma unroll
    for (int s = 0; s < NSTAGE; ++s)                      // weights only before pdl_wait
#pragma unroll
        for (int r = 0; r < RR; ++r)
            if (ok[r] && sb + 4 * s < nb) ring[s][r] = kload<WTYPE>(row[r] + (size_t)(sb + 4 * s) * F::BYTES, c16);
    pdl_wait();
    float res_mine = 0.f;
    if (EPI == EPI_ADD && lane < ROWS * BATCH && n0 + lane / BATCH < N)
        res_mine = __ldg(res + (size_t)(lane % BATCH) * N + n0 + lane / BATCH);
    for (int step = 0; step < steps; step += NSTAGE) {
#pragma unroll
        for (int s = 0; s < NSTAGE; ++s) {
            const int b = sb + 4 * (step + s);            // this lane's super-block (past the row: idle)
            if (b >= nb) break;
            KHalf h[RR];
#pragma unroll
            for (int r = 0; r < RR; ++r) {
                h[r] = kdecode<WTYPE>(ring[s][r], L);
                if (ok[r] && b + 4 * NSTAGE < nb)         // the slot takes the step NSTAGE ahead
                    ring[s][r] = kload<WTYPE>(row[r] + (size_t)(b + 4 * NSTAGE) * F::BYTES, c16);
            }
            direct_dot<RR>(h, acc, xq, xd, K, b, L, l0);
        }
    }
    gemv_store<EPI, ROWS>(acc, res_mine, y, n0, N, n1, n2, nt);
}

#endif

// The kernels: DIRECT (the launcher's choice: DIRECT_TYPES tensors that start aligned to their vectors) takes
// the direct road, every other format and alignment the staged one
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_quant(const uint8_t* __restrict__ w, const int8_t* __restrict__ xq, const float* __restrict__ xd,
           float* __restrict__ y, int N, int K)
{
#if DIRECT
    gemv_direct<EPI_NONE>(w, nullptr, nullptr, xq, xd, y, N, K);
#else
    __shared__ __align__(16) uint4 buf[WARPS * NSTAGE * ROWS * TILE_VEC];
    gemv_body<EPI_NONE>(buf, w, nullptr, nullptr, xq, xd, y, N, K);
#endif
}
PDL_READY(gemv_quant);
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_quant_add(const uint8_t* __restrict__ w, const float* __restrict__ res, const int8_t* __restrict__ xq,
               const float* __restrict__ xd, float* __restrict__ y, int N, int K)
{
#if DIRECT
    gemv_direct<EPI_ADD>(w, nullptr, res, xq, xd, y, N, K);
#else
    __shared__ __align__(16) uint4 buf[WARPS * NSTAGE * ROWS * TILE_VEC];
    gemv_body<EPI_ADD>(buf, w, nullptr, res, xq, xd, y, N, K);
#endif
}
PDL_READY(gemv_quant_add);
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_quant_cat(const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2, const uint8_t* __restrict__ w3,
               const int8_t* __restrict__ xq, const float* __restrict__ xd, float* __restrict__ y, int N, int K,
               int n1, int n2)
{
#if DIRECT
    gemv_direct<EPI_CAT>(w, w2, nullptr, xq, xd, y, N, K, w3, n1, n2);
#else
    __shared__ __align__(16) uint4 buf[WARPS * NSTAGE * ROWS * TILE_VEC];
    gemv_body<EPI_CAT>(buf, w, w2, nullptr, xq, xd, y, N, K, w3, n1, n2);
#endif
}
PDL_READY(gemv_quant_cat);
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_quant_glu(const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2, const int8_t* __restrict__ xq,
               const float* __restrict__ xd, float* __restrict__ y, int N, int K)
{
#if DIRECT
    gemv_direct<EPI_GLU>(w, w2, nullptr, xq, xd, y, N, K);
#else
    extern __shared__ __align__(16) uint4 dyn[];      // twice the rows: sized by the launcher
    gemv_body<EPI_GLU>(dyn, w, w2, nullptr, xq, xd, y, N, K);
#endif
}
PDL_READY(gemv_quant_glu);

// Over the tiles of a mixture of experts (chapter 11d; gemv_q8_0.cu's gemv_moe): grid (row blocks,
// tile slots), tile = up to BATCH sorted rows of expert e, whose weights start e * estride bytes in.
template <int EPI>
__device__ __forceinline__ void gemv_quant_tile(uint4* smem, const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2,
                                                const int* __restrict__ tiles, long long estride,
                                                const int8_t* __restrict__ xq, const float* __restrict__ xd,
                                                float* __restrict__ y, int N, int K)
{
    pdl_wait();
    const int3 t = moe_tile(tiles, blockIdx.y);        // grid.y: the tile slots
    if (t.x < 0) return;
    const uint8_t* we = w + t.x * estride;
    const uint8_t* we2 = EPI == EPI_GLU ? w2 + t.x * estride : nullptr;
    const int8_t* xt = xq + (size_t)t.y * K;
    const float* dt = xd + (size_t)t.y * (K / 32);
    float* yt = y + (size_t)t.y * N;
#if DIRECT
    gemv_direct<EPI>(we, we2, nullptr, xt, dt, yt, N, K, nullptr, 0, 0, t.z);
#else
    gemv_body<EPI>(smem, we, we2, nullptr, xt, dt, yt, N, K, nullptr, 0, 0, t.z);
#endif
}
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_quant_moe(const uint8_t* __restrict__ w, const int* __restrict__ tiles, long long estride,
               const int8_t* __restrict__ xq, const float* __restrict__ xd, float* __restrict__ y, int N, int K)
{
#if DIRECT
    uint4* buf = nullptr;
#else
    __shared__ __align__(16) uint4 buf[WARPS * NSTAGE * ROWS * TILE_VEC];
#endif
    gemv_quant_tile<EPI_NONE>(buf, w, nullptr, tiles, estride, xq, xd, y, N, K);
}
PDL_READY(gemv_quant_moe);
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_quant_moe_glu(const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2, const int* __restrict__ tiles,
                   long long estride, const int8_t* __restrict__ xq, const float* __restrict__ xd,
                   float* __restrict__ y, int N, int K)
{
    extern __shared__ __align__(16) uint4 dyn[];      // the staged road: sized by the launcher (0: direct)
    gemv_quant_tile<EPI_GLU>(dyn, w, w2, tiles, estride, xq, xd, y, N, K);
}
PDL_READY(gemv_quant_moe_glu);

// ---------------------------------------------------------------- dequantization, for prefill
// Rows [0, R) of w -> fp16 out [R, K]: a thread per unit of 32 weights, decoded by the format's
// decode() as the GEMV does, written as 32 values. The tensor-core GEMM (chapter 11, version 5)
// then takes slabs of these rows; get_rows (the embedding) reads one row the same way.
__device__ __forceinline__ void unit_values(const Stage& s, int o, int j, float* v) {
    const Unit u = decode<F>(s, o, j);
#pragma unroll
    for (int e = 0; e < 32; ++e)      // no fused multiply-add: the two roundings numpy does
        v[e] = __fadd_rn(__fmul_rn(u.sc.a[e / 16], (float)(int8_t)(u.q[e / 4] >> (8 * (e % 4)))), u.sc.b);
}

extern "C" __global__ void __launch_bounds__(128)
dequant_quant_f16(const uint8_t* __restrict__ w, __half* __restrict__ out, int R, int K)
{
    pdl_wait();
    __shared__ uint4 stage[4][32 * 4];                  // a warp's 32 units of 32 fp16 values: 2 KB
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nu = K / 32;
    const long long total = (long long)R * nu;          // units; unit u is out[32 u .. 32 u + 32)
    const long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (u < total) {
        const int r = (int)(u / nu), k = (int)(u % nu);
        const uint8_t* blk = w + (size_t)r * (K / F::QK) * F::BYTES + (size_t)(k / UPB) * F::BYTES;
        // the block's bytes as aligned words (a 2-byte-aligned block: start one half-word early)
        const Stage s{reinterpret_cast<const uint32_t*>(reinterpret_cast<uintptr_t>(blk) & ~(uintptr_t)3)};
        float v[32];
        unit_values(s, (int)(reinterpret_cast<uintptr_t>(blk) & 3), k % UPB, v);
#pragma unroll
        for (int i = 0; i < 4; ++i)
            stage[wid][lane * 4 + i] = make_uint4(pack_half2(v[8 * i], v[8 * i + 1]), pack_half2(v[8 * i + 2], v[8 * i + 3]),
                                                  pack_half2(v[8 * i + 4], v[8 * i + 5]), pack_half2(v[8 * i + 6], v[8 * i + 7]));
    }
    __syncwarp();
    // the warp's 32 units are 2 KB of out, end to end: written 16 bytes a lane with consecutive lanes
    // side by side (coalesced), not 64 bytes apart
    const long long u0 = u - lane;
    uint4* o = reinterpret_cast<uint4*>(out) + u0 * 4;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int vec = i * 32 + lane;
        if (u0 + vec / 4 < total) o[vec] = stage[wid][vec];
    }
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

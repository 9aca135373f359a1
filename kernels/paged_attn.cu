// paged_attn.cu: decode attention over a paged KV cache, split over the sequence (chapter 12).
//
// KV cache (one layer): K, V f16 [num_pages, page_size, Hkv, D], or with KV_Q8 each row of D values
// as D / 32 Q8_0 blocks (an f16 scale, then 32 int8 codes: 34 bytes; chapter 03a's layout, the CPU
// cache's too). Sequence b's token t lives in page page_table[b, t / page_size], slot
// t % page_size. q: f32 [B, Hq, D], one new token per sequence; out: f32 [B, Hq, D].
//
// Flash-decoding: a decode step has one query row per head, far too little work for one block per
// head to fill 132 SMs when the context is long. So the sequence is cut into splits; block
// (b, kv head, split) computes, for its keys, the partial softmax state (m, l, acc) of the GROUP
// query heads that share the kv head (GQA: K/V are read once for the whole group), and the block
// of the (b, kv head) that finishes last merges the splits' states:
//     m = max m_s,  l = sum l_s 2^(m_s - m),  o = sum acc_s 2^(m_s - m) / l.
// A sliding window (window > 0) makes the keys the last `window` of the sequence, and the splits
// cut those: the pages before them are never read (and may be gone: -1 in the table).
// Each sequence cuts its own keys (`split_keys`): splits of split_len keys, made longer by whole
// multiples when that would take more than the grid's S of them, so a 32k-token sequence merges 32
// states of 1,024 keys instead of 256 of 128, and a short one in the same batch still gets short ones.
#include "common.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#ifndef GROUP
#define GROUP 1             // query heads per kv head (Hq / Hkv)
#endif
#ifndef NWARPS
#define NWARPS 4
#endif
#ifndef UNROLL
#define UNROLL 4            // keys a slot loads before it uses the first: bytes in flight
#endif
#ifndef QUANT
#define QUANT 0             // 1: out is written as packed int8 activations (see write_out)
#endif
#ifndef KV_Q8
#define KV_Q8 0             // 1: the pages hold Q8_0 blocks (8-bit K/V), not f16
#endif
#define LPK (HEAD_DIM / 8)  // lanes per key: each lane holds 8 dims of it (16 bytes of f16, 8 codes of Q8_0)
#define KPW (32 / LPK)      // keys a warp works on at once ("slots" per warp)
#define NSLOT (NWARPS * KPW)

// A lane's 8 values of one key (or value) as they come from the pages, and their floats: unpack
// writes the 8 numbers and returns the factor they take (f16: 1; Q8_0: the block's scale d, so a
// dot product is d * (q . codes) and a value adds p * d * codes).
#if KV_Q8
typedef unsigned char kv_t;
#define ROW_BYTES (HEAD_DIM / 32 * 34)  // one (token, head) row of Q8_0 blocks
struct Lane8 { uint2 q; __half d; };    // 8 codes and their block's scale
__device__ __forceinline__ float unpack(const Lane8& x, float* f) {
    const signed char* c = reinterpret_cast<const signed char*>(&x.q);
#pragma unroll
    for (int i = 0; i < 8; i++) f[i] = (float)c[i];
    return __half2float(x.d);
}
#else
typedef __half kv_t;
struct Lane8 { uint4 h; };              // 8 halves
__device__ __forceinline__ float unpack(const Lane8& x, float* f) {
    const __half2* h = reinterpret_cast<const __half2*>(&x.h);
#pragma unroll
    for (int i = 0; i < 4; i++) { float2 v = __half22float2(h[i]); f[2 * i] = v.x; f[2 * i + 1] = v.y; }
    return 1.f;
}
#endif
// Keys per split of a sequence with `keys` keys: split_len, or the least multiple of it that leaves
// at most S splits (the grid's). From the sequence's own length only, so its splits, and its
// numbers to the last bit, do not depend on the batch around it.
__device__ __forceinline__ int split_keys(int keys, int split_len, int S) {
    const int n = keys <= 0 ? 0 : (keys - 1) / split_len + 1;
    return split_len * max(1, (n + S - 1) / S);
}

// A sequence's length as the kernels count it: within [0, what its page table can hold].
__device__ __forceinline__ int clamp_len(int L, int max_pages, int page_size) {
    return (int)min(max((long long)L, 0LL), min((long long)max_pages * page_size, 0x7fffffffLL));
}

// merge another softmax state (m2, l2, acc2) into (m, l, acc): the flash-decoding rule
__device__ __forceinline__ void merge_state(float& m, float& l, float* acc, float m2, float l2, const float* acc2) {
    const float M = fmaxf(m, m2), b = M == -INFINITY ? 0.f : M;
    const float w1 = ex2(m - b), w2 = ex2(m2 - b);
    l = l * w1 + l2 * w2;
#pragma unroll
    for (int i = 0; i < 8; i++) acc[i] = acc[i] * w1 + acc2[i] * w2;
    m = M;
}

// Element i of the output, f32 [rows, HEAD_DIM] (rows = B * Hq, `total` = rows * HEAD_DIM values).
// QUANT: chapter 11's packed int8 activations instead, the int8 quants [total], then one f32 scale
// per 32 values — exactly what quantize_q8_act_f32 would make of the f32 output, so the
// o-projection's GEMV reads it without a kernel of its own (chapter 13's paged_attention_q8). The
// whole warp calls it, on 32 consecutive values of one row (HEAD_DIM % 32 == 0).
__device__ __forceinline__ void write_out(float* out, size_t i, float v, size_t total) {
#if QUANT
    float d;
    int8_t* xq = reinterpret_cast<int8_t*>(out);
    xq[i] = quantize_q8_lane(v, d);
    if (i % 32 == 0) reinterpret_cast<float*>(xq + total)[i / 32] = d;
#else
    out[i] = v;
#endif
}

// A split block counts itself in once its state is visible to the whole GPU: true in the block
// that counts n, the last of its (sequence, kv head) to finish, which puts the counter back to 0
// for the next launch (the counters are zero between launches: `split_counters` on the host).
__device__ __forceinline__ bool last_to_finish(unsigned* counter, int n) {
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(counter, 1u) == (unsigned)n - 1;
        if (last) *counter = 0u;
    }
    __syncthreads();
    return last;
}

// The last block merges the n splits' states of its GROUP rows (row0 ...) into out, in split order:
// the same bits whichever block is last. __ldcg reads from L2, where the other blocks wrote.
__device__ __forceinline__ void merge_splits(const float* part_o, const float* part_ml, float* out, size_t row0,
                                             int S, int n, size_t total) {
    __threadfence();
    for (int idx = threadIdx.x; idx < GROUP * HEAD_DIM; idx += blockDim.x) {
        const size_t row = row0 + idx / HEAD_DIM;
        const int d = idx % HEAD_DIM;
        const float* ml = part_ml + row * S * 2;           // (m, l) of each split
        float M = -INFINITY;
        for (int s = 0; s < n; s++) M = fmaxf(M, __ldcg(ml + 2 * s));
        const float bias = M == -INFINITY ? 0.f : M;
        float lt = 0.f, ot = 0.f;
#pragma unroll 8
        for (int s = 0; s < n; s++) {
            const float w = ex2(__ldcg(ml + 2 * s) - bias);
            lt += __ldcg(ml + 2 * s + 1) * w;
            ot += __ldcg(part_o + (row * S + s) * HEAD_DIM + d) * w;
        }
        write_out(out, row * HEAD_DIM + d, lt > 0.f ? ot / lt : 0.f, total);
    }
}

// The pool rows of a slot's UNROLL keys from `base` on (-1: past `end`, or no page for it). A key's
// row needs its page id first, a load of its own: the next group's are looked up while this group's
// K/V load, so a group waits for one round trip to memory, not two.
__device__ __forceinline__ void key_rows(int (&rows)[UNROLL], int base, int end, const int* pt, int page_size,
                                         int max_pages, int n_pages) {
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const int tk = base + u * NSLOT + (threadIdx.x % 32) / LPK;
        rows[u] = tk < end ? (int)page_row(pt, tk, page_size, max_pages, n_pages) : -1;
    }
}

#if KV_Q8
// Codes d0 .. d0+7 of a row and their block's scale. A block is 34 bytes, so codes are only 2-byte
// aligned: four 16-bit loads (the same 32-byte sectors as one 8-byte load would touch).
__device__ __forceinline__ Lane8 load_q8(const kv_t* row, int d0) {
    const kv_t* blk = row + d0 / 32 * 34;
    const unsigned short* c = reinterpret_cast<const unsigned short*>(blk + 2 + d0 % 32);
    Lane8 x;
    x.q = make_uint2(c[0] | (unsigned)c[1] << 16, c[2] | (unsigned)c[3] << 16);
    x.d = *reinterpret_cast<const __half*>(blk);
    return x;
}
#endif

// This lane's 8 values of the key and the value at pool row `row`; zeros for no row (row < 0: past
// the split's end), which attend_group weighs by 0 (a stale page's NaN would poison acc).
__device__ __forceinline__ void load_kv(Lane8& k, Lane8& v, const kv_t* Kc, const kv_t* Vc, int row, int Hkv,
                                        int kvh, int d0) {
    if (row < 0) { k = v = Lane8{}; return; }
#if KV_Q8
    const size_t off = ((size_t)row * Hkv + kvh) * ROW_BYTES;
    k = load_q8(Kc + off, d0);
    v = load_q8(Vc + off, d0);
#else
    const size_t off = ((size_t)row * Hkv + kvh) * HEAD_DIM + d0;
    k.h = *reinterpret_cast<const uint4*>(Kc + off);
    v.h = *reinterpret_cast<const uint4*>(Vc + off);
#endif
}

// One group of a slot's UNROLL keys (ok[u]: key u exists): their scores for the GROUP query heads
// (base 2), the online softmax (one max, one rescale per group), then their values into acc.
__device__ __forceinline__ void attend_group(const Lane8 (&kr)[UNROLL], const Lane8 (&vr)[UNROLL],
                                             const bool (&ok)[UNROLL], const float (&q)[GROUP][8],
                                             float (&acc)[GROUP][8], float (&m)[GROUP], float (&l)[GROUP]) {
    float s[UNROLL][GROUP];                                 // scores, then probabilities
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        float k[8];
        const float dk = unpack(kr[u], k);
#pragma unroll
        for (int gi = 0; gi < GROUP; gi++) {
            float d = 0.f;
#pragma unroll
            for (int i = 0; i < 8; i++) d = fmaf(q[gi][i], k[i], d);
            d *= dk;                                        // (a Q8_0 block's scale; f16: 1)
#pragma unroll
            for (int o = LPK / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
            s[u][gi] = ok[u] ? d : -INFINITY;
        }
    }
#pragma unroll
    for (int gi = 0; gi < GROUP; gi++) {
        float mx = s[0][gi];
#pragma unroll
        for (int u = 1; u < UNROLL; u++) mx = fmaxf(mx, s[u][gi]);
        const float mn = fmaxf(m[gi], mx), bias = mn == -INFINITY ? 0.f : mn;
        const float c = ex2(m[gi] - bias);
        l[gi] *= c;
#pragma unroll
        for (int i = 0; i < 8; i++) acc[gi][i] *= c;
#pragma unroll
        for (int u = 0; u < UNROLL; u++) { s[u][gi] = ex2(s[u][gi] - bias); l[gi] += s[u][gi]; }
        m[gi] = mn;
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        float v[8];
        const float dv = unpack(vr[u], v);
#pragma unroll
        for (int gi = 0; gi < GROUP; gi++) {
            const float p = s[u][gi] * dv;
#pragma unroll
            for (int i = 0; i < 8; i++) acc[gi][i] = fmaf(p, v[i], acc[gi][i]);
        }
    }
}

// Grid (B, Hkv, S), block NWARPS*32. Each slot (LPK lanes) runs its own online softmax over its
// keys, UNROLL at a time (one max, one rescale per group of UNROLL keys); at the end the slots of a
// warp merge through shuffles, the warps of the block through shared memory, and the splits of a
// (sequence, kv head) in the block that finishes last.
// seq_lens and page_table are a step's inputs, never the output of the kernel launched just before
// this one: they are read before pdl_wait, so the first keys' page rows are known when it returns.
// early (nonzero): the kernel before this one stored this step's keys, at most B of each sequence (B =
// gridDim.x, the step's rows: one per row, at the end of its sequence; the rows that verify drafts
// are one sequence's last few). So a row's keys below L - B are an earlier step's, written by no
// kernel still running: a block whose first group holds only such keys loads it before pdl_wait
// (any split but a short last one), the others after it. A page being written belongs to one
// sequence; a hostile table that lends it to another may give that one the key's old value.
// Launch bounds: up to GROUP 4, 16 warps an SM (two blocks of 8), so at most 128 registers a thread;
// a larger group keeps its q and acc in registers at one block an SM instead of spilling.
extern "C" __global__ void __launch_bounds__(NWARPS * 32, GROUP > 4 || NWARPS >= 16 ? 1 : 16 / NWARPS)
paged_attn_decode(const float* __restrict__ Q, const kv_t* __restrict__ Kc, const kv_t* __restrict__ Vc,
                  const int* __restrict__ page_table, int max_pages, int n_pages, const int* __restrict__ seq_lens,
                  int early, float* __restrict__ part_o, float* __restrict__ part_ml,
                  unsigned* __restrict__ counts, float* __restrict__ out, int Hkv, int page_size, int split_len,
                  float scale_log2, int window) {
    __shared__ float s_acc[NWARPS][GROUP][HEAD_DIM];
    __shared__ float s_m[NWARPS][GROUP], s_l[NWARPS][GROUP];
    const int b = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z, S = gridDim.z;
    const int Hq = Hkv * GROUP;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int d0 = (lane % LPK) * 8;
    // a hostile length counts only what the table can hold: no block loops past its own split
    const int L = clamp_len(seq_lens[b], max_pages, page_size), lo = window > 0 ? max(L - window, 0) : 0;
    const int sl = split_keys(L - lo, split_len, S);
    const int n = L > lo ? (L - lo - 1) / sl + 1 : 1;       // splits that hold keys (an empty sequence: one)
    if (split >= n) return;                                 // an empty split: nothing to add
    const int start = lo + split * sl, end = min(start + sl, L);
    const int* pt = page_table + (size_t)b * max_pages;

    // The first group's page rows are looked up before pdl_wait, and its K/V load then too if all
    // its keys are an earlier step's (the same answer for the whole block).
    const bool first_early = early && start + NSLOT * UNROLL <= L - (int)gridDim.x;
    const int base0 = start + warp * KPW;
    int next[UNROLL];                                       // rows of the pool: n_pages * page_size < 2^31
    key_rows(next, base0, end, pt, page_size, max_pages, n_pages);
    Lane8 kr[UNROLL], vr[UNROLL];                           // a group's K/V, 8 values of each key
    if (first_early) {
#pragma unroll
        for (int u = 0; u < UNROLL; u++) load_kv(kr[u], vr[u], Kc, Vc, next[u], Hkv, kvh, d0);
    }
    pdl_wait();

    float q[GROUP][8], acc[GROUP][8], m[GROUP], l[GROUP];
#pragma unroll
    for (int gi = 0; gi < GROUP; gi++) {
        const float* qp = Q + ((size_t)b * Hq + kvh * GROUP + gi) * HEAD_DIM + d0;
        float4 a = *reinterpret_cast<const float4*>(qp), c = *reinterpret_cast<const float4*>(qp + 4);
        q[gi][0] = a.x * scale_log2; q[gi][1] = a.y * scale_log2; q[gi][2] = a.z * scale_log2; q[gi][3] = a.w * scale_log2;
        q[gi][4] = c.x * scale_log2; q[gi][5] = c.y * scale_log2; q[gi][6] = c.z * scale_log2; q[gi][7] = c.w * scale_log2;
        m[gi] = -INFINITY;
        l[gi] = 0.f;
#pragma unroll
        for (int i = 0; i < 8; i++) acc[gi][i] = 0.f;
    }

    // the loop bound is the same for every lane of a warp (shuffles need all 32)
    // The group loaded before the wait, peeled from the loop: carried into it, its registers would
    // stay live through every group and spill.
    int base = base0;
    if (first_early && base < end) {
        bool ok[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) ok[u] = base + u * NSLOT + lane / LPK < end;
        key_rows(next, base + NSLOT * UNROLL, end, pt, page_size, max_pages, n_pages);
        attend_group(kr, vr, ok, q, acc, m, l);
        base += NSLOT * UNROLL;
    }
    for (; base < end; base += NSLOT * UNROLL) {
        bool ok[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {                  // issue every load first
            ok[u] = base + u * NSLOT + lane / LPK < end;
            load_kv(kr[u], vr[u], Kc, Vc, next[u], Hkv, kvh, d0);
        }
        key_rows(next, base + NSLOT * UNROLL, end, pt, page_size, max_pages, n_pages);   // meanwhile
        attend_group(kr, vr, ok, q, acc, m, l);
    }
    // merge the KPW slots of each warp (shuffles), then the warps of the block (shared memory)
#pragma unroll
    for (int gi = 0; gi < GROUP; gi++) {
#pragma unroll
        for (int o = LPK; o < 32; o <<= 1) {
            float acc2[8];
#pragma unroll
            for (int i = 0; i < 8; i++) acc2[i] = __shfl_xor_sync(0xffffffffu, acc[gi][i], o);
            const float m2 = __shfl_xor_sync(0xffffffffu, m[gi], o), l2 = __shfl_xor_sync(0xffffffffu, l[gi], o);
            merge_state(m[gi], l[gi], acc[gi], m2, l2, acc2);
        }
        if (lane < LPK) {
#pragma unroll
            for (int i = 0; i < 8; i++) s_acc[warp][gi][d0 + i] = acc[gi][i];
        }
        if (lane == 0) { s_m[warp][gi] = m[gi]; s_l[warp][gi] = l[gi]; }
    }
    __syncthreads();
    const size_t total = (size_t)gridDim.x * Hq * HEAD_DIM, row0 = (size_t)b * Hq + kvh * GROUP;
    for (int idx = threadIdx.x; idx < GROUP * HEAD_DIM; idx += blockDim.x) {
        const int gi = idx / HEAD_DIM, d = idx % HEAD_DIM;
        float M = -INFINITY;
        for (int w = 0; w < NWARPS; w++) M = fmaxf(M, s_m[w][gi]);
        const float bias = M == -INFINITY ? 0.f : M;
        float lt = 0.f, ot = 0.f;
        for (int w = 0; w < NWARPS; w++) {
            const float wt = ex2(s_m[w][gi] - bias);         // empty warps: 2^-inf = 0
            lt += s_l[w][gi] * wt;
            ot += s_acc[w][gi][d] * wt;
        }
        const size_t row = row0 + gi;
        if (n == 1) {                                       // one split: finish here
            write_out(out, row * HEAD_DIM + d, lt > 0.f ? ot / lt : 0.f, total);
        } else {
            part_o[(row * S + split) * HEAD_DIM + d] = ot;
            if (d == 0) { part_ml[(row * S + split) * 2] = M; part_ml[(row * S + split) * 2 + 1] = lt; }
        }
    }
    if (n > 1 && last_to_finish(counts + (size_t)b * Hkv + kvh, n))
        merge_splits(part_o, part_ml, out, row0, S, n, total);
}
PDL_READY(paged_attn_decode);

// ---------------------------------------------------------------------------------------------
// Helpers for the runtime around the cache.
// kv_store: write this step's k, v (f32 [T, Hkv, D]) into the cache at flat slots
// slot[t] = page * page_size + offset (one block per token, a thread per element). A slot < 0 is
// a padding row of a bucketed batch, and one past the n_slots of the pages cannot be written:
// nothing is stored for either. kv_store writes an f16 cache (the GPU's
// pages), kv_store_f32 an f32 one (a dense cache, page_size 1).
template <typename C>
__device__ __forceinline__ void kv_store_rows(const float* __restrict__ k, const float* __restrict__ v,
                                             C* __restrict__ Kc, C* __restrict__ Vc,
                                             const int* __restrict__ slots, int row, int n_slots) {
    pdl_wait();
    const int tk = blockIdx.x, slot = slots[tk];
    if (slot < 0 || slot >= n_slots) return;
    const size_t dst = (size_t)slot * row;
    for (int i = threadIdx.x; i < row; i += blockDim.x) {
        Kc[dst + i] = (C)k[(size_t)tk * row + i];
        Vc[dst + i] = (C)v[(size_t)tk * row + i];
    }
}
extern "C" __global__ void kv_store(const float* __restrict__ k, const float* __restrict__ v,
                                    __half* __restrict__ Kc, __half* __restrict__ Vc,
                                    const int* __restrict__ slots, int row, int n_slots) {   // row = Hkv * D
    kv_store_rows<__half>(k, v, Kc, Vc, slots, row, n_slots);
}
PDL_READY(kv_store);
extern "C" __global__ void kv_store_f32(const float* __restrict__ k, const float* __restrict__ v,
                                        float* __restrict__ Kc, float* __restrict__ Vc,
                                        const int* __restrict__ slots, int row, int n_slots) {
    kv_store_rows<float>(k, v, Kc, Vc, slots, row, n_slots);
}
PDL_READY(kv_store_f32);
// kv_store_q8: the same rows into 8-bit pages, each row of `row` = Hkv * D values as row / 32 Q8_0
// blocks (34 bytes each, `store_q8_0_block`): a warp quantizes a block at a time, K's then V's.
extern "C" __global__ void kv_store_q8(const float* __restrict__ k, const float* __restrict__ v,
                                       unsigned char* __restrict__ Kc, unsigned char* __restrict__ Vc,
                                       const int* __restrict__ slots, int row, int n_slots) {
    pdl_wait();
    const int tk = blockIdx.x, slot = slots[tk], nb = row / 32;
    if (slot < 0 || slot >= n_slots) return;
    for (int j = threadIdx.x / WARP; j < 2 * nb; j += blockDim.x / WARP) {
        const bool is_k = j < nb;
        const int jb = is_k ? j : j - nb;
        store_q8_0_block((is_k ? k : v)[(size_t)tk * row + jb * 32 + threadIdx.x % WARP],
                         (is_k ? Kc : Vc) + ((size_t)slot * nb + jb) * 34);
    }
}
PDL_READY(kv_store_q8);

// gather_kv: a sequence's first L tokens out of the pages into contiguous f16 [L, Hkv, D]
// (prefill over a cached prefix: gather, then flash_attn_fwd with Lk = L); a token with no page
// (`page_row`) gathers zeros.
extern "C" __global__ void gather_kv(const __half* __restrict__ Kc, const __half* __restrict__ Vc,
                                     const int* __restrict__ page_table, __half* __restrict__ k,
                                     __half* __restrict__ v, int page_size, int row, int max_pages, int n_pages) {
    pdl_wait();
    const int tk = blockIdx.x;
    const long pr = page_row(page_table, tk, page_size, max_pages, n_pages);
    for (int i = threadIdx.x; i < row; i += blockDim.x) {
        k[(size_t)tk * row + i] = pr < 0 ? __float2half(0.f) : Kc[(size_t)pr * row + i];
        v[(size_t)tk * row + i] = pr < 0 ? __float2half(0.f) : Vc[(size_t)pr * row + i];
    }
}
PDL_READY(gather_kv);

// kv_dequant_pages: 8-bit pages back to f16 for the prefill kernels, which read f16 pages (chapter 12's
// flash, its TMA boxes included). Entry i of a step's tables (B * max_pages of them) names a page
// (-1 or an id outside the pool: none); block i writes that page, as f16, at page i of a pool of
// B * max_pages pages, and entry i of `tables16` says where (i, or -1): the flash kernels read that
// pool through tables16, so the pool is the step's size, not the cache's. page_blocks: the Q8_0
// blocks of one page (page_size * Hkv * D / 32).
extern "C" __global__ void kv_dequant_pages(const unsigned char* __restrict__ Kq, const unsigned char* __restrict__ Vq,
                                            const int* __restrict__ tables, __half* __restrict__ K16,
                                            __half* __restrict__ V16, int* __restrict__ tables16, int page_blocks,
                                            int n_pages) {
    pdl_wait();
    const int i = blockIdx.x, pid = tables[i], lane = threadIdx.x % WARP;
    const bool some = pid >= 0 && pid < n_pages;
    if (threadIdx.x == 0) tables16[i] = some ? i : -1;
    if (!some) return;
    for (int j = threadIdx.x / WARP; j < 2 * page_blocks; j += blockDim.x / WARP) {
        const bool is_k = j < page_blocks;
        const int jb = is_k ? j : j - page_blocks;
        const unsigned char* src = (is_k ? Kq : Vq) + ((size_t)pid * page_blocks + jb) * 34;
        const float d = __half2float(*reinterpret_cast<const __half*>(src));
        (is_k ? K16 : V16)[((size_t)i * page_blocks + jb) * 32 + lane] = __float2half_rn(d * (float)(signed char)src[2 + lane]);
    }
}
PDL_READY(kv_dequant_pages);

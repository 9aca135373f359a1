// flash_attn.cu: attention for prefill (chapter 12).
//   O[q, h, :] = softmax_k( Q[q, h, :] . K[k, kvh, :] * scale  (+ causal mask) ) @ V[k, kvh, :]
// Layout: Q [B?, Lq, Hq, D], K and V [B?, Lk, Hkv, D] (f16, head dim contiguous), O [B?, Lq, Hq, D].
// GQA: query head h reads kv head h / (Hq / Hkv); K and V are never repeated in memory.
// Causal with Lk >= Lq: query i sits at position i + (Lk - Lq) and sees keys 0 .. i + (Lk - Lq)
// (a prefill continuing after Lk - Lq cached tokens). A sliding window (causal, window > 0): it sees
// only the last `window` of them, keys i + offs - window + 1 .. i + offs, and tiles before a block's
// first visible key are never loaded (in the pages they may be gone).
// PAGED = 1 (v2, v3): a whole step of many sequences in one launch, nothing read back to the host.
// Q and O are the step's rows [N, Hq, D]: sequence b owns rows cu[b] .. cu[b+1] (the last ones of
// its lens[b] tokens); its K and V stay in the cache's pages [P, ps, Hkv, D], read through its row
// of the page table [B, max_pages].  The grid covers N rows for every b; the blocks past a
// sequence's rows return at once.  So the launch depends on shapes only (a CUDA graph can hold it).
// Nothing in the tables is trusted: rows are clamped to the step's N, lengths to the table's
// max_pages * ps, and a page id outside the pool of n_pages reads zeros (`page_row`).
#include "common.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#ifndef NWARPS
#define NWARPS 4            // warps per block; each warp owns 16 query rows
#endif
#ifndef BC
#define BC 64               // keys per K/V tile
#endif
#ifndef MINB
#define MINB 1              // blocks per SM the register allocation must allow (__launch_bounds__)
#endif
#ifndef GRID_HQ
#define GRID_HQ 0           // 1: grid (Hq, q-blocks, B): every head's longest causal blocks start first
#endif
#ifndef PAGED
#define PAGED 0
#endif
#ifndef KV2
#define KV2 0               // v3: 1 = two K/V buffers, tile j+1 loads during all of tile j (one barrier)
#endif
#ifdef OUT_F16
typedef __half out_t;
#else
typedef float out_t;
#endif
#define BR (16 * NWARPS)    // query rows per block
#define LDS (HEAD_DIM + 8)  // shared-memory row length in halves: +16 bytes of padding, so the 8
                            // rows an ldmatrix phase reads start in 8 different bank groups

// ---------------------------------------------------------------------------------------------
// v1: the textbook kernel. One block per (query row, head): all Lk scores of the row go to shared
// memory (Lk <= ~12k), then max, exp, sum, and the weighted sum of V with a thread per output dim.
// Reads K and V once per QUERY ROW: Lq times more traffic than needed. fp32 math, no tensor cores.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void attn_naive(const __half* __restrict__ Q, const __half* __restrict__ K,
                                      const __half* __restrict__ V, out_t* __restrict__ O,
                                      int Lq, int Lk, int Hq, int Hkv, float scale, int causal, int window) {
    extern __shared__ float sc[];          // Lk scores, then HEAD_DIM floats of q
    __shared__ float red[32];
    const int qi = blockIdx.x, h = blockIdx.y, kvh = h / (Hq / Hkv);
    float* qs = sc + Lk;
    for (int d = threadIdx.x; d < HEAD_DIM; d += blockDim.x)
        qs[d] = __half2float(Q[((size_t)qi * Hq + h) * HEAD_DIM + d]);
    __syncthreads();
    const int last = causal ? qi + (Lk - Lq) : Lk - 1;
    const int first = causal && window > 0 ? max(last - window + 1, 0) : 0;
    float mx = -INFINITY;
    for (int k = threadIdx.x; k < Lk; k += blockDim.x) {
        const __half* kr = K + ((size_t)k * Hkv + kvh) * HEAD_DIM;
        float s = 0.f;
        for (int d = 0; d < HEAD_DIM; d++) s += qs[d] * __half2float(kr[d]);
        s = k <= last && k >= first ? s * scale : -INFINITY;
        sc[k] = s;
        mx = fmaxf(mx, s);
    }
    mx = block_max(mx, red);
    float sum = 0.f;
    for (int k = threadIdx.x; k < Lk; k += blockDim.x) { float p = __expf(sc[k] - mx); sc[k] = p; sum += p; }
    sum = block_sum(sum, red);             // its barriers also publish sc[]
    for (int d = threadIdx.x; d < HEAD_DIM; d += blockDim.x) {
        float o = 0.f;
        for (int k = first; k <= min(last, Lk - 1); k++) o += sc[k] * __half2float(V[((size_t)k * Hkv + kvh) * HEAD_DIM + d]);
        O[((size_t)qi * Hq + h) * HEAD_DIM + d] = (out_t)(o / sum);
    }
}

// The flash kernels take head dims that are multiples of 16 up to 128 (`flash_head_dim_ok`). A
// build for another head dim (attn_naive's) leaves them out: their tiles would not even compile.
#if HEAD_DIM % 16 == 0 && HEAD_DIM <= 128
// ---------------------------------------------------------------------------------------------
// v2: flash attention (Dao et al. 2022; the FlashAttention-2 work split) on the tensor cores.
// ---------------------------------------------------------------------------------------------

__device__ __forceinline__ void ldmatrix_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const void* p) {
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const void* p) {
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(s));
}
// D (16x8 f32) += A (16x16 f16, row) * B (16x8 f16, col)
__device__ __forceinline__ void mma16816(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Row r of one head of Q, K or V: rows `stride` halves apart, or (a page table) K/V row r of a
// sequence at slot tab[r / ps] * ps + r % ps of the page pool; null where that page is none.
struct Rows {
    const __half* base;          // row 0's address (the head's offset included)
    int stride;
    const int* tab;              // null: contiguous rows
    int ps, max_pages, n_pages;
    __device__ __forceinline__ const __half* row(int r) const {
        if (!tab) return base + (size_t)r * stride;
        const long pr = page_row(tab, r, ps, max_pages, n_pages);
        return pr < 0 ? nullptr : base + (size_t)pr * stride;
    }
};

// Copy keys [key0, key0 + BC) of one kv head into a padded smem tile with 16-byte cp.async;
// rows past Lk are zero-filled (src-size 0), so padding never injects NaN into P @ V.
__device__ __forceinline__ void load_tile(__half* dst, const Rows& src, int key0, int Lk) {
    constexpr int CH = HEAD_DIM / 8;                        // 16-byte chunks per row
    for (int i = threadIdx.x; i < BC * CH; i += NWARPS * 32) {
        const int r = i / CH, c = (i % CH) * 8, key = key0 + r;
#if PAGED
        const __half* p = key < Lk ? src.row(key) : nullptr;   // null: no such page
        cp_async16(dst + r * LDS + c, (p ? p : src.base) + c, p ? 16 : 0);
#else
        const bool ok = key < Lk;
        cp_async16(dst + r * LDS + c, src.row(ok ? key : 0) + c, ok ? 16 : 0);
#endif
    }
}

// The block's sequence: its rows of Q/O (q_off), its query count Lq and key count Lk, and its K/V
// rows for kv head kvh.  Returns false when the block has no rows of it (PAGED only).
__device__ __forceinline__ bool block_seq(int b, int q0, int kvh, int Hq, int Hkv, long q_bstride, long kv_bstride,
                                          const __half* K, const __half* V, const int* cu, const int* lens,
                                          const int* table, int ps, int max_pages, int n_pages,
                                          int& Lq, int& Lk, size_t& q_off, Rows& Kr, Rows& Vr) {
    const int kstride = Hkv * HEAD_DIM;
#if PAGED
    const int lo = min(max(cu[b], 0), Lq), hi = min(max(cu[b + 1], lo), Lq);   // Lq: the step's N rows,
    Lq = hi - lo;                                                            // Lk: the table's max_pages * ps
    Lk = min(max(lens[b], 0), Lk);
    q_off = (size_t)lo * Hq * HEAD_DIM;
    const int* tab = table + (size_t)b * max_pages;
    Kr = Rows{K + (size_t)kvh * HEAD_DIM, kstride, tab, ps, max_pages, n_pages};
    Vr = Rows{V + (size_t)kvh * HEAD_DIM, kstride, tab, ps, max_pages, n_pages};
    return q0 < Lq;
#else
    q_off = (size_t)b * q_bstride;
    Kr = Rows{K + b * kv_bstride + (size_t)kvh * HEAD_DIM, kstride, nullptr, 1, 0, 0};
    Vr = Rows{V + b * kv_bstride + (size_t)kvh * HEAD_DIM, kstride, nullptr, 1, 0, 0};
    return true;
#endif
}

// The first K/V tile a block whose first query row is q0 reads: tile 0, or with a sliding window the
// one holding that row's oldest visible key (later rows of the block see later keys).
__device__ __forceinline__ int first_tile(int q0, int offs, int causal, int window) {
    return causal && window > 0 ? max(q0 + offs - window + 1, 0) / BC : 0;
}

// Grid: (ceil(Lq / BR), Hq, B); block: NWARPS warps. Warp w owns query rows q0 + 16w .. +15.
// Per thread (lane = 4*g + t): rows g and g+8 of the warp's 16, columns 2t, 2t+1 of each n-tile
// of 8 — the accumulator layout of mma.m16n8k16.
extern "C" __global__ void __launch_bounds__(NWARPS * 32, MINB)
flash_attn_fwd(const __half* __restrict__ Q, const __half* __restrict__ K, const __half* __restrict__ V,
               out_t* __restrict__ O, int Lq, int Lk, int Hq, int Hkv, float scale_log2, int causal,
               long q_bstride, long kv_bstride, const int* __restrict__ cu, const int* __restrict__ lens,
               const int* __restrict__ table, int ps, int max_pages, int n_pages, int window) {
    pdl_wait();
    __shared__ __align__(16) __half sK[BC * LDS];
    __shared__ __align__(16) __half sV[BC * LDS];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int qb, h;
    causal_block<GRID_HQ>(qb, h);                          // the longest causal blocks first
    const int b = blockIdx.z, kvh = h / (Hq / Hkv);
    const int q0 = qb * BR, qw = q0 + warp * 16;           // first row of the block / of this warp
    size_t q_off;
    Rows Kb, Vb;
    if (!block_seq(b, q0, kvh, Hq, Hkv, q_bstride, kv_bstride, K, V, cu, lens, table, ps, max_pages,
                   n_pages, Lq, Lk, q_off, Kb, Vb))
        return;
    const int offs = Lk - Lq;                              // causal: query i sits at position i + offs
    const int qstride = Hq * HEAD_DIM;
    const __half* Qb = Q + q_off + (size_t)h * HEAD_DIM;

    // Q fragments stay in registers for the whole kernel: D/16 k-chunks of the A operand.
    unsigned qf[HEAD_DIM / 16][4];
    {
        const int r0 = qw + g, r1 = qw + g + 8;
        const unsigned* p0 = reinterpret_cast<const unsigned*>(Qb + (size_t)min(r0, Lq - 1) * qstride);
        const unsigned* p1 = reinterpret_cast<const unsigned*>(Qb + (size_t)min(r1, Lq - 1) * qstride);
#pragma unroll
        for (int kc = 0; kc < HEAD_DIM / 16; kc++) {
            qf[kc][0] = r0 < Lq ? p0[kc * 8 + t] : 0u;
            qf[kc][1] = r1 < Lq ? p1[kc * 8 + t] : 0u;
            qf[kc][2] = r0 < Lq ? p0[kc * 8 + 4 + t] : 0u;
            qf[kc][3] = r1 < Lq ? p1[kc * 8 + 4 + t] : 0u;
        }
    }
    float o[HEAD_DIM / 8][4];
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;   // rows g and g+8 (l: this thread's part)

    const int last_key = causal ? min(Lk - 1, q0 + BR - 1 + offs) : Lk - 1;
    const int ntiles = last_key / BC + 1, j0 = first_tile(q0, offs, causal, window);
    const int win = causal ? window : 0;

    load_tile(sK, Kb, j0 * BC, Lk);
    cp_async_commit();
    for (int j = j0; j < ntiles; j++) {
        const int key0 = j * BC;
        load_tile(sV, Vb, key0, Lk);
        cp_async_commit();
        cp_async_wait<1>();                                 // K tile j has landed
        __syncthreads();

        // S = Q K^T : 16 x BC per warp, BC/8 n-tiles of 4 floats per thread
        float s[BC / 8][4];
#pragma unroll
        for (int i = 0; i < BC / 8; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
        for (int kc = 0; kc < HEAD_DIM / 16; kc++) {
#pragma unroll
            for (int np = 0; np < BC / 16; np++) {
                unsigned b0, b1, b2, b3;
                const int key = np * 16 + (lane % 8) + (lane / 16) * 8, dim = kc * 16 + ((lane / 8) % 2) * 8;
                ldmatrix_x4(b0, b1, b2, b3, sK + key * LDS + dim);
                mma16816(s[2 * np], qf[kc], b0, b1);
                mma16816(s[2 * np + 1], qf[kc], b2, b3);
            }
        }
        // mask: only tiles that cross the diagonal, the end of the keys or a window's start need it
        const bool need_mask = key0 + BC > Lk || (causal && key0 + BC - 1 > qw + offs)
                               || (win > 0 && key0 <= qw + 15 + offs - win);
        if (need_mask) {
#pragma unroll
            for (int nt = 0; nt < BC / 8; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int key = key0 + nt * 8 + 2 * t + (i & 1), q = qw + g + (i >= 2 ? 8 : 0);
                    if (key >= Lk || (causal && key > q + offs) || (win > 0 && key <= q + offs - win))
                        s[nt][i] = -INFINITY;
                }
        }
        // online softmax, base 2 (scale_log2 = scale * log2(e))
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < BC / 8; nt++) {
            mx0 = fmaxf(mx0, fmaxf(s[nt][0], s[nt][1]));
            mx1 = fmaxf(mx1, fmaxf(s[nt][2], s[nt][3]));
        }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        const float mn0 = fmaxf(m0, mx0 * scale_log2), mn1 = fmaxf(m1, mx1 * scale_log2);
        const float b0_ = mn0 == -INFINITY ? 0.f : mn0, b1_ = mn1 == -INFINITY ? 0.f : mn1;  // fully masked rows
        const float c0 = ex2(m0 - b0_), c1 = ex2(m1 - b1_);
        m0 = mn0;
        m1 = mn1;
        float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
        for (int nt = 0; nt < BC / 8; nt++) {                // one FFMA + one MUFU.EX2 per score
            s[nt][0] = ex2(fmaf(s[nt][0], scale_log2, -b0_));
            s[nt][1] = ex2(fmaf(s[nt][1], scale_log2, -b0_));
            s[nt][2] = ex2(fmaf(s[nt][2], scale_log2, -b1_));
            s[nt][3] = ex2(fmaf(s[nt][3], scale_log2, -b1_));
            rs0 += s[nt][0] + s[nt][1];
            rs1 += s[nt][2] + s[nt][3];
        }
        l0 = l0 * c0 + rs0;
        l1 = l1 * c1 + rs1;
#pragma unroll
        for (int dt = 0; dt < HEAD_DIM / 8; dt++) {
            o[dt][0] *= c0; o[dt][1] *= c0;
            o[dt][2] *= c1; o[dt][3] *= c1;
        }

        cp_async_wait<0>();                                 // V tile j has landed ...
        __syncthreads();                                    // ... and every warp is done with sK
        if (j + 1 < ntiles) load_tile(sK, Kb, key0 + BC, Lk);
        cp_async_commit();

        // O += P V : P's accumulator layout is exactly the A-operand layout (two n-tiles = one k16)
#pragma unroll
        for (int kk = 0; kk < BC / 16; kk++) {
            unsigned pa[4] = {pack_half2(s[2 * kk][0], s[2 * kk][1]), pack_half2(s[2 * kk][2], s[2 * kk][3]),
                              pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int dp = 0; dp < HEAD_DIM / 16; dp++) {
                unsigned v0, v1, v2, v3;
                const int key = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8, dim = dp * 16 + (lane / 16) * 8;
                ldmatrix_x4_trans(v0, v1, v2, v3, sV + key * LDS + dim);
                mma16816(o[2 * dp], pa, v0, v1);
                mma16816(o[2 * dp + 1], pa, v2, v3);
            }
        }
        __syncthreads();                                    // every warp is done with sV
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float i0 = l0 > 0.f ? 1.f / l0 : 0.f, i1 = l1 > 0.f ? 1.f / l1 : 0.f;
    const int r0 = qw + g, r1 = qw + g + 8;
    out_t* Ob = O + q_off + (size_t)h * HEAD_DIM;
#pragma unroll
    for (int dt = 0; dt < HEAD_DIM / 8; dt++) {
        const int d = dt * 8 + 2 * t;
        if (r0 < Lq) { Ob[(size_t)r0 * qstride + d] = (out_t)(o[dt][0] * i0); Ob[(size_t)r0 * qstride + d + 1] = (out_t)(o[dt][1] * i0); }
        if (r1 < Lq) { Ob[(size_t)r1 * qstride + d] = (out_t)(o[dt][2] * i1); Ob[(size_t)r1 * qstride + d + 1] = (out_t)(o[dt][3] * i1); }
    }
}
PDL_READY(flash_attn_fwd);

// ---------------------------------------------------------------------------------------------
// v3: as v2, but each warp owns 2 m-tiles (32 query rows), as FlashAttention-2 does. Every K and
// V fragment a warp pulls out of shared memory with ldmatrix now feeds two mma instead of one:
// half the shared-memory traffic per FLOP, and two independent accumulator chains per fragment.
// The registers that buys (o: 128 floats, s: 64) come from Q: its fragments are re-read from a
// shared-memory tile at every k-chunk instead of living in registers. Q + K + V tiles exceed
// 48 KB, so shared memory is dynamic (the launcher raises the limit).
// ---------------------------------------------------------------------------------------------
#define MT 2
#define BR3 (16 * MT * NWARPS)

__device__ __forceinline__ void load_rows(__half* dst, const Rows& src, int row0, int nvalid, int nrows) {
    constexpr int CH = HEAD_DIM / 8;
    for (int i = threadIdx.x; i < nrows * CH; i += NWARPS * 32) {
        const int r = i / CH, c = (i % CH) * 8, row = row0 + r;
#if PAGED
        const __half* p = row < nvalid ? src.row(row) : nullptr;   // null: no such page
        cp_async16(dst + r * LDS + c, (p ? p : src.base) + c, p ? 16 : 0);
#else
        const bool ok = row < nvalid;
        cp_async16(dst + r * LDS + c, src.row(ok ? row : 0) + c, ok ? 16 : 0);
#endif
    }
}

extern "C" __global__ void __launch_bounds__(NWARPS * 32, 1)
flash_attn_fwd_v3(const __half* __restrict__ Q, const __half* __restrict__ K, const __half* __restrict__ V,
                  out_t* __restrict__ O, int Lq, int Lk, int Hq, int Hkv, float scale_log2, int causal,
                  long q_bstride, long kv_bstride, const int* __restrict__ cu, const int* __restrict__ lens,
                  const int* __restrict__ table, int ps, int max_pages, int n_pages, int window) {
    pdl_wait();
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __half* sQ = reinterpret_cast<__half*>(smem_raw);   // [BR3][LDS]
    __half* sK = sQ + BR3 * LDS;                         // [KV2 + 1][BC][LDS]
    __half* sV = sK + (KV2 + 1) * BC * LDS;              // [KV2 + 1][BC][LDS]
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int qb, h;
    causal_block<GRID_HQ>(qb, h);
    const int b = blockIdx.z, kvh = h / (Hq / Hkv);
    const int q0 = qb * BR3, qw = q0 + warp * 16 * MT;
    size_t q_off;
    Rows Kb, Vb;
    if (!block_seq(b, q0, kvh, Hq, Hkv, q_bstride, kv_bstride, K, V, cu, lens, table, ps, max_pages,
                   n_pages, Lq, Lk, q_off, Kb, Vb))
        return;
    const int offs = Lk - Lq;
    const int qstride = Hq * HEAD_DIM;
    const __half* Qb = Q + q_off + (size_t)h * HEAD_DIM;

    float o[MT][HEAD_DIM / 8][4];
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int i = 0; i < HEAD_DIM / 8; i++) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.f;
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.f;
    }
    const int last_key = causal ? min(Lk - 1, q0 + BR3 - 1 + offs) : Lk - 1;
    const int ntiles = last_key / BC + 1, j0 = first_tile(q0, offs, causal, window);
    const int win = causal ? window : 0;

    load_rows(sQ, Rows{Qb, qstride, nullptr, 1}, q0, Lq, BR3);
    cp_async_commit();
    load_rows(sK, Kb, j0 * BC, Lk, BC);
#if KV2
    load_rows(sV, Vb, j0 * BC, Lk, BC);
#endif
    cp_async_commit();
    for (int j = j0; j < ntiles; j++) {
        const int key0 = j * BC;
#if KV2
        // Two buffers each for K and V: wait for tile j, then (after the one barrier, which also says
        // every warp is done with tile j-1's buffers) start tile j+1's copies into those buffers.
        const __half* cK = sK + ((j - j0) & 1) * BC * LDS;
        const __half* cV = sV + ((j - j0) & 1) * BC * LDS;
        cp_async_wait<0>();
        __syncthreads();
        if (j + 1 < ntiles) {
            load_rows(sK + ((j + 1 - j0) & 1) * BC * LDS, Kb, key0 + BC, Lk, BC);
            load_rows(sV + ((j + 1 - j0) & 1) * BC * LDS, Vb, key0 + BC, Lk, BC);
        }
        cp_async_commit();
#else
        const __half* cK = sK;
        const __half* cV = sV;
        load_rows(sV, Vb, key0, Lk, BC);
        cp_async_commit();
        cp_async_wait<1>();                                 // Q (first time) and K tile j have landed
        __syncthreads();
#endif

        float s[MT][BC / 8][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int i = 0; i < BC / 8; i++) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
#pragma unroll
        for (int kc = 0; kc < HEAD_DIM / 16; kc++) {
            unsigned qa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                ldmatrix_x4(qa[mt][0], qa[mt][1], qa[mt][2], qa[mt][3],
                            sQ + (warp * 16 * MT + mt * 16 + (lane % 16)) * LDS + kc * 16 + (lane / 16) * 8);
#pragma unroll
            for (int np = 0; np < BC / 16; np++) {
                unsigned b0, b1, b2, b3;
                const int key = np * 16 + (lane % 8) + (lane / 16) * 8, dim = kc * 16 + ((lane / 8) % 2) * 8;
                ldmatrix_x4(b0, b1, b2, b3, cK + key * LDS + dim);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mma16816(s[mt][2 * np], qa[mt], b0, b1);
                    mma16816(s[mt][2 * np + 1], qa[mt], b2, b3);
                }
            }
        }
        const bool need_mask = key0 + BC > Lk || (causal && key0 + BC - 1 > qw + offs)
                               || (win > 0 && key0 <= qw + 16 * MT - 1 + offs - win);
        if (need_mask) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < BC / 8; nt++)
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const int key = key0 + nt * 8 + 2 * t + (i & 1), q = qw + mt * 16 + g + (i >= 2 ? 8 : 0);
                        if (key >= Lk || (causal && key > q + offs) || (win > 0 && key <= q + offs - win))
                            s[mt][nt][i] = -INFINITY;
                    }
        }
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < BC / 8; nt++) {
                mx0 = fmaxf(mx0, fmaxf(s[mt][nt][0], s[mt][nt][1]));
                mx1 = fmaxf(mx1, fmaxf(s[mt][nt][2], s[mt][nt][3]));
            }
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
            const float mn0 = fmaxf(m[mt][0], mx0 * scale_log2), mn1 = fmaxf(m[mt][1], mx1 * scale_log2);
            const float b0_ = mn0 == -INFINITY ? 0.f : mn0, b1_ = mn1 == -INFINITY ? 0.f : mn1;
            const float c0 = ex2(m[mt][0] - b0_), c1 = ex2(m[mt][1] - b1_);
            m[mt][0] = mn0;
            m[mt][1] = mn1;
            float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
            for (int nt = 0; nt < BC / 8; nt++) {
                s[mt][nt][0] = ex2(fmaf(s[mt][nt][0], scale_log2, -b0_));
                s[mt][nt][1] = ex2(fmaf(s[mt][nt][1], scale_log2, -b0_));
                s[mt][nt][2] = ex2(fmaf(s[mt][nt][2], scale_log2, -b1_));
                s[mt][nt][3] = ex2(fmaf(s[mt][nt][3], scale_log2, -b1_));
                rs0 += s[mt][nt][0] + s[mt][nt][1];
                rs1 += s[mt][nt][2] + s[mt][nt][3];
            }
            l[mt][0] = l[mt][0] * c0 + rs0;
            l[mt][1] = l[mt][1] * c1 + rs1;
#pragma unroll
            for (int dt = 0; dt < HEAD_DIM / 8; dt++) {
                o[mt][dt][0] *= c0; o[mt][dt][1] *= c0;
                o[mt][dt][2] *= c1; o[mt][dt][3] *= c1;
            }
        }

#if !KV2
        cp_async_wait<0>();
        __syncthreads();
        if (j + 1 < ntiles) load_rows(sK, Kb, key0 + BC, Lk, BC);
        cp_async_commit();
#endif

#pragma unroll
        for (int kk = 0; kk < BC / 16; kk++) {
            unsigned pa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                pa[mt][0] = pack_half2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                pa[mt][1] = pack_half2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                pa[mt][2] = pack_half2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                pa[mt][3] = pack_half2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < HEAD_DIM / 16; dp++) {
                unsigned v0, v1, v2, v3;
                const int key = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8, dim = dp * 16 + (lane / 16) * 8;
                ldmatrix_x4_trans(v0, v1, v2, v3, cV + key * LDS + dim);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mma16816(o[mt][2 * dp], pa[mt], v0, v1);
                    mma16816(o[mt][2 * dp + 1], pa[mt], v2, v3);
                }
            }
        }
#if !KV2
        __syncthreads();
#endif
    }
    out_t* Ob = O + q_off + (size_t)h * HEAD_DIM;
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        float l0 = l[mt][0], l1 = l[mt][1];
        l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
        l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
        l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
        l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
        const float i0 = l0 > 0.f ? 1.f / l0 : 0.f, i1 = l1 > 0.f ? 1.f / l1 : 0.f;
        const int r0 = qw + mt * 16 + g, r1 = r0 + 8;
#pragma unroll
        for (int dt = 0; dt < HEAD_DIM / 8; dt++) {
            const int d = dt * 8 + 2 * t;
            if (r0 < Lq) { Ob[(size_t)r0 * qstride + d] = (out_t)(o[mt][dt][0] * i0); Ob[(size_t)r0 * qstride + d + 1] = (out_t)(o[mt][dt][1] * i0); }
            if (r1 < Lq) { Ob[(size_t)r1 * qstride + d] = (out_t)(o[mt][dt][2] * i1); Ob[(size_t)r1 * qstride + d + 1] = (out_t)(o[mt][dt][3] * i1); }
        }
    }
}
PDL_READY(flash_attn_fwd_v3);
#endif  // the flash kernels' head dims

// Chapter 12, version 4: flash attention on Hopper's instructions (wgmma, TMA, mbarriers).
//   O[q, h, :] = softmax_k( Q[q, h, :] . K[k, kvh, :] * scale  (+ causal mask) ) @ V[k, kvh, :]
// Layout as version 3 (flash_attn.cu): Q [B, Lq, Hq, D], K and V [B, Lk, Hkv, D] f16 (head dim
// contiguous), O [B, Lq, Hq, D] f32; GQA: query head h reads kv head h / (Hq / Hkv); causal with
// Lk >= Lq puts query i at position i + (Lk - Lq).
//
// Version 3 multiplies with mma.sync, one warp at a time, and loads each tile with every thread's
// cp.async.  Here, per block of 128 query rows of one head (384 threads):
//   * a producer warpgroup: one thread issues TMA copies (Q once; per 64-key tile the K and V
//     boxes, both in the 128-byte swizzle), all 128 threads transpose each V tile in shared memory
//     (ldmatrix.trans, then stmatrix: V^T is what wgmma's B operand wants, head dim x keys, K-major);
//     it keeps 64 registers a thread and gives the rest to the consumers (setmaxnreg: 216 each);
//   * two consumer warpgroups, 64 query rows each: S = Q K^T with both operands in shared memory
//     (wgmma m64n64k16, 8 of them over the head dim), the online softmax in registers as in
//     version 3, then O += P V with P straight from the registers (the accumulator layout of S is
//     the A fragment layout: wgmma m64n128k16, 4 of them over the 64 keys);
//   * a ring of STAGES (K, V, V^T) tiles with mbarriers: K full/empty, V full (TMA), V^T full/empty;
//   * OVERLAP: tile j's scores are on the tensor cores together with tile j-1's P V, and tile j's
//     softmax runs while that P V finishes (FlashAttention-3's overlap within a warpgroup).
//   * VT = 0: no V^T at all.  For 16-bit types wgmma also takes its B operand
//     MN-major (the instruction's transpose bit), so P V reads V's TMA tile as it lands: the
//     producer only issues copies (24 registers a thread: the consumers get 240), the V slot is
//     freed by the P V that read it (so the K copies run a tile ahead of the V copies: a K slot is
//     free a step earlier), and without the V^T ring up to 6 stages fit;
//   * BN = 128 (VT = 0 only): tiles of 128 keys.  An m64n64k16 with both operands in
//     shared memory reads 4 KB in its 32 cycles, all of shared memory's 128 bytes a cycle; m64n128k16
//     reads 6 KB in 64.  Per key the tile's fixed costs (barriers, waits, the row max's shuffles,
//     O's rescale) halve too.  At head dim 128 two or three stages fit;
//   * PINGPONG = 1 (with OVERLAP): the two consumer warpgroups take turns to issue
//     their products (FlashAttention-3's ping-pong, two named barriers), so that one warpgroup's
//     softmax runs while the other's products hold the tensor cores, instead of both at once.
// VT = 0, BN = 128, STAGES = 2, PINGPONG = 1 is the default on sm_90 (FLASH_HOPPER in
// cuda_attention.py): the speed of torch's SDPA at 2048 and 4096 tokens on the H200.
// PAGED = 1: a whole step of many sequences in one launch, as version 3's PAGED mode: Q and O are the
// step's rows [N, Hq, D] (sequence b owns rows cu[b] .. cu[b+1]), K and V the cache's pages
// [P, ps, Hkv, D] read through the sequence's row of the page table, one TMA box per page of a tile
// (ps = 8, 16, 32 or 64: whole swizzle atoms); a missing page (-1, or an id outside the pool of
// n_pages) arrives as zeros, rows are clamped to the step's N and lengths to the table.  HEAD_DIM 64 or 128.
#include "common.cuh"
#include "wgmma.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef OVERLAP
#define OVERLAP 1                     // 1: tile j's Q K^T runs with tile j-1's P V (FlashAttention-3's
                                      // overlap within a warpgroup); 0: one tile at a time
#endif
#ifndef PAGED
#define PAGED 0                       // 1: a step of many sequences over the cache's pages (as version 3's PAGED)
#endif
#ifndef VT
#define VT 1                          // 1: P V reads V^T, transposed by the producer warpgroup; 0: P V reads
                                      // V's TMA tile as it lands (wgmma's MN-major B: no transpose, no V^T)
#endif
#ifndef PINGPONG
#define PINGPONG 0                    // 1: the consumer warpgroups take turns issuing their products
#endif
#ifndef GRID_HQ
#define GRID_HQ 0                     // 1: grid (Hq, q-blocks, B), heads fastest: the first wave holds every
#endif                                // head's longest causal blocks, not all blocks of the first heads
#ifndef VT_LBO
#define VT_LBO KV_SUB                 // VT = 0: the MN-major descriptor's bytes between 64-wide head-dim slices
#endif
#ifndef VT_SBO
#define VT_SBO 1024                   // ... and between groups of 8 keys (one swizzle atom)
#endif
#define BM 128                        // query rows per block: 2 consumer warpgroups x 64
#ifndef BN
#define BN 64                         // keys per tile: one 128-byte row of V^T; 128 with VT = 0
#endif
#define DSUB (HEAD_DIM / 64)          // 64-wide slices of the head dim (one swizzled row each)
#define Q_SUB (BM * 128)              // bytes of one slice of the Q tile
#define KV_SUB (BN * 128)             // bytes of one slice of a K or V tile
#define KV_TILE (DSUB * KV_SUB)       // bytes of a K, V or V^T tile
#define NCONS 256
static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "HEAD_DIM is 64 or 128");
static_assert(BN == 64 || (BN == 128 && !VT), "BN is 64, or 128 without V^T (a V^T row is 64 keys)");
static_assert(!PINGPONG || OVERLAP, "the ping-pong orders the overlapped loop's turns");
#define PRODUCER_REGS (VT ? 64 : 24)  // the transpose needs registers, TMA alone next to none ...
#define CONSUMER_REGS (VT ? 216 : 240)  // ... and the consumers take the rest: 128 x 64 + 256 x 216 <= 64K

__device__ __forceinline__ void ldsm_x4_trans(uint32_t* r, uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void stsm_x4(uint32_t addr, const uint32_t* r) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n"
                 ::"r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
}
__device__ __forceinline__ void bar_sync_producers() { asm volatile("bar.sync 2, 128;\n" ::: "memory"); }
// The ping-pong's turns: named barrier 3 + wg completes when warpgroup wg waits on it and the
// other warpgroup has arrived (256 threads): "your turn".
__device__ __forceinline__ void turn_wait(int wg) { asm volatile("bar.sync %0, 256;\n" ::"r"(3 + wg) : "memory"); }
__device__ __forceinline__ void turn_pass(int wg) { asm volatile("bar.arrive %0, 256;\n" ::"r"(4 - wg) : "memory"); }

// V tile (keys x head dim, TMA's swizzled slices) -> V^T (head dim x keys: HEAD_DIM rows of 64
// keys, swizzled): 8x8 blocks, four per ldmatrix.trans / stmatrix pair.  Lanes 8m .. 8m+7 name the
// rows of block m: key rows of V on the way in, head-dim rows of V^T on the way out.
__device__ __forceinline__ void transpose_v(const unsigned char* v, unsigned char* vt, int ptid) {
    const int pw = ptid >> 5, lane = ptid & 31, m = lane >> 3, rr = lane & 7;
#pragma unroll
    for (int it = 0; it < HEAD_DIM / 16; ++it) {          // (8 key blocks x HEAD_DIM/8 d blocks) / 4 / 4 warps
        const int bs = pw + 4 * it, kb = bs & 7, db = 4 * (bs >> 3) + m;   // key block, d block
        const int key = 8 * kb + rr, d = 8 * db + rr;
        uint32_t r[4];
        ldsm_x4_trans(r, smem_u32(v + (db >> 3) * KV_SUB + key * 128 + (((db & 7) ^ (key & 7)) << 4)));
        stsm_x4(smem_u32(vt + d * 128 + ((kb ^ (d & 7)) << 4)), r);
    }
}

// grid (ceil(Lq/BM) reversed: the longest causal blocks first, Hq, B), or with GRID_HQ (Hq, ceil(Lq/BM)
// reversed, B); block 384.  tq: Q as
// (D, Hq, B*Lq) in boxes of (64, 1, BM); tk, tv: K, V as (D, Hkv, B*Lk) in boxes of (64, 1, BN)
// (PAGED: Q as (D, Hq, N), K and V as (D, Hkv, P*ps) in boxes of (64, 1, ps); Lq = N, Lk unused).
extern "C" __global__ void __launch_bounds__(NCONS + 128, 1)
flash_attn_fwd_wgmma(const __grid_constant__ TensorMap tq, const __grid_constant__ TensorMap tk,
                     const __grid_constant__ TensorMap tv, float* __restrict__ O, int Lq, int Lk, int Hq,
                     int Hkv, float scale_log2, int causal, const int* __restrict__ cu,
                     const int* __restrict__ lens, const int* __restrict__ table, int ps, int max_pages,
                     int n_pages)
{
    pdl_wait();                                                // q, the lengths, the tables: earlier kernels' work
    extern __shared__ unsigned char smem_raw[];
    unsigned char* base = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    unsigned char* sQ = base;                                  // [DSUB][BM][64]
    unsigned char* sK = sQ + DSUB * Q_SUB;                     // [STAGES][DSUB][BN][64]
    unsigned char* sV = sK + STAGES * KV_TILE;                 // [STAGES][DSUB][BN][64]
    unsigned char* sVt = sV + STAGES * KV_TILE;                // [STAGES][HEAD_DIM][64] (VT = 1)
    uint64_t* bars = reinterpret_cast<uint64_t*>(sVt + VT * STAGES * KV_TILE);
    uint64_t *qfull = bars, *kfull = bars + 1, *kempty = kfull + STAGES, *vfull = kempty + STAGES,
             *vtfull = vfull + STAGES, *vtempty = vtfull + STAGES;   // VT = 0: vtempty frees V's slot
    uint64_t* vready = VT ? vtfull : vfull;                     // what P V waits for
    const int tid = threadIdx.x;
    int qb, h;
    causal_block<GRID_HQ>(qb, h);
    const int b = blockIdx.z, kvh = h / (Hq / Hkv);
    const int q0 = qb * BM;
#if PAGED
    const int row0 = min(max(cu[b], 0), Lq);                   // the sequence's first row of the step
    Lq = min(max(cu[b + 1], row0), Lq) - row0;                 // (Lq: the step's N rows)
    Lk = min(max(lens[b], 0), max_pages * ps);
    if (q0 >= Lq) return;                                      // (the whole block: no barrier yet)
    const int* tab = table + (size_t)b * max_pages;
#else
    const int row0 = b * Lq;
#endif
    const int offs = Lk - Lq;
    const int last_key = causal ? min(Lk - 1, min(Lq, q0 + BM) - 1 + offs) : Lk - 1;   // the block's last row's
    const int ntiles = max(1, last_key / BN + 1);              // a block with no key still writes its zeros
    if (tid == 0) {
        mbar_init(qfull, 1);
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&kfull[s], 1);
            mbar_init(&kempty[s], NCONS / 32);
            mbar_init(&vfull[s], 1);
            mbar_init(&vtfull[s], 1);
            mbar_init(&vtempty[s], NCONS / 32);
        }
        mbar_init_fence();
    }
    __syncthreads();

    if (tid >= NCONS) {                                        // the producer warpgroup
        regs_dec<PRODUCER_REGS>();                             // its registers to the consumers
        const int ptid = tid - NCONS;
#if PAGED
        auto box_row = [&](int i, int u) {                     // the pool row of box u (one page) of tile i
            const int pg = i * BN / ps + u, pid = pg < max_pages ? tab[pg] : -1;
            return pid < 0 || pid >= n_pages ? -ps : pid * ps;   // no page: a box wholly outside, zeros
        };
#endif
#if VT
        auto issue = [&](int i) {                              // tile i's K and V boxes
            const int s = i % STAGES;
            if (i >= STAGES) mbar_wait(&kempty[s], (i / STAGES - 1) & 1);
            fence_proxy_async();                               // V slot s was read by the transpose
            mbar_expect_tx(&kfull[s], KV_TILE);
            mbar_expect_tx(&vfull[s], KV_TILE);
#if PAGED
            for (int u = 0; u < BN / ps; ++u) {                // one box per page of the tile
                const int r = box_row(i, u);
                for (int ds = 0; ds < DSUB; ++ds) {
                    tma_load_3d(sK + s * KV_TILE + ds * KV_SUB + u * ps * 128, &tk, ds * 64, kvh, r, &kfull[s]);
                    tma_load_3d(sV + s * KV_TILE + ds * KV_SUB + u * ps * 128, &tv, ds * 64, kvh, r, &vfull[s]);
                }
            }
#else
            for (int ds = 0; ds < DSUB; ++ds) {
                tma_load_3d(sK + s * KV_TILE + ds * KV_SUB, &tk, ds * 64, kvh, b * Lk + i * BN, &kfull[s]);
                tma_load_3d(sV + s * KV_TILE + ds * KV_SUB, &tv, ds * 64, kvh, b * Lk + i * BN, &vfull[s]);
            }
#endif
        };
#else
        auto load = [&](int i, const TensorMap* map, unsigned char* dst, uint64_t* full, uint64_t* empty) {
            const int s = i % STAGES;                          // tile i of K or V, once slot s is free
            if (i >= STAGES) mbar_wait(&empty[s], (i / STAGES - 1) & 1);
            mbar_expect_tx(&full[s], KV_TILE);
#if PAGED
            for (int u = 0; u < BN / ps; ++u)
                for (int ds = 0; ds < DSUB; ++ds)
                    tma_load_3d(dst + s * KV_TILE + ds * KV_SUB + u * ps * 128, map, ds * 64, kvh, box_row(i, u), &full[s]);
#else
            for (int ds = 0; ds < DSUB; ++ds)
                tma_load_3d(dst + s * KV_TILE + ds * KV_SUB, map, ds * 64, kvh, b * Lk + i * BN, &full[s]);
#endif
        };
#endif
        if (ptid == 0) {
            mbar_expect_tx(qfull, DSUB * Q_SUB);
            for (int ds = 0; ds < DSUB; ++ds)
                tma_load_3d(sQ + ds * Q_SUB, &tq, ds * 64, h, row0 + q0, qfull);
#if VT
            for (int i = 0; i < min(STAGES - 1, ntiles); ++i) issue(i);
#else
            // K of tile i waits only for tile i - STAGES's scores, V for its P V, which ends a step
            // later: so the K copies run a tile ahead of the V copies, and the next scores never
            // wait for a P V to free a slot
            for (int i = 0; i <= ntiles; ++i) {
                if (i < ntiles) load(i, &tk, sK, kfull, kempty);
                if (i > 0) load(i - 1, &tv, sV, vfull, vtempty);
            }
#endif
        }
#if VT
        for (int j = 0; j < ntiles; ++j) {
            if (ptid == 0 && j + STAGES - 1 < ntiles) issue(j + STAGES - 1);
            __syncwarp();                                      // lane 0 back: ldmatrix / stmatrix are warp-wide
            const int s = j % STAGES;
            mbar_wait(&vfull[s], (j / STAGES) & 1);
            if (j >= STAGES) mbar_wait(&vtempty[s], (j / STAGES - 1) & 1);
            transpose_v(sV + s * KV_TILE, sVt + s * KV_TILE, ptid);
            fence_proxy_async();                               // V^T (generic stores) -> wgmma's reads
            bar_sync_producers();
            if (ptid == 0) mbar_arrive(&vtfull[s]);
        }
#endif
        return;
    }

    regs_inc<CONSUMER_REGS>();
    const int wg = tid >> 7, w = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int qr = q0 + wg * 64 + w * 16 + g;                  // this thread's query rows: qr, qr + 8
    float o[HEAD_DIM / 2];                                     // O: 64 rows x HEAD_DIM of this warpgroup
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 2; ++i) o[i] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;  // rows qr, qr + 8 (log2 units)

    // queue S = Q K_j^T into sc (its first k16 step writes it: no zeroing; the caller fences and commits)
    auto scores = [&](int j, float* sc) {
#pragma unroll
        for (int ds = 0; ds < DSUB; ++ds) {
            const uint64_t da = make_desc(sQ + ds * Q_SUB + wg * 64 * 128);
            const uint64_t db = make_desc(sK + (j % STAGES) * KV_TILE + ds * KV_SUB);
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                if (ds == 0 && kk == 0) WgmmaZero<BN>::run(sc, da, db);
                else Wgmma<__half, BN>::run(sc, da + 2 * kk, db + 2 * kk);
            }
        }
    };
    // queue O += P V_j (P in registers; the caller fences and commits)
    auto values = [&](int j, const uint32_t (*pa)[4]) {
#if VT
        const uint64_t dv = make_desc(sVt + (j % STAGES) * KV_TILE);
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) WgmmaRA<HEAD_DIM>::run(o, pa[kk], dv + 2 * kk);
#else
        const uint64_t dv = make_desc_mn(sV + (j % STAGES) * KV_TILE, VT_LBO, VT_SBO);
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) WgmmaRA<HEAD_DIM, 1>::run(o, pa[kk], dv + (16 * 128 >> 4) * kk);
#endif
    };
    // tile j's scores -> P (pa: wgmma's A fragments) and the running max and sum; returns in c0, c1
    // the factors O must be scaled by.  Neither O nor sc is written: their products may still be
    // in flight (ptxas serializes every wgmma when an instruction redefines registers a wgmma of
    // the same stage reads: C7513).
    auto softmax_of = [&](const float* s, uint32_t (*pa)[4], float& c0, float& c1) {
        // row maxima and sums in 4 partial chains each: one long chain of dependent fmaxf / adds
        // would leave the warp waiting on each instruction's latency
        float mx[2][4], rs[2][4];                              // [row qr, qr + 8][partial]
#pragma unroll
        for (int p = 0; p < 4; ++p) mx[0][p] = mx[1][p] = -INFINITY, rs[0][p] = rs[1][p] = 0.f;
#pragma unroll
        for (int c = 0; c < BN / 8; ++c) {                     // s[4c + 0, 1]: row qr; s[4c + 2, 3]: row qr + 8
            mx[0][c % 4] = fmaxf(mx[0][c % 4], fmaxf(s[4 * c], s[4 * c + 1]));
            mx[1][c % 4] = fmaxf(mx[1][c % 4], fmaxf(s[4 * c + 2], s[4 * c + 3]));
        }
        float mx0 = fmaxf(fmaxf(mx[0][0], mx[0][1]), fmaxf(mx[0][2], mx[0][3]));
        float mx1 = fmaxf(fmaxf(mx[1][0], mx[1][1]), fmaxf(mx[1][2], mx[1][3]));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        const float mn0 = fmaxf(m0, mx0 * scale_log2), mn1 = fmaxf(m1, mx1 * scale_log2);
        const float b0 = mn0 == -INFINITY ? 0.f : mn0, b1 = mn1 == -INFINITY ? 0.f : mn1;
        c0 = ex2(m0 - b0);
        c1 = ex2(m1 - b1);
        m0 = mn0;
        m1 = mn1;
        // k16 slice kk of P holds keys 16kk .. 16kk+15: S's n8 chunks 2kk and 2kk+1
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {                      // (row qr, chunk 2kk), (qr+8, 2kk), (qr, 2kk+1), (qr+8, 2kk+1)
                const int i = 8 * kk + 2 * e;
                const float bb = (e & 1) ? b1 : b0;
                const float p0 = ex2(fmaf(s[i], scale_log2, -bb)), p1 = ex2(fmaf(s[i + 1], scale_log2, -bb));
                rs[e & 1][(2 * kk + (e >> 1)) % 4] += p0 + p1;
                pa[kk][e] = pack_half2(p0, p1);
            }
        }
        l0 = l0 * c0 + ((rs[0][0] + rs[0][1]) + (rs[0][2] + rs[0][3]));
        l1 = l1 * c1 + ((rs[1][0] + rs[1][1]) + (rs[1][2] + rs[1][3]));
    };
    auto softmax = [&](int j, const float* sc, uint32_t (*pa)[4], float& c0, float& c1) {
        const int key0 = j * BN;
        // mask: keys past Lk (a ragged last tile, or the next batch's rows) and, causal, the future;
        // only a tile that crosses one of them needs it (one branch for the tile, none per score)
        const bool edge = key0 + BN > Lk || (causal && key0 + BN - 1 > q0 + wg * 64 + w * 16 + offs);
        if (!edge) {
            softmax_of(sc, pa, c0, c1);
            return;
        }
        float sv[BN / 2];                                      // the masked scores (sc stays as it is)
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) {                     // sc[4c + 0, 1]: row qr; sc[4c + 2, 3]: row qr + 8
            const int key = key0 + 8 * (i >> 2) + 2 * t + (i & 1), q = qr + ((i & 2) ? 8 : 0);
            sv[i] = (key >= Lk) | ((causal != 0) & (key > q + offs)) ? -INFINITY : sc[i];
        }
        softmax_of(sv, pa, c0, c1);
    };
    auto rescale = [&](float c0, float c1) {
#pragma unroll
        for (int c = 0; c < HEAD_DIM / 8; ++c) {
            o[4 * c] *= c0;
            o[4 * c + 1] *= c0;
            o[4 * c + 2] *= c1;
            o[4 * c + 3] *= c1;
        }
    };

    mbar_wait(qfull, 0);
    float sc[BN / 2];
    uint32_t pa[BN / 16][4];
    float c0, c1;
    auto fence_s = [&]() {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) fence_reg(sc[i]);
    };
    auto fence_o = [&](uint32_t (*p)[4]) {                    // O, and the P its products read
#pragma unroll
        for (int i = 0; i < HEAD_DIM / 2; ++i) fence_reg(o[i]);
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
            for (int e = 0; e < 4; ++e) fence_reg(p[kk][e]);
    };
#if OVERLAP
    // FlashAttention-3's overlap within a warpgroup: tile j's scores are computed on the tensor
    // cores while tile j-1's P V is, and its softmax runs while P V finishes
    // PINGPONG: each warpgroup's turns are the first scores, the ntiles - 1 steps and the last P V;
    // warpgroup 0 goes first, and warpgroup 1 passes no turn after its last (nobody would take it)
    if (PINGPONG && wg == 1) turn_pass(1);
    mbar_wait(&kfull[0], 0);
    if (PINGPONG) turn_wait(wg);
    wgmma_fence();
    scores(0, sc);
    wgmma_commit();
    if (PINGPONG) turn_pass(wg);
    wgmma_wait<0>();
    fence_s();
    if (lane == 0) mbar_arrive(&kempty[0]);
    softmax(0, sc, pa, c0, c1);                                // O is still 0: no rescale
    // tile j: its scores with tile j-1's P V (P of j-1 in pin), then its P into pout.  Two P
    // buffers in turn, the loop unrolled by two so that each is a fixed set of registers: a copy
    // from one to the other would let the compiler write P into registers a P V still reads
    uint32_t pb[BN / 16][4];
    auto step = [&](int j, uint32_t (*pin)[4], uint32_t (*pout)[4]) {
        const int s = j % STAGES, sp = (j - 1) % STAGES;
        mbar_wait(&kfull[s], (j / STAGES) & 1);
        mbar_wait(&vready[sp], ((j - 1) / STAGES) & 1);
        if (PINGPONG) turn_wait(wg);
        wgmma_fence();
        scores(j, sc);
        wgmma_commit();
        values(j - 1, pin);
        wgmma_commit();
        if (PINGPONG) turn_pass(wg);
        wgmma_wait<1>();                                       // the scores (the older group) are in
        fence_s();
        if (lane == 0) mbar_arrive(&kempty[s]);
        softmax(j, sc, pout, c0, c1);
        wgmma_wait<0>();                                       // P V of tile j-1 is in O
        fence_o(pin);
        if (lane == 0) mbar_arrive(&vtempty[sp]);
        rescale(c0, c1);
    };
    for (int j = 1; j < ntiles; j += 2) {
        step(j, pa, pb);
        if (j + 1 < ntiles) step(j + 1, pb, pa);
    }
    auto last = [&](uint32_t (*pl)[4]) {                       // the last tile's P V
        const int sl = (ntiles - 1) % STAGES;
        mbar_wait(&vready[sl], ((ntiles - 1) / STAGES) & 1);
        if (PINGPONG) turn_wait(wg);
        wgmma_fence();
        values(ntiles - 1, pl);
        wgmma_commit();
        if (PINGPONG && wg == 0) turn_pass(wg);
        wgmma_wait<0>();
        fence_o(pl);
        if (lane == 0) mbar_arrive(&vtempty[sl]);
    };
    if ((ntiles - 1) & 1) last(pb);                            // two copies: each buffer stays registers
    else last(pa);
#else
    for (int j = 0; j < ntiles; ++j) {                         // one tile at a time
        const int s = j % STAGES;
        mbar_wait(&kfull[s], (j / STAGES) & 1);
        wgmma_fence();
        scores(j, sc);
        wgmma_commit();
        wgmma_wait<0>();
        fence_s();
        if (lane == 0) mbar_arrive(&kempty[s]);
        softmax(j, sc, pa, c0, c1);
        rescale(c0, c1);
        mbar_wait(&vready[s], (j / STAGES) & 1);
        wgmma_fence();
        values(j, pa);
        wgmma_commit();
        wgmma_wait<0>();
        fence_o(pa);
        if (lane == 0) mbar_arrive(&vtempty[s]);
    }
#endif
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
        const int q = qr + 8 * hh;
        if (q >= Lq) continue;
        float* orow = O + ((size_t)(row0 + q) * Hq + h) * HEAD_DIM;
        const float inv = hh ? inv1 : inv0;
#pragma unroll
        for (int c = 0; c < HEAD_DIM / 8; ++c)
            *reinterpret_cast<float2*>(orow + 8 * c + 2 * t) = make_float2(o[4 * c + 2 * hh] * inv, o[4 * c + 2 * hh + 1] * inv);
    }
}
PDL_READY(flash_attn_fwd_wgmma);

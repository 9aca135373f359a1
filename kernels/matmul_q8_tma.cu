// Chapter 11, version 7: version 6's product (Q8_0 weights dequantized into wgmma's A registers,
// tokens as its B operand from shared memory) fed by TMA through a deep ring of mbarrier stages.
// y[M,N] (fp32) = x[M,K] (fp16) @ w[N,K]^T, w in GGUF's Q8_0 blocks.
//
// Where version 6 loses its time with many tokens (ncu, 512 tokens: the tensor pipe busy 25 % of the
// time): every thread issues cp.async for its share of a stage, only two stages of 83 KB fit, and the
// whole block meets at a barrier per stage, so the next stage's copies start one stage before they
// are needed and the tensor cores drain at every stage.  Here:
//   * one producer thread issues the copies, two per 64-k tile: the token tile (a 2-D TMA box of x,
//     written in the 128-byte swizzle the wgmma descriptor reads) and the weight tile (a box of 128
//     raw rows x 80 bytes; two boxes of 64 rows for a gate | up pair).  A tile's two Q8_0 blocks are
//     68 bytes at byte 68 kt of a row, but TMA starts a box only at a 16-byte aligned address (any
//     other is an illegal instruction): the box starts at 68 kt rounded down to 16, which is
//     4 (kt % 4) bytes before the tile, and 80 bytes reach its end even when kt % 4 = 3;
//   * a stage is one 64-k tile (42 KB at 256 tokens), so 5 to 8 fit: 4 to 7 in flight while one is
//     computed.  Each stage has a `full` mbarrier (TMA's bytes complete it) and an `empty` one (each
//     consumer warp arrives when its products of the stage are done): no __syncthreads at all;
//   * gate and up (PAIR): a tile's two warpgroups hold the gate and the up rows of the same 64
//     outputs, so unsplit the block itself writes silu(gate) * up (warpgroup 1 hands its sums to
//     warpgroup 0 through shared memory): no partial sums in global memory, no reduction kernel;
//   * the consumers dequantize tile kt's A fragments into one register buffer while tile kt-1's
//     products, reading the other, run (GROUP tiles in a row, then the queue drains); the two
//     warpgroups wait for nothing but their stages, so one's drain overlaps the other's products.
// 384 threads: two consumer warpgroups (128 weight rows x BT tokens) and a producer warpgroup (one
// thread of it issues the copies; it hands its registers to the consumers: setmaxnreg).
// Needs sm_90a.  K % (64 GROUP) == 0 and every split a whole number of groups, x 16-byte aligned
// rows; the parts of a cat (n1 < N) start at multiples of 128 rows.
#include "q8_tile.cuh"
#include "wgmma.cuh"

#ifndef BT
#define BT 128           // tokens per block tile: wgmma's n (16, 32, 64, 128 or 256)
#endif
#ifndef STAGES
#define STAGES 6         // 64-k tiles in the ring
#endif
#ifndef GROUP
#define GROUP 4          // tiles computed back to back before the consumers drain their wgmma queue
#endif
#ifndef PAIR
#define PAIR 0           // gate | up (tw0 | tw1, N rows each): a tile is 64 gate rows (warpgroup 0) and
                         // the same 64 up rows (warpgroup 1); 1: both partial sums planar into y (a K
                         // split's slice), 2: y = silu(gate) * up, written here (no reduction)
#endif
#ifndef GROUPED
#define GROUPED 0        // 1: a mixture of experts' tiles (chapter 11d): blockIdx.x a slot of `tiles`
#endif
#if GROUPED
#define TILES_ARG , const int* __restrict__ tiles
#else
#define TILES_ARG
#endif
#define BW 128           // weight rows per block tile: 2 warpgroups x m64
#define BK 64            // k per stage
#define W_BOX 80         // bytes per weight row of a stage's box (68 used)
#define X_TILE (BT * BK * 2)
#define W_TILE (BW * W_BOX)
#define NCONS 256
static_assert(BT == 16 || BT == 32 || BT == 64 || BT == 128 || BT == 256, "BT is 16, 32, 64, 128 or 256");
static_assert(STAGES >= 2, "STAGES >= 2");
static_assert(GROUP % 4 == 0, "GROUP is a multiple of 4: a group (and a split) starts where 68 kt is 16-byte aligned");
static_assert(X_TILE % 1024 == 0 && W_TILE % 1024 == 0, "stage tiles keep the 1024-byte alignment of the swizzle");

// grid (ceil(M/BT), ceil(N/BW), splits), or ceil(N/64) tiles of N gate rows (PAIR): blocks of one
// weight tile are neighbours (they share it in L2).  Split z covers 64-k tiles [z*kt_per,
// min(K/64, (z+1)*kt_per)) and writes y + z*M*ldy.  One weight (n1 = N): y [M, ldy], + res [M, N]
// when given; parts: y planar, ldy = N.  tx: x [M, K] in boxes of 64 x BT; tw0..2: the raw rows of
// each part in boxes of 80 bytes x 128 rows (x 64 rows: PAIR).
extern "C" __global__ void __launch_bounds__(NCONS + 128, 1)
matmul_q8_0_tma(const __grid_constant__ TensorMap tx, const __grid_constant__ TensorMap tw0,
                const __grid_constant__ TensorMap tw1, const __grid_constant__ TensorMap tw2,
                float* __restrict__ y, const float* __restrict__ res, int M, int N, int K, int ldy,
                int kt_per, int n1, int n2 TILES_ARG)
{
    extern __shared__ unsigned char smem_raw[];
    unsigned char* base = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    unsigned char* sx = base;                                  // [STAGES][BT][64] halves, swizzled
    unsigned char* sw = base + STAGES * X_TILE;                // [STAGES][128][80] raw bytes
    uint64_t* full = reinterpret_cast<uint64_t*>(sw + STAGES * W_TILE);
    uint64_t* empty = full + STAGES;
    const int tid = threadIdx.x;
    const int n0 = blockIdx.y * (PAIR ? BW / 2 : BW);
    int m0 = blockIdx.x * BT, mend = M, wrow = 0;          // GROUPED: the tile's rows, its expert's
    const int kt0 = blockIdx.z * kt_per, NKT = min(K / BK - kt0, kt_per);   // this split's tiles
    y += (size_t)blockIdx.z * M * ldy;
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);                             // the producer's expect_tx
            mbar_init(&empty[s], NCONS / 32);                   // one arrival per consumer warp
        }
        mbar_init_fence();
    }
    __syncthreads();
    pdl_wait();                                                 // x is the kernel before's output
#if GROUPED
    if (!moe_tile_box(tiles, blockIdx.x, n1, wrow, m0, mend)) return;   // a slot past the last tile
#endif

    if (tid >= NCONS) {                                         // the producer warpgroup: one thread
        regs_dec<40>();
        if (tid == NCONS) {
            const TensorMap* tw = PAIR ? &tw0 : (n0 < n1 ? &tw0 : (n0 < n2 ? &tw1 : &tw2));
            const int wr = wrow + (PAIR ? n0 : (n0 < n1 ? n0 : (n0 < n2 ? n0 - n1 : n0 - n2)));   // the tile's rows in its part
            tma_prefetch_map(&tx);
            tma_prefetch_map(tw);
            if (PAIR) tma_prefetch_map(&tw1);
            for (int kt = 0; kt < NKT; ++kt) {
                const int s = kt % STAGES;
                if (kt >= STAGES) mbar_wait(&empty[s], (kt / STAGES - 1) & 1);   // its last reader is done
                mbar_expect_tx(&full[s], X_TILE + W_TILE);
                tma_load_2d(sx + s * X_TILE, &tx, (kt0 + kt) * BK, m0, &full[s]);
                const int wb = ((kt0 + kt) * (BK / QK * QBYTES)) & ~15;    // 16-byte aligned: 4 (kt % 4) early
                tma_load_2d(sw + s * W_TILE, tw, wb, wr, &full[s]);
                if (PAIR)                                       // the up rows: the box's second half
                    tma_load_2d(sw + s * W_TILE + (BW / 2) * W_BOX, &tw1, wb, wr, &full[s]);
            }
        }
        return;                                                 // (no block barrier after this point)
    }

    regs_inc<232>();                                            // 128 x 40 + 256 x 232 <= 64K
    const int wg = tid >> 7, wid = (tid >> 5) & 3, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3, row = wg * 64 + wid * 16 + g;   // this thread's A rows: row, row + 8
    float acc[BT / 2];
#pragma unroll
    for (int i = 0; i < BT / 2; ++i) acc[i] = 0.f;
    uint32_t a[2][16];                                          // A fragments, double-buffered

    // GROUP tiles at a time: tile kt waits for its bytes, is dequantized into one buffer while the
    // tile before it (the other buffer) is still on the tensor cores, and queues its four k16
    // products; once those of the tile before are done, that tile's stage is free.  The group
    // ends with nothing in flight: across the loop ptxas would serialize every wgmma (C7513: it
    // cannot tell the two buffers apart there).
    for (int kt = 0; kt < NKT; kt += GROUP) {
#pragma unroll
        for (int u = 0; u < GROUP; ++u) {
            const int s = (kt + u) % STAGES;
            mbar_wait(&full[s], ((kt + u) / STAGES) & 1);
            const unsigned char* w = sw + s * W_TILE + row * W_BOX + 4 * (u % 4);   // (kt0 + kt) % 4 == 0
            uint32_t* af = a[u & 1];
            dequant_a(af, w, w + 8 * W_BOX, t);
            const uint64_t db = make_desc(sx + s * X_TILE);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk) WgmmaRA<BT>::run(acc, af + 4 * kk, db + 2 * kk);
            wgmma_commit();
            if (u > 0) {
                wgmma_wait<1>();
                if (lane == 0) mbar_arrive(&empty[(kt + u - 1) % STAGES]);
            }
        }
        wgmma_wait<0>();
        if (lane == 0) mbar_arrive(&empty[(kt + GROUP - 1) % STAGES]);
    }
#pragma unroll
    for (int i = 0; i < BT / 2; ++i) fence_reg(acc[i]);
    if (PAIR == 0) {
        store_acc<BT, true>(acc, y, res, m0, n0, row, t, mend, N, ldy, n1, n2);
        return;
    }
    const int pr = wid * 16 + g;                                // this thread's first row of the 64
    if (PAIR == 1) {                                            // planar partial sums: gate [M, n1], up after it
        store_acc<BT, false>(acc, y + (size_t)wg * M * n1, nullptr, m0, n0, pr, t, mend, n1, n1, n1, n1);
        return;
    }
    // PAIR == 2: warpgroup 1's up sums to warpgroup 0 through the ring (every stage is consumed)
    float* xchg = reinterpret_cast<float*>(base);               // [BT/2][128]
    bar_sync_consumers();                                       // both done reading the ring
    if (wg == 1) {
#pragma unroll
        for (int i = 0; i < BT / 2; ++i) xchg[i * 128 + (tid - 128)] = acc[i];
    }
    bar_sync_consumers();
    if (wg == 0) {
#pragma unroll
        for (int i = 0; i < BT / 2; ++i)                        // as q8_splitk_reduce: the same bits
            acc[i] = silu(0.f + acc[i]) * (0.f + xchg[i * 128 + tid]);
        store_acc<BT, false>(acc, y, nullptr, m0, n0, pr, t, mend, n1, ldy, n1, n1);
    }
}
PDL_READY(matmul_q8_0_tma);

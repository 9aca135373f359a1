// Chapter 11c: the block formats on the tensor cores.  y[M,N] (fp32) = x[M,K] (fp16) @ w[N,K]^T, w
// as stored in the file (Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) or in a GPU layout of chapter
// 11c's REPACKED: quant_blocks.cuh.
//
// Chapter 11's version 7 with the format taken out: one producer thread feeds a ring of 64-k stages
// by TMA (the token tile in the 128-byte swizzle wgmma reads, and a box of 128 raw weight rows),
// and two consumer warpgroups dequantize their rows straight into wgmma's A registers while the
// products of the tile before run.  What changes with the format:
//   * the weight box of a 64-k tile holds the block(s) that cover it: two blocks of 32, or the one
//     super-block of 256 (each of its four tiles reads the same 144 to 210 bytes again, from L2 — the
//     bytes from HBM do not change).  TMA starts a box only at a 16-byte aligned address, so the box
//     starts at the blocks' first byte rounded down to 16 and is W_BOX wide (the host's
//     quant_w_box: the blocks and the largest offset they can have, rounded up to 16);
//   * a thread's A fragment of one 64-k tile is, per row, elements 2t + {0, 1, 8, 9, 16, 17, 24, 25}
//     of each of the tile's two units: code words (t / 2) + {0, 2, 4, 6}, the half t % 2 of each
//     (quant_blocks.cuh's word_<type>), so a thread reads only the words it multiplies;
//   * codes to fp16 exactly (1152 + code under an fp16 exponent, minus 1152: v7's trick), then one
//     fp16 multiply-add with the unit's scale and minimum rounded to fp16 (v7 rounds d * q once; here
//     a and b are rounded too, a weight is off by about 2 fp16 ulps at most: the tests allow 2e-3).
// 384 threads: two consumer warpgroups (128 weight rows x BT tokens) and a producer warpgroup.
// Needs sm_90a.  K % 256 == 0 and every split whole groups of 4 tiles, 16-byte aligned x and raw rows
// (row bytes % 16 == 0: the tensor map's stride); the parts of a cat (n1 < N) start at multiples of
// 128 rows.
#include "q8_tile.cuh"
#include "wgmma.cuh"
#undef QK                // (q8_tile.cuh's Q8_0 constants: here the format's, Fmt::QK and Fmt::BYTES)
#undef QBYTES
#include "quant_blocks.cuh"

#ifndef WTYPE
#define WTYPE 12         // the format: its GGML type id
#endif
#ifndef W_BOX
#define W_BOX 144        // bytes per weight row of a stage's box
#endif
#ifndef BT
#define BT 128           // tokens per block tile: wgmma's n (16, 32, 64, 128 or 256)
#endif
#ifndef STAGES
#define STAGES 5         // 64-k tiles in the ring
#endif
#ifndef GROUP
#define GROUP 4          // tiles computed back to back before the consumers drain their wgmma queue
#endif
#ifndef PAIR
#define PAIR 0           // as version 7: 1 gate | up partial sums planar, 2 y = silu(gate) * up
#endif
using F = Fmt<WTYPE>;
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
#define X_TILE (BT * BK * 2)
#define W_TILE (BW * W_BOX)
#define NCONS 256
static_assert(BT == 16 || BT == 32 || BT == 64 || BT == 128 || BT == 256, "BT is 16, 32, 64, 128 or 256");
static_assert(STAGES >= 2 && GROUP % 4 == 0, "STAGES >= 2, GROUP a multiple of 4 (a super-block)");
static_assert(W_BOX % 16 == 0 && W_BOX >= (F::QK == 32 ? 2 : 1) * F::BYTES, "W_BOX holds a tile's blocks");
static_assert(X_TILE % 1024 == 0 && W_TILE % 1024 == 0, "stage tiles keep the 1024-byte alignment of the swizzle");

// the byte of a row where the blocks of 64-k tile kt start: two blocks of 32 a tile, or a super-block
// every four tiles
__device__ __forceinline__ int tile_byte(int kt) { return F::QK == 32 ? 2 * kt * F::BYTES : (kt >> 2) * F::BYTES; }

// codes c0, c1 (two int8 in the low half-word of c) -> fp16 pair a * c + b
__device__ __forceinline__ uint32_t codes_h2(uint32_t c, __half2 a, __half2 b) {
    uint32_t h = __byte_perm(c ^ 0x8080u, 0x64646464u, 0x4140);                   // 1024 + 128 + code
    __half2 v = __hfma2(__hsub2(*reinterpret_cast<__half2*>(&h), __float2half2_rn(1152.f)), a, b);
    return *reinterpret_cast<uint32_t*>(&v);
}

// this thread's A fragments of one 64-k tile (as q8_tile.cuh's dequant_a: a[4j + 0..3] = (row r,
// k 16j+2t..+1), (row r+8, same), (row r, +8), (row r+8, +8)), the rows' boxes at ra and rb, the
// tile's blocks at byte `off` of them
__device__ __forceinline__ void dequant_a_quant(uint32_t* a, const unsigned char* ra, const unsigned char* rb,
                                                int off, int kt, int t) {
    const Stage sa{reinterpret_cast<const uint32_t*>(ra)}, sb{reinterpret_cast<const uint32_t*>(rb)};
#pragma unroll
    for (int u = 0; u < 2; ++u) {                          // the tile's two units
        const int o = off + (F::QK == 32 ? u * F::BYTES : 0), j = F::QK == 32 ? 0 : 2 * (kt & 3) + u;
        const Scales ca = F::scales(sa, o, j), cb = F::scales(sb, o, j);
#pragma unroll
        for (int i = 0; i < 4; ++i) {                      // elements 2t + 8i, +1: word t/2 + 2i, half t%2
            const int k = (t >> 1) + 2 * i, sh = 16 * (t & 1), idx = 4 * (2 * u + (i >> 1)) + 2 * (i & 1);
            a[idx] = codes_h2(F::word(sa, o, j, k) >> sh, __float2half2_rn(ca.a[i >> 1]), __float2half2_rn(ca.b));
            a[idx + 1] = codes_h2(F::word(sb, o, j, k) >> sh, __float2half2_rn(cb.a[i >> 1]), __float2half2_rn(cb.b));
        }
    }
}

// grid (ceil(M/BT), ceil(N/BW), splits), or ceil(N/64) tiles of N gate rows (PAIR), as version 7.
// tx: x [M, K] in boxes of 64 x BT; tw0..2: the raw rows of each part in boxes of W_BOX bytes x 128
// rows (x 64 rows: PAIR).
extern "C" __global__ void __launch_bounds__(NCONS + 128, 1)
matmul_quant_tma(const __grid_constant__ TensorMap tx, const __grid_constant__ TensorMap tw0,
                 const __grid_constant__ TensorMap tw1, const __grid_constant__ TensorMap tw2,
                 float* __restrict__ y, const float* __restrict__ res, int M, int N, int K, int ldy,
                 int kt_per, int n1, int n2 TILES_ARG)
{
    extern __shared__ unsigned char smem_raw[];
    unsigned char* base = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    unsigned char* sx = base;                                  // [STAGES][BT][64] halves, swizzled
    unsigned char* sw = base + STAGES * X_TILE;                // [STAGES][128][W_BOX] raw bytes
    uint64_t* full = reinterpret_cast<uint64_t*>(sw + STAGES * W_TILE);
    uint64_t* empty = full + STAGES;
    const int tid = threadIdx.x;
    const int n0 = blockIdx.y * (PAIR ? BW / 2 : BW);
    int m0 = blockIdx.x * BT, mend = M, wrow = 0;          // GROUPED: the tile's rows, its expert's
    const int kt0 = blockIdx.z * kt_per, NKT = min(K / BK - kt0, kt_per);   // this split's tiles
    y += (size_t)blockIdx.z * M * ldy;
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], NCONS / 32);
        }
        mbar_init_fence();
    }
    __syncthreads();
    pdl_wait();
#if GROUPED
    if (!moe_tile_box(tiles, blockIdx.x, n1, wrow, m0, mend)) return;   // a slot past the last tile
#endif

    if (tid >= NCONS) {                                         // the producer: one thread issues
        regs_dec<40>();
        if (tid == NCONS) {
            const TensorMap* tw = PAIR ? &tw0 : (n0 < n1 ? &tw0 : (n0 < n2 ? &tw1 : &tw2));
            const int wr = wrow + (PAIR ? n0 : (n0 < n1 ? n0 : (n0 < n2 ? n0 - n1 : n0 - n2)));
            tma_prefetch_map(&tx);
            tma_prefetch_map(tw);
            if (PAIR) tma_prefetch_map(&tw1);
            for (int kt = 0; kt < NKT; ++kt) {
                const int s = kt % STAGES;
                if (kt >= STAGES) mbar_wait(&empty[s], (kt / STAGES - 1) & 1);
                mbar_expect_tx(&full[s], X_TILE + W_TILE);
                tma_load_2d(sx + s * X_TILE, &tx, (kt0 + kt) * BK, m0, &full[s]);
                const int wb = tile_byte(kt0 + kt) & ~15;      // 16-byte aligned: the consumers add the rest
                tma_load_2d(sw + s * W_TILE, tw, wb, wr, &full[s]);
                if (PAIR) tma_load_2d(sw + s * W_TILE + (BW / 2) * W_BOX, &tw1, wb, wr, &full[s]);
            }
        }
        return;
    }

    regs_inc<232>();
    const int wg = tid >> 7, wid = (tid >> 5) & 3, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3, row = wg * 64 + wid * 16 + g;
    float acc[BT / 2];
#pragma unroll
    for (int i = 0; i < BT / 2; ++i) acc[i] = 0.f;
    uint32_t a[2][16];

    for (int kt = 0; kt < NKT; kt += GROUP) {                  // version 7's loop, the format's dequantization
#pragma unroll
        for (int u = 0; u < GROUP; ++u) {
            const int s = (kt + u) % STAGES, kg = kt0 + kt + u;
            mbar_wait(&full[s], ((kt + u) / STAGES) & 1);
            const unsigned char* w = sw + s * W_TILE + row * W_BOX;
            uint32_t* af = a[u & 1];
            dequant_a_quant(af, w, w + 8 * W_BOX, tile_byte(kg) & 15, kg, t);
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
    const int pr = wid * 16 + g;
    if (PAIR == 1) {
        store_acc<BT, false>(acc, y + (size_t)wg * M * n1, nullptr, m0, n0, pr, t, mend, n1, n1, n1, n1);
        return;
    }
    float* xchg = reinterpret_cast<float*>(base);               // PAIR == 2: as version 7
    bar_sync_consumers();
    if (wg == 1) {
#pragma unroll
        for (int i = 0; i < BT / 2; ++i) xchg[i * 128 + (tid - 128)] = acc[i];
    }
    bar_sync_consumers();
    if (wg == 0) {
#pragma unroll
        for (int i = 0; i < BT / 2; ++i) acc[i] = silu(0.f + acc[i]) * (0.f + xchg[i * 128 + tid]);
        store_acc<BT, false>(acc, y, nullptr, m0, n0, pr, t, mend, n1, ldy, n1, n1);
    }
}
PDL_READY(matmul_quant_tma);

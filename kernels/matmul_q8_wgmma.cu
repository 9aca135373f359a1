// Chapter 11, version 6: Q8_0 weights on the tensor cores.  y[M,N] (fp32) = x[M,K] (fp16) @ w[N,K]^T,
// w in GGUF's Q8_0 blocks (34 bytes: fp16 scale d, 32 int8 quants q; weight = d * q).
//
// Version 5 needs fp16 weights: the matmul op used to dequantize Q8_0 into an fp16 slab in global
// memory and run v5 on it, which writes and reads the weights twice more than it needs to.  Here the
// raw blocks travel (cp.async) into a ring of shared-memory stages, and each thread dequantizes its
// part of the weight tile straight into the registers wgmma reads its A operand from:
//   * the roles are swapped against v5: the 128 weight rows of a tile are wgmma's A operand (one m64
//     per warpgroup, from registers) and the BT tokens are its B operand (n = BT = 16 to 256, from
//     shared memory).  So the tensor work is proportional to the tokens;
//   * a stage is SK = 256 k: per weight row 8 Q8_0 blocks = 272 bytes, 16-byte aligned when K % 256
//     == 0, so the raw copies are 16-byte cp.async of long pieces of each row; all but one slot of the
//     ring are in flight while a stage is computed (AHEAD = STAGES - 1: nothing of a stage is still
//     read once the next one starts, see the loop);
//   * dequantization is exact and cheap (q8_tile.cuh's dequant2): the same fp16 weights as the old
//     slab's __float2half_rn(d * q);
//   * no converted tile in shared memory means no proxy fence and no barrier per 64-k tile: one of
//     each per stage (the token tiles arrive by cp.async, the generic proxy; wgmma reads them through
//     the async proxy).  A first version wrote the fp16 tile to shared memory and fenced every 64 k,
//     and moved under 1 TB/s whatever the copy size (and copying each raw row with one bulk copy,
//     TMA, instead of cp.async ran at half the speed);
//   * split-K over gridDim.z for the small grids of few tokens (each split writes its partial sums to
//     its own slice of y, a workspace then; `q8_splitk_reduce` adds them in a fixed order);
//   * many tokens (a prefill): BT = 128 or 256 tokens per tile, so each dequantized weight feeds
//     BT columns of tensor work and the two warpgroups keep the tensor cores busy.  A 256-k stage of
//     256 tokens would be 128 KB, so those tiles use shorter stages: SK = 64 or 128 k (raw rows of
//     68 or 136 bytes: 17 cp.async of 4 or 8 bytes each, aligned when K % 64 == 0);
//   * the weight rows may come from up to three matrices laid end to end (w | w1 | w2, boundaries n1,
//     n2: q, k and v of one input, or gate and up), written planar (common.cuh's cat_index): one
//     grid for what were three launches.  CAT = 0 compiles the one-matrix addressing (fewer registers
//     and no per-row select), which every plain launch uses.
// Needs sm_90a.  K % SK == 0, x 16-byte aligned; M, N any.
#include "q8_tile.cuh"
#include "wgmma.cuh"

#ifndef BT
#define BT 16            // tokens per block tile: wgmma's n (16, 32, 64, 128 or 256)
#endif
#ifndef SK
#define SK 256           // k per stage of the ring (64, 128 or 256)
#endif
#ifndef STAGES
#define STAGES 4         // stages (SK k of raw weights and tokens) in the ring
#endif
#ifndef CAT
#define CAT 1            // the rows may come from up to three matrices (planar output)
#endif
#define BW 128           // weight rows per block tile: 2 warpgroups x m64
#define BK 64            // k per token tile: one 128-byte swizzled row of halves
#define SUB (SK / BK)    // token tiles (and 64-k wgmma batches) per stage
#define NTHREADS 256
#define CPR (BK / 8)     // 16-byte chunks per row of a token tile
#define RAW_ROW (SUB * BK / QK * QBYTES)    // 68 / 136 / 272 bytes of raw blocks per weight row and stage
#define RAW_CHUNKS 17                       // cp.async per row of a stage, of CHUNK bytes each
#define CHUNK (RAW_ROW / RAW_CHUNKS)        // 4, 8 or 16
#define RAW_STAGE (BW * RAW_ROW)
#define X_SUB (BT * BK)                     // halves of one token tile
static_assert(BT == 16 || BT == 32 || BT == 64 || BT == 128 || BT == 256, "BT is 16, 32, 64, 128 or 256");
static_assert(SK == 64 || SK == 128 || SK == 256, "SK is 64, 128 or 256");
#ifndef LATE
#define LATE 0              // the batch of a stage after which the next copies are issued (-1: before
                            // the first: the tensor cores idle while the threads issue them)
#endif
#ifndef AHEAD
#define AHEAD (STAGES - 1)  // stages in flight while one is computed: every other slot of the ring
#endif
static_assert(STAGES >= 2, "STAGES >= 2");
static_assert(AHEAD >= 1 && AHEAD < STAGES, "1 <= AHEAD < STAGES");
static_assert(LATE >= -1 && LATE < SUB, "LATE is -1 or a batch of the stage");

// tokens [m0, m0+BT) x stage st of x [M, K] -> SUB swizzled token tiles (zero rows past M)
__device__ __forceinline__ void load_x(__half* dst, const __half* __restrict__ x, int m0, int M, int K, int st) {
    for (int e = threadIdx.x; e < SUB * BT * CPR; e += NTHREADS) {
        const int sub = e / (BT * CPR), r = (e / CPR) % BT, c = e % CPR, gm = m0 + r;
        const bool ok = gm < M;
        const __half* g = ok ? x + (size_t)gm * K + (st * SUB + sub) * BK + c * 8 : x;
        cp_async16(smem_u32(dst + sub * X_SUB + r * BK + ((c ^ (r & 7)) * 8)), g, ok ? 16 : 0);
    }
}

// weight rows [n0, n0+BW) of w | w1 | w2 x stage st, raw Q8_0 bytes -> staging tile (zeros past N:
// d = 0, q = 0)
__device__ __forceinline__ void load_w(unsigned char* dst, const unsigned char* __restrict__ w,
                                       const unsigned char* __restrict__ w1, const unsigned char* __restrict__ w2,
                                       int n0, int N, int n1, int n2, size_t row_bytes, int st) {
    for (int e = threadIdx.x; e < BW * RAW_CHUNKS; e += NTHREADS) {
        const int r = e / RAW_CHUNKS, c = e % RAW_CHUNKS, gn = n0 + r;
        const bool ok = gn < N;
#if CAT
        const unsigned char* wr = cat_row(w, w1, w2, gn, n1, n2, row_bytes);
#else
        const unsigned char* wr = w + (size_t)gn * row_bytes;
#endif
        const unsigned char* g = ok ? wr + (size_t)st * RAW_ROW + c * CHUNK : w;
        const uint32_t s = smem_u32(dst + r * RAW_ROW + c * CHUNK);
        if (CHUNK == 16) cp_async16(s, g, ok ? 16 : 0);
        else if (CHUNK == 8) cp_async8(s, g, ok ? 8 : 0);
        else cp_async4(s, g, ok ? 4 : 0);
    }
}

// grid (ceil(M/BT), ceil(N/BW), splits): blocks of one weight tile are neighbours (they share it in
// L2).  Split z covers stages [z*st_per, min(K/SK, (z+1)*st_per)) and writes y + z*M*ldy.  One
// weight (n1 = N): y [M, ldy], + res [M, N] when given (one split only); parts (n1 < N): y planar,
// ldy = N.
extern "C" __global__ void __launch_bounds__(NTHREADS, 1)
matmul_q8_0_wgmma(const __half* __restrict__ x, const unsigned char* __restrict__ w,
                  const unsigned char* __restrict__ w1, const unsigned char* __restrict__ w2, float* __restrict__ y,
                  const float* __restrict__ res, int M, int N, int K, int ldy, int st_per, int n1, int n2)
{
    pdl_wait();
    extern __shared__ unsigned char smem_raw[];
    unsigned char* base = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    __half* sx = reinterpret_cast<__half*>(base);                       // [STAGES][SUB][BT][BK] tokens
    unsigned char* sr = reinterpret_cast<unsigned char*>(sx + STAGES * SUB * X_SUB);   // [STAGES][RAW_STAGE]
    const int tid = threadIdx.x, wg = tid >> 7, wid = (tid >> 5) & 3, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3, row = wg * 64 + wid * 16 + g;   // this thread's A rows: row, row + 8
    const int m0 = blockIdx.x * BT, n0 = blockIdx.y * BW;
    const int st0 = blockIdx.z * st_per, NS = min(K / SK - st0, st_per);   // this split's stages
    const size_t row_bytes = (size_t)(K / QK) * QBYTES;
    y += (size_t)blockIdx.z * M * ldy;

    float acc[BT / 2];
#pragma unroll
    for (int i = 0; i < BT / 2; ++i) acc[i] = 0.f;
    uint32_t a[2][16];                                    // A fragments, double-buffered (wgmma reads them async)

#pragma unroll
    for (int s = 0; s < AHEAD; ++s) {                     // stages 0 .. AHEAD-1 in flight
        if (s < NS) {
            load_x(sx + s * SUB * X_SUB, x, m0, M, K, st0 + s);
            load_w(sr + s * RAW_STAGE, w, w1, w2, n0, N, n1, n2, row_bytes, st0 + s);
        }
        cp_async_commit();
    }
    for (int s = 0; s < NS; ++s) {
        cp_async_wait<AHEAD - 1>();                       // stage s landed (this thread's part)
        fence_proxy_async();                              // its token tiles -> the async proxy
        // everyone's; and everyone is done with stage s-1 (its wgmma waited for at its end, its
        // dequantization read synchronously), so its slot is free
        __syncthreads();
        auto refill = [&]() {                             // a free slot: s - 1's when AHEAD = STAGES - 1
            const int ns = s + AHEAD;
            if (ns < NS) {
                load_x(sx + (ns % STAGES) * SUB * X_SUB, x, m0, M, K, st0 + ns);
                load_w(sr + (ns % STAGES) * RAW_STAGE, w, w1, w2, n0, N, n1, n2, row_bytes, st0 + ns);
            }
            cp_async_commit();
        };
        if (LATE < 0) refill();
        const unsigned char* raw = sr + (s % STAGES) * RAW_STAGE;
        const __half* xs = sx + (s % STAGES) * SUB * X_SUB;
#pragma unroll
        for (int sub = 0; sub < SUB; ++sub) {
            uint32_t* af = a[sub & 1];                    // its last reader, batch sub-2, is done
            const unsigned char* ra = raw + row * RAW_ROW + sub * 2 * QBYTES;
            dequant_a(af, ra, ra + 8 * RAW_ROW, t);
            const uint64_t db = make_desc(xs + sub * X_SUB);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk) WgmmaRA<BT>::run(acc, af + 4 * kk, db + 2 * kk);
            wgmma_commit();
            if (sub == LATE) refill();                    // the copies issued while the tensor cores run
            if (sub < SUB - 1) wgmma_wait<1>();
        }
        // nothing in flight across stages: else ptxas serializes every wgmma (C7513/C7515: it cannot
        // tell the two A buffers, or the accumulators, apart across the loop)
        wgmma_wait<0>();
    }
    wgmma_wait<0>();
    cp_async_wait<0>();
#pragma unroll
    for (int i = 0; i < BT / 2; ++i) fence_reg(acc[i]);

    store_acc<BT, CAT>(acc, y, res, m0, n0, row, t, M, N, ldy, n1, n2);
}
PDL_READY(matmul_q8_0_wgmma);

// y[M, ldy] (columns [0, N)) = the sum over s of part[s][M][N], in the order s = 0, 1, ..., and the
// epilogue of the fused ops: pair (each split's slice holds the gate's [M, N] partial sums, then the
// up projection's: one planar launch of gate | up): y = silu(gate) * up; res (f32 [M, N]): y += res.
// Equal to matmul, then swiglu / add, bit for bit.
extern "C" __global__ void q8_splitk_reduce(const float* __restrict__ part, float* __restrict__ y, int M, int N,
                                            int ldy, int splits, const float* __restrict__ res, int pair)
{
    pdl_wait();
    const long long total = (long long)M * N, slice = pair ? 2 * total : total;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        float s = 0.f;
        for (int z = 0; z < splits; ++z) s += part[(size_t)z * slice + i];
        if (pair) {
            float u = 0.f;
            for (int z = 0; z < splits; ++z) u += part[(size_t)z * slice + total + i];
            s = silu(s) * u;
        }
        if (res) s = s + res[i];
        const long long m = i / N;
        y[m * ldy + (i - m * N)] = s;
    }
}
PDL_READY(q8_splitk_reduce);

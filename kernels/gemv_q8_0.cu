// Chapter 11: the decode workhorse, y[T,N] = x[T,K] @ dequant(w)[N,K]^T with w in GGUF's Q8_0 format.
//
// A Q8_0 block is 34 bytes: an fp16 scale d and 32 int8 quants q; weight = d * q.  Row n of w is
// nb = K/32 blocks, 34*nb bytes, stored back to back (rows are only 2-byte aligned in general).
// At batch T = 1..8 the whole matrix is read once per call and each weight byte is used T times:
// the kernel is bound by memory bandwidth, and the game is to stream the blocks at the card's
// copy speed.  Three versions:
//   v1 gemv_q8_0_naive : one thread per output row, byte loads, fp32 dequantization.
//   v2 gemv_q8_0_warp  : one warp per row, lane i takes blocks i, i+32, ... (2-byte loads; every
//                        load instruction of the warp touches 34 cache sectors: L1-bound).
//   v3 gemv_q8_0_dp4a  : what llama.cpp does (quantize the activations to int8 per 32-block,
//                        then 4 int8 products per dp4a instruction), plus 16-byte cp.async loads of
//                        the raw blocks into shared memory, NSTAGE tiles in flight, ROWS rows per warp
//                        so each activation block is loaded once for ROWS rows.
//   v4 gemv_q8_0_persist: v3's tiles and arithmetic on a persistent grid (one wave of blocks; each
//                        warp streams many rows through one cp.async pipeline: no tail wave).
//   v3 with an epilogue (gemv_q8_0_dp4a_add / _glu): the residual add, or gate + up + SwiGLU, done
//                        by the GEMV itself (fewer launches per decode step).
// Plus the helpers: quantize_q8_act (x -> int8 + one fp32 scale per 32 values) and
// dequant_q8_0_f16 (for prefill: Q8_0 -> fp16, then the tensor-core GEMM).
#include "common.cuh"

#ifndef BATCH
#define BATCH 1          // tokens per call: 1..8, a compile-time constant (registers!)
#endif
#ifndef ROWS
#define ROWS 2           // v3: output rows per warp
#endif
#ifndef WARPS
#define WARPS 4          // v2/v3: warps per block
#endif
#ifndef NSTAGE
#define NSTAGE 4         // v3: tiles in flight per warp (cp.async ring of NSTAGE buffers)
#endif
#define QK 32
#define QBYTES 34

__device__ __forceinline__ float ld_half(const uint8_t* p) {   // 2-byte aligned fp16
    return __half2float(*reinterpret_cast<const __half*>(p));
}

// ---------------------------------------------------------------- v1: a thread per row
extern "C" __global__ void gemv_q8_0_naive(const uint8_t* __restrict__ w, const float* __restrict__ x,
                                           float* __restrict__ y, int N, int K, int T)
{
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const int nb = K / QK;
    const uint8_t* row = w + (size_t)n * nb * QBYTES;
    for (int t = 0; t < T; ++t) {
        float acc = 0.f;
        for (int b = 0; b < nb; ++b) {
            const uint8_t* blk = row + b * QBYTES;
            const float d = ld_half(blk);
            const int8_t* q = reinterpret_cast<const int8_t*>(blk + 2);
            float s = 0.f;
            for (int i = 0; i < QK; ++i) s += (float)q[i] * x[(size_t)t * K + b * QK + i];
            acc += d * s;
        }
        y[(size_t)t * N + n] = acc;
    }
}

// ---------------------------------------------------------------- v2: a warp per row
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_q8_0_warp(const uint8_t* __restrict__ w, const float* __restrict__ x, float* __restrict__ y, int N, int K)
{
    const int lane = threadIdx.x & 31;
    const int n = blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (n >= N) return;
    const int nb = K / QK;
    const uint8_t* row = w + (size_t)n * nb * QBYTES;
    float acc[BATCH];
#pragma unroll
    for (int t = 0; t < BATCH; ++t) acc[t] = 0.f;
    for (int b = lane; b < nb; b += 32) {
        const uint8_t* blk = row + b * QBYTES;
        const float d = ld_half(blk);
        const uint16_t* q2 = reinterpret_cast<const uint16_t*>(blk + 2);   // 2-byte aligned only
        float wq[QK];
#pragma unroll
        for (int i = 0; i < QK / 2; ++i) {
            const uint16_t v = q2[i];
            wq[2 * i] = (float)(int8_t)(v & 0xff);
            wq[2 * i + 1] = (float)(int8_t)(v >> 8);
        }
#pragma unroll
        for (int t = 0; t < BATCH; ++t) {
            const float4* xv = reinterpret_cast<const float4*>(x + (size_t)t * K + b * QK);
            float s = 0.f;
#pragma unroll
            for (int i = 0; i < QK / 4; ++i) {
                const float4 v = xv[i];
                s += wq[4 * i] * v.x + wq[4 * i + 1] * v.y + wq[4 * i + 2] * v.z + wq[4 * i + 3] * v.w;
            }
            acc[t] += d * s;
        }
    }
#pragma unroll
    for (int t = 0; t < BATCH; ++t) {
        const float s = warp_sum_f(acc[t]);
        if (lane == 0) y[(size_t)t * N + n] = s;
    }
}

// ---------------------------------------------------------------- activations -> int8 blocks
// One warp per 32-value block: amax by shuffles, d = amax/127, q = round(x/d)  (like Q8_0 / Q8_1).
// xq is [T, K] int8, xd is [T, K/32] fp32.  K % 32 == 0.
template <typename TIn>
__device__ __forceinline__ void quantize_act(const TIn* __restrict__ x, int8_t* __restrict__ xq, float* __restrict__ xd,
                                             int T, int K)
{
    pdl_wait();
    const long long gid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const int nb = K / QK;
    const long long blk = gid / 32;
    const int lane = threadIdx.x & 31;
    if (blk >= (long long)T * nb) return;              // whole warps leave together
    float d;                                            // [T, K] row-major: block blk starts at blk*32
    xq[blk * QK + lane] = quantize_q8_lane((float)x[blk * QK + lane], d);
    if (lane == 0) xd[blk] = d;
}
extern "C" __global__ void quantize_q8_act_f32(const float* x, int8_t* xq, float* xd, int T, int K) {
    quantize_act<float>(x, xq, xd, T, K);
}
PDL_READY(quantize_q8_act_f32);
extern "C" __global__ void quantize_q8_act_f16(const __half* x, int8_t* xq, float* xd, int T, int K) {
    quantize_act<__half>(x, xq, xd, T, K);
}
PDL_READY(quantize_q8_act_f16);

// ---------------------------------------------------------------- RMSNorm -> int8 blocks, fused
// The attention and FFN norms feed only GEMVs, which quantize what the norm wrote: one launch
// instead of a norm and a quantization per GEMV (three for q, k and v). The output is one "packed
// activation" buffer: xq int8 [T, D], then xd fp32 [T, D/32]. Bit for bit what rmsnorm_v3/v4
// (chapter 10, the same sums in the same order: WARP_SUM selects v4's warp-per-row reduction, used
// for D <= 1024) followed by quantize_q8_act_f32 give. Blocks of 256 threads, grid (T, D/256):
// every block of a row sums the whole row (16 KB at D = 4096, from L2), then its 8 warps quantize
// 8 blocks of 32 — a block per row would leave a decode step's one row on one SM.
#ifndef WARP_SUM
#define WARP_SUM 0
#endif
extern "C" __global__ void rmsnorm_quantize_q8(const float* __restrict__ x, const float* __restrict__ w,
                                               int8_t* __restrict__ xq, float* __restrict__ xd, int T, int D,
                                               float eps) {
    pdl_wait();
    __shared__ float red[32];
    const int r = blockIdx.x, tid = threadIdx.x, lane = tid % WARP, wid = tid / WARP, D4 = D / 4;
    const float4* xr = reinterpret_cast<const float4*>(x + (size_t)r * D);
    float ss = 0.f;
    float inv;
    if (WARP_SUM) {                              // v4: the first warp sums, lane-strided
        if (wid == 0) {
            for (int i = lane; i < D4; i += WARP) {
                float4 v = xr[i];
                ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
            }
            ss = warp_sum(ss);
            if (lane == 0) red[0] = rsqrtf(ss / D + eps);
        }
        __syncthreads();
        inv = red[0];
    } else {                                     // v3: the block sums, thread-strided
        for (int i = tid; i < D4; i += blockDim.x) {
            float4 v = xr[i];
            ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
        inv = rsqrtf(block_sum(ss, red) / D + eps);
    }
    const int nb = D / QK, b = blockIdx.y * (blockDim.x / WARP) + wid;
    if (b < nb) {                                // a warp per 32-block, as quantize_act does it
        const int i = b * QK + lane;
        float d;
        xq[(size_t)r * D + i] = quantize_q8_lane(x[(size_t)r * D + i] * inv * w[i], d);
        if (lane == 0) xd[(size_t)r * nb + b] = d;
    }
}
PDL_READY(rmsnorm_quantize_q8);

// ---------------------------------------------------------------- v3: dp4a + cp.async staging
#define TB 32                          // Q8_0 blocks per tile: one per lane
#define TILE_BYTES (TB * QBYTES)       // 1088
#define TILE_VEC 70                    // uint4 slots per row and stage (68 + misalignment + slack)


// The epilogue of v3 (EPI): 0 writes y; 1 (matmul_add) adds a residual, y = res + x @ w^T, so
// the block's add kernel disappears; 2 (matmul_swiglu) reads the rows of two matrices, gate = w
// and up = w2, through one pipeline (rows r < ROWS from w, ROWS + r from w2, same n) and writes
// y = silu(gate) * up: two GEMVs and the swiglu kernel in one launch; 3 (matmul_cat) streams the
// rows of up to three matrices laid end to end (w | w2 | w3, boundaries n1, n2; common.cuh's
// cat_row) into a planar y: q, k and v of one input in one launch. The epilogue's numbers (EPI_*) and
// gemv_store, which writes it, are common.cuh's: chapter 11c's GEMV shares them.

template <int EPI>
__device__ __forceinline__ void gemv_dp4a_body(uint4* smem, const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2,
                                               const float* __restrict__ res, const int8_t* __restrict__ xq,
                                               const float* __restrict__ xd, float* __restrict__ y, int N, int K,
                                               const uint8_t* __restrict__ w3 = nullptr, int n1 = 0, int n2 = 0, int nt = BATCH)
{
    constexpr int RR = EPI == EPI_GLU ? 2 * ROWS : ROWS;          // weight rows this warp streams
    auto buf = reinterpret_cast<uint4 (*)[NSTAGE][RR][TILE_VEC]>(smem);   // [WARPS][NSTAGE][RR][TILE_VEC]
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int n0 = (blockIdx.x * WARPS + wid) * ROWS;
    if (n0 >= N) return;
    const int nb = K / QK;
    const size_t row_bytes = (size_t)nb * QBYTES;
    const int ntiles = (nb + TB - 1) / TB;
    auto row_of = [&](int r) -> const uint8_t* {                  // weight row r of this warp
        if (EPI == EPI_CAT) return cat_row(w, w2, w3, n0 + r, n1, n2, row_bytes);
        return EPI == EPI_GLU && r >= ROWS ? w2 + (size_t)(n0 + r - ROWS) * row_bytes
                                           : w + (size_t)(n0 + r) * row_bytes;
    };
    auto valid = [&](int r) { return n0 + (EPI == EPI_GLU && r >= ROWS ? r - ROWS : r) < N; };

    // Issue the 16-byte copies of tile `tile` of our RR rows into stage `st`. The copy window
    // starts at the 16-byte boundary at or below the tile's first byte.
    auto issue = [&](int tile, int st) {
        const int nblk = min(TB, nb - tile * TB);
#pragma unroll
        for (int r = 0; r < RR; ++r) {
            if (!valid(r)) continue;
            const uintptr_t a = reinterpret_cast<uintptr_t>(row_of(r) + (size_t)tile * TILE_BYTES);
            const uintptr_t a0 = a & ~(uintptr_t)15;
            const int nvec = (int)(((a + nblk * QBYTES + 15) >> 4) - (a0 >> 4));
            const uint4* src = reinterpret_cast<const uint4*>(a0);
            for (int i = lane; i < nvec; i += 32) cp_async16(&buf[wid][st][r][i], src + i);
        }
    };

    float acc[RR][BATCH];
#pragma unroll
    for (int r = 0; r < RR; ++r)
#pragma unroll
        for (int t = 0; t < BATCH; ++t) acc[r][t] = 0.f;
    // prologue: NSTAGE-1 tiles in flight (always commit, maybe an empty group, to keep the count).
    // Weights only: under PDL they stream in while the kernel before this one finishes.
#pragma unroll
    for (int s = 0; s < NSTAGE - 1; ++s) {
        if (s < ntiles) issue(s, s);
        cp_async_commit();
    }
    pdl_wait();                                    // from here on: activations, residual, output
    // the residual, loaded now (lane r*BATCH + t holds row r, token t) so that its latency hides
    // behind the weights' instead of delaying the warp's last write
    float res_mine = 0.f;
    if (EPI == EPI_ADD && lane < ROWS * BATCH && n0 + lane / BATCH < N)
        res_mine = __ldg(res + (size_t)(lane % BATCH) * N + n0 + lane / BATCH);
    for (int tile = 0; tile < ntiles; ++tile) {
        cp_async_wait<NSTAGE - 2>();               // this lane's copies of `tile` have landed ...
        __syncwarp();                              // ... and everybody's
        const int nt = tile + NSTAGE - 1;          // refill the stage freed at the previous step
        if (nt < ntiles) issue(nt, nt % NSTAGE);
        cp_async_commit();
        const int b = tile * TB + lane;            // the block this lane decodes
        if (b < nb) {
            // this lane's 32 weights of each row, as 8 words of 4 int8, plus the scale
            int q[RR][8];
            float dw[RR];
#pragma unroll
            for (int r = 0; r < RR; ++r) {
                if (!valid(r)) { dw[r] = 0.f; for (int j = 0; j < 8; ++j) q[r][j] = 0; continue; }
                const uintptr_t a = reinterpret_cast<uintptr_t>(row_of(r) + (size_t)tile * TILE_BYTES);
                const int o = (int)(a & 15) + lane * QBYTES;      // byte offset of the block in the stage
                const uint32_t* s32 = reinterpret_cast<const uint32_t*>(&buf[wid][tile % NSTAGE][r][0]);
                const uint32_t wd = s32[o >> 2];
                const uint16_t hb = (o & 2) ? (uint16_t)(wd >> 16) : (uint16_t)(wd & 0xffff);
                dw[r] = __half2float(__ushort_as_half(hb));
                const int qo = o + 2, w0 = qo >> 2, sh = (qo & 3) * 8;   // sh is 0 or 16
#pragma unroll
                for (int j = 0; j < 8; ++j) q[r][j] = (int)__funnelshift_r(s32[w0 + j], s32[w0 + j + 1], sh);
            }
#pragma unroll
            for (int t = 0; t < BATCH; ++t) {
                const int4* xv = reinterpret_cast<const int4*>(xq + (size_t)t * K + (size_t)b * QK);
                const int4 x0 = __ldg(xv), x1 = __ldg(xv + 1);
                const float dx = __ldg(xd + (size_t)t * nb + b);
#pragma unroll
                for (int r = 0; r < RR; ++r) {
                    int s = 0;
                    s = __dp4a(q[r][0], x0.x, s); s = __dp4a(q[r][1], x0.y, s);
                    s = __dp4a(q[r][2], x0.z, s); s = __dp4a(q[r][3], x0.w, s);
                    s = __dp4a(q[r][4], x1.x, s); s = __dp4a(q[r][5], x1.y, s);
                    s = __dp4a(q[r][6], x1.z, s); s = __dp4a(q[r][7], x1.w, s);
                    acc[r][t] += dw[r] * dx * (float)s;
                }
            }
        }
        __syncwarp();                               // everyone is done with this stage
    }
    gemv_store<EPI, ROWS>(acc, res_mine, y, n0, N, n1, n2, nt);
}

extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_q8_0_dp4a(const uint8_t* __restrict__ w, const int8_t* __restrict__ xq, const float* __restrict__ xd,
               float* __restrict__ y, int N, int K)
{
    __shared__ __align__(16) uint4 buf[WARPS * NSTAGE * ROWS * TILE_VEC];
    gemv_dp4a_body<EPI_NONE>(buf, w, nullptr, nullptr, xq, xd, y, N, K);
}
PDL_READY(gemv_q8_0_dp4a);
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_q8_0_dp4a_add(const uint8_t* __restrict__ w, const float* __restrict__ res, const int8_t* __restrict__ xq,
                   const float* __restrict__ xd, float* __restrict__ y, int N, int K)
{
    __shared__ __align__(16) uint4 buf[WARPS * NSTAGE * ROWS * TILE_VEC];
    gemv_dp4a_body<EPI_ADD>(buf, w, nullptr, res, xq, xd, y, N, K);
}
PDL_READY(gemv_q8_0_dp4a_add);
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_q8_0_dp4a_cat(const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2, const uint8_t* __restrict__ w3,
                   const int8_t* __restrict__ xq, const float* __restrict__ xd, float* __restrict__ y, int N, int K,
                   int n1, int n2)
{
    __shared__ __align__(16) uint4 buf[WARPS * NSTAGE * ROWS * TILE_VEC];
    gemv_dp4a_body<EPI_CAT>(buf, w, w2, nullptr, xq, xd, y, N, K, w3, n1, n2);
}
PDL_READY(gemv_q8_0_dp4a_cat);
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_q8_0_dp4a_glu(const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2, const int8_t* __restrict__ xq,
                   const float* __restrict__ xd, float* __restrict__ y, int N, int K)
{
    extern __shared__ __align__(16) uint4 dyn[];      // twice the rows: sized by the launcher (may pass 48 KB)
    gemv_dp4a_body<EPI_GLU>(dyn, w, w2, nullptr, xq, xd, y, N, K);
}
PDL_READY(gemv_q8_0_dp4a_glu);

// v3 over the tiles of a mixture of experts (chapter 11d): grid (row blocks, tile slots). A tile is
// up to BATCH sorted rows of one expert e (common.cuh's moe_tile); its weights start e * estride
// bytes into w (and w2: gate and up, EPI_GLU), its activations and outputs at its first row. The
// expert comes from the step before, so nothing is loaded before pdl_wait.
template <int EPI>
__device__ __forceinline__ void gemv_moe(uint4* smem, const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2,
                                         const int* __restrict__ tiles, long long estride, const int8_t* __restrict__ xq,
                                         const float* __restrict__ xd, float* __restrict__ y, int N, int K)
{
    pdl_wait();
    const int3 t = moe_tile(tiles, blockIdx.y);        // grid.y: the tile slots
    if (t.x < 0) return;
    gemv_dp4a_body<EPI>(smem, w + t.x * estride, EPI == EPI_GLU ? w2 + t.x * estride : nullptr, nullptr,
                        xq + (size_t)t.y * K, xd + (size_t)t.y * (K / QK), y + (size_t)t.y * N, N, K,
                        nullptr, 0, 0, t.z);
}
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_q8_0_moe(const uint8_t* __restrict__ w, const int* __restrict__ tiles, long long estride,
              const int8_t* __restrict__ xq, const float* __restrict__ xd, float* __restrict__ y, int N, int K)
{
    __shared__ __align__(16) uint4 buf[WARPS * NSTAGE * ROWS * TILE_VEC];
    gemv_moe<EPI_NONE>(buf, w, nullptr, tiles, estride, xq, xd, y, N, K);
}
PDL_READY(gemv_q8_0_moe);
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_q8_0_moe_glu(const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2, const int* __restrict__ tiles,
                  long long estride, const int8_t* __restrict__ xq, const float* __restrict__ xd,
                  float* __restrict__ y, int N, int K)
{
    extern __shared__ __align__(16) uint4 dyn[];
    gemv_moe<EPI_GLU>(dyn, w, w2, tiles, estride, xq, xd, y, N, K);
}
PDL_READY(gemv_q8_0_moe_glu);

// ---------------------------------------------------------------- v4: v3 on a persistent grid
// v3 launches one short-lived warp per ROWS rows: at K = 4096 a row is only 4 tiles, so every warp
// fills its pipeline, drains it and exits, and the last wave of blocks runs on a part-empty GPU.
// v4 launches just enough blocks to fill every SM once (the launcher sizes the grid from the SM
// count and the occupancy) and lets each warp walk row groups gw, gw + nwarps, ... through ONE
// cp.async pipeline: the (row group, tile) sequence is flattened, so the copies of the next row
// are in flight while the last tile of this row is decoded, and no warp ever waits at a row end.
// Same tile decoding and dp4a arithmetic as v3 (so the same reference).
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gemv_q8_0_persist(const uint8_t* __restrict__ w, const int8_t* __restrict__ xq, const float* __restrict__ xd,
                  float* __restrict__ y, int N, int K)
{
    __shared__ __align__(16) uint4 buf[WARPS][NSTAGE][ROWS][TILE_VEC];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int gw = blockIdx.x * WARPS + wid, nw = gridDim.x * WARPS;    // this warp, all warps
    const int ngroups = (N + ROWS - 1) / ROWS;
    if (gw >= ngroups) return;
    const int nb = K / QK;
    const size_t row_bytes = (size_t)nb * QBYTES;
    const int ntiles = (nb + TB - 1) / TB;
    const int total = ((ngroups - 1 - gw) / nw + 1) * ntiles;           // (group, tile) steps of this warp

    auto issue = [&](int j, int st) {                                   // step j -> stage st
        const int n0 = (gw + (j / ntiles) * nw) * ROWS, tile = j % ntiles;
        const int nblk = min(TB, nb - tile * TB);
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            if (n0 + r >= N) break;
            const uintptr_t a = reinterpret_cast<uintptr_t>(w + (size_t)(n0 + r) * row_bytes + (size_t)tile * TILE_BYTES);
            const uintptr_t a0 = a & ~(uintptr_t)15;
            const int nvec = (int)(((a + nblk * QBYTES + 15) >> 4) - (a0 >> 4));
            const uint4* src = reinterpret_cast<const uint4*>(a0);
#pragma unroll 3
            for (int i = lane; i < nvec; i += 32) cp_async16(&buf[wid][st][r][i], src + i);
        }
    };

    float acc[ROWS][BATCH];
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int t = 0; t < BATCH; ++t) acc[r][t] = 0.f;
#pragma unroll
    for (int s = 0; s < NSTAGE - 1; ++s) {
        if (s < total) issue(s, s);
        cp_async_commit();
    }
    pdl_wait();                                    // weights in flight; now the activations
    int tile = 0, n0 = gw * ROWS;
    for (int j = 0; j < total; ++j) {
        cp_async_wait<NSTAGE - 2>();
        __syncwarp();
        const int nt = j + NSTAGE - 1;
        if (nt < total) issue(nt, nt % NSTAGE);
        cp_async_commit();
        const int b = tile * TB + lane;
        if (b < nb) {
            int q[ROWS][8];
            float dw[ROWS];
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                if (n0 + r >= N) { dw[r] = 0.f; for (int i = 0; i < 8; ++i) q[r][i] = 0; continue; }
                const uintptr_t a = reinterpret_cast<uintptr_t>(w + (size_t)(n0 + r) * row_bytes + (size_t)tile * TILE_BYTES);
                const int o = (int)(a & 15) + lane * QBYTES;
                const uint32_t* s32 = reinterpret_cast<const uint32_t*>(&buf[wid][j % NSTAGE][r][0]);
                const uint32_t wd = s32[o >> 2];
                const uint16_t hb = (o & 2) ? (uint16_t)(wd >> 16) : (uint16_t)(wd & 0xffff);
                dw[r] = __half2float(__ushort_as_half(hb));
                const int qo = o + 2, w0 = qo >> 2, sh = (qo & 3) * 8;
#pragma unroll
                for (int i = 0; i < 8; ++i) q[r][i] = (int)__funnelshift_r(s32[w0 + i], s32[w0 + i + 1], sh);
            }
#pragma unroll
            for (int t = 0; t < BATCH; ++t) {
                const int4* xv = reinterpret_cast<const int4*>(xq + (size_t)t * K + (size_t)b * QK);
                const int4 x0 = __ldg(xv), x1 = __ldg(xv + 1);
                const float dx = __ldg(xd + (size_t)t * nb + b);
#pragma unroll
                for (int r = 0; r < ROWS; ++r) {
                    int s = 0;
                    s = __dp4a(q[r][0], x0.x, s); s = __dp4a(q[r][1], x0.y, s);
                    s = __dp4a(q[r][2], x0.z, s); s = __dp4a(q[r][3], x0.w, s);
                    s = __dp4a(q[r][4], x1.x, s); s = __dp4a(q[r][5], x1.y, s);
                    s = __dp4a(q[r][6], x1.z, s); s = __dp4a(q[r][7], x1.w, s);
                    acc[r][t] += dw[r] * dx * (float)s;
                }
            }
        }
        __syncwarp();
        if (++tile == ntiles) {                      // row group done: reduce, write, next group
#pragma unroll
            for (int r = 0; r < ROWS; ++r)
#pragma unroll
                for (int t = 0; t < BATCH; ++t) {
                    const float s = warp_sum_f(acc[r][t]);
                    if (lane == 0 && n0 + r < N) y[(size_t)t * N + n0 + r] = s;
                    acc[r][t] = 0.f;
                }
            tile = 0;
            n0 += nw * ROWS;
        }
    }
}
PDL_READY(gemv_q8_0_persist);

// ---------------------------------------------------------------- Q8_0 -> fp16 (prefill path)
// out[n, k] = d * q for rows [0, R) of w; a thread per output element (coalesced writes).
extern "C" __global__ void dequant_q8_0_f16(const uint8_t* __restrict__ w, __half* __restrict__ out, int R, int K)
{
    const int nb = K / QK;
    const long long total = (long long)R * K;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        const long long n = i / K;
        const int k = (int)(i - n * K);
        const uint8_t* blk = w + (size_t)n * nb * QBYTES + (k / QK) * QBYTES;
        out[i] = __float2half_rn(ld_half(blk) * (float)(int8_t)blk[2 + (k % QK)]);
    }
}

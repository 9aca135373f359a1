// Chapter 11d: a mixture of experts on the GPU. A layer's feed-forward is E SwiGLU experts; each
// token runs the k its router likes best. The steps, all on the device (no host round trip, so a
// decode step stays one replayed CUDA graph):
//   moe_route    router logits [T, E] -> each token's k experts (ids) and weights, and how many
//                pairs (token, expert) each expert got (counts, atomically: a sum is a sum); or,
//                when a tile is one pair (decode), the tile table itself: no sort
//   moe_sort     the pairs grouped by expert, in pair order within an expert (no atomics: the
//                same order at every run): perm (sorted row -> pair), pos (pair -> sorted row),
//                and the tiles of at most BM rows of one expert that the GEMVs take
//   moe_gather_*  the tokens' activations in sorted order (int8 blocks, f32 or fp16 rows)
//   (the experts over the tiles: the GEMVs of gemv_q8_0.cu and gemv_quant.cu, moe_gemv_f below for
//   float weights; at prefill the tensor cores, matmul_q8_tma.cu and matmul_quant_tma.cu's GROUPED)
//   moe_combine  out[t] = (res[t] +) sum_j w[t, j] * y[pos[t, j]], in j order (deterministic)
#include "common.cuh"
#include "gemv_f.cuh"

#ifndef BLOCK
#define BLOCK 128        // threads of moe_sort
#endif
#ifndef ROUTE_WARPS
#define ROUTE_WARPS 8    // warps of moe_route: one routes, the others quantize the activations (decode)
#endif

// Token t's activations x [D] as int8 blocks of 32 (quantize_q8_lane's numbers: d = amax / 127,
// codes x / d rounded to nearest), written into the k sorted rows row0 .. row0 + k - 1 its pairs
// take: moe_gather_q8's work on the pair road. Threads i0, i0 + n, ... (whole warps) take 4 values
// each, 8 lanes a block.
__device__ __forceinline__ void quantize_pair_rows(const float* __restrict__ x, int8_t* __restrict__ xq,
                                                   float* __restrict__ xd, int D, size_t row0, int k, int i0, int n)
{
    const int lane = threadIdx.x & 31, n4 = D / 4;                 // D % 32 == 0: a block never straddles
    for (int base = i0 & ~31; base < n4; base += n) {              // the bound is the warp's (shuffles)
        const int i = base + lane;
        const float4 v = i < n4 ? reinterpret_cast<const float4*>(x)[i] : make_float4(0.f, 0.f, 0.f, 0.f);
        float a = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
        for (int o = 4; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
        if (i >= n4) continue;                                     // (8 lanes, all in or all out)
        const float d = a / 127.f;
        const float c[4] = {v.x, v.y, v.z, v.w};
        unsigned q = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) q |= (unsigned)(unsigned char)(d > 0.f ? __float2int_rn(c[j] / d) : 0) << 8 * j;
        for (int j = 0; j < k; ++j) {
            reinterpret_cast<unsigned*>(xq + (row0 + j) * D)[i] = q;
            if (lane % 8 == 0) xd[(row0 + j) * (D / 32) + i / 8] = d;
        }
    }
}

// One block per token. Its first warp routes: the softmax over the token's E logits, then k rounds
// of "the likeliest expert not taken yet" (ties to the lower expert: numpy's stable argsort), each a
// warp's argmax by shuffles, lane 0's answer for all. w = p, or p / sum of the k p's (norm). A NaN
// logit can never pick an id outside [0, E): a round takes the first untaken expert unless another
// compares greater. With `tiles` (tiles of one pair in pair order: a decode step) pair q = t k + j is
// sorted row q and tile q, so the picks write the table and moe_sort is not needed; else they count.
// With `xq` too, the block's other warps meanwhile quantize the token's activations x into its k
// rows (the sorted rows of its pairs, whatever experts they take): no gather kernel at decode.
extern "C" __global__ void __launch_bounds__(32 * ROUTE_WARPS)
moe_route(const float* __restrict__ logits, int* __restrict__ ids, float* __restrict__ wts,
          int* __restrict__ counts, int* __restrict__ perm, int* __restrict__ pos, int* __restrict__ tiles,
          const float* __restrict__ x, int8_t* __restrict__ xq, float* __restrict__ xd, int D, int E, int k, int norm)
{
    extern __shared__ float p[];                       // [E] probabilities, then E bytes of "taken"
    unsigned char* taken = reinterpret_cast<unsigned char*>(p + E);
    pdl_wait();
    const int t = blockIdx.x, lane = threadIdx.x & 31;
    if (threadIdx.x >= 32) {
        if (tiles && xq)
            quantize_pair_rows(x + (size_t)t * D, xq, xd, D, (size_t)t * k, k, threadIdx.x - 32, blockDim.x - 32);
        return;
    }
    const float* lg = logits + (size_t)t * E;
    float m = -INFINITY;
    for (int e = lane; e < E; e += 32) m = fmaxf(m, lg[e]);
    m = warp_max(m);
    float s = 0.f;
    for (int e = lane; e < E; e += 32) {
        const float v = expf(lg[e] - m);
        p[e] = v;
        taken[e] = 0;
        s += v;
    }
    s = warp_sum(s);
    for (int e = lane; e < E; e += 32) p[e] = p[e] / s;   // (a lane reads back only its own entries)
    __syncwarp();
    float wsum = 0.f;
    for (int j = 0; j < k; ++j) {
        float bv = 0.f;
        int bi = -1;
        for (int e = lane; e < E; e += 32)             // e rises: a tie keeps the lower one
            if (!taken[e] && (bi < 0 || p[e] > bv)) { bv = p[e]; bi = e; }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {             // the warp's best: greater, or equal and lower
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) {
                bv = ov; bi = oi;
            }
        }
        if (lane == 0) {                               // (with NaNs lanes may disagree: lane 0 decides)
            const int q = t * k + j;
            taken[bi] = 1;
            ids[q] = bi;
            wts[q] = p[bi];
            wsum += p[bi];
            if (tiles) {
                perm[q] = pos[q] = q;
                tiles[3 * (size_t)q] = bi; tiles[3 * (size_t)q + 1] = q; tiles[3 * (size_t)q + 2] = 1;
            } else {
                atomicAdd(counts + bi, 1);
            }
        }
        __syncwarp();                                  // taken[bi] is seen by every lane
    }
    if (norm && lane == 0)
        for (int j = 0; j < k; ++j) wts[(size_t)t * k + j] = wts[(size_t)t * k + j] / wsum;
}
PDL_READY(moe_route);

// One block per expert e: its pairs' places in the sorted order. Rows [start_e, start_e + count_e)
// belong to e (start_e: the counts of the experts before it), in pair order: the block walks the
// pairs BLOCK at a time, and a pair's rank is the matching pairs before it (ballots, then the
// warps' totals). Its tiles: ceil(count_e / rows) slots from tile_e (the tiles of the experts
// before it), each (e, first row, at most `rows` rows); the last expert marks the unused slots (-1).
extern "C" __global__ void __launch_bounds__(BLOCK)
moe_sort(const int* __restrict__ ids, const int* __restrict__ counts, int* __restrict__ perm,
         int* __restrict__ pos, int* __restrict__ tiles, int P, int E, int rows, int max_tiles)
{
    __shared__ int red[BLOCK / 32];
    __shared__ int base;
    pdl_wait();
    const int e = blockIdx.x, tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    int start = 0, tile0 = 0;
    for (int i = tid; i < e; i += BLOCK) {             // counts and tiles of the experts before e
        start += counts[i];
        tile0 += (counts[i] + rows - 1) / rows;
    }
    for (int o = 16; o > 0; o >>= 1) {
        start += __shfl_xor_sync(0xffffffffu, start, o);
        tile0 += __shfl_xor_sync(0xffffffffu, tile0, o);
    }
    __shared__ int s_start[BLOCK / 32], s_tile[BLOCK / 32];
    if (lane == 0) { s_start[wid] = start; s_tile[wid] = tile0; }
    if (tid == 0) base = 0;
    __syncthreads();
    start = tile0 = 0;
    for (int w = 0; w < BLOCK / 32; ++w) { start += s_start[w]; tile0 += s_tile[w]; }
    const int n = counts[e], nt = (n + rows - 1) / rows;
    for (int i = tid; i < nt; i += BLOCK) {
        int* s = tiles + 3 * (size_t)(tile0 + i);
        s[0] = e; s[1] = start + i * rows; s[2] = min(rows, n - i * rows);
    }
    if (e == E - 1)                                    // the slots past the last tile: none
        for (int i = tile0 + nt + tid; i < max_tiles; i += BLOCK) tiles[3 * (size_t)i] = -1;
    for (int c = 0; c < P; c += BLOCK) {
        const int q = c + tid;
        const bool mine = q < P && ids[q] == e;
        const unsigned b = __ballot_sync(0xffffffffu, mine);
        if (lane == 0) red[wid] = __popc(b);
        __syncthreads();
        int before = base;
        for (int w = 0; w < wid; ++w) before += red[w];
        if (mine) {
            const int r = start + before + __popc(b & ((1u << lane) - 1u));
            perm[r] = q;
            pos[q] = r;
        }
        __syncthreads();
        if (tid == 0) for (int w = 0; w < BLOCK / 32; ++w) base += red[w];
        __syncthreads();
    }
}
PDL_READY(moe_sort);

// Sorted row r <- token perm[r] / k of x [T, D] f32: as int8 blocks of 32 (the GEMVs' activations,
// quantize_q8_lane as gemv_q8_0.cu's quantize_act does it), one warp per block of 32 ...
extern "C" __global__ void moe_gather_q8(const float* __restrict__ x, const int* __restrict__ perm,
                                         int8_t* __restrict__ xq, float* __restrict__ xd, int P, int D, int k)
{
    pdl_wait();
    const int nb = D / 32, lane = threadIdx.x & 31;
    const long long blk = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
    if (blk >= (long long)P * nb) return;              // whole warps leave together
    const int r = (int)(blk / nb), b = (int)(blk % nb);
    float d;
    xq[blk * 32 + lane] = quantize_q8_lane(x[(size_t)(perm[r] / k) * D + b * 32 + lane], d);
    if (lane == 0) xd[blk] = d;
}
PDL_READY(moe_gather_q8);

// ... or as f32 rows (the float experts' GEMV), or fp16 rows (the tensor cores' tiles). Grid (D / 256, P).
template <typename TOut>
__device__ __forceinline__ void moe_gather(const float* __restrict__ x, const int* __restrict__ perm,
                                           TOut* __restrict__ xs, int D, int k)
{
    pdl_wait();
    const int r = blockIdx.y;
    const float* src = x + (size_t)(perm[r] / k) * D;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < D; i += gridDim.x * blockDim.x)
        xs[(size_t)r * D + i] = (TOut)src[i];
}
extern "C" __global__ void moe_gather_f32(const float* __restrict__ x, const int* __restrict__ perm,
                                          float* __restrict__ xs, int D, int k)
{
    moe_gather<float>(x, perm, xs, D, k);
}
PDL_READY(moe_gather_f32);
extern "C" __global__ void moe_gather_f16(const float* __restrict__ x, const int* __restrict__ perm,
                                          __half* __restrict__ xs, int D, int k)
{
    moe_gather<__half>(x, perm, xs, D, k);
}
PDL_READY(moe_gather_f16);

// out[t, :] = res[t, :] + sum over j of w[t, j] * y[pos[t k + j], :]: each token's k expert
// outputs, weighted, added in j order, after the residual (moe_ffn_add; res null: none). Grid
// (D / 256 rounded up, T) of 256 threads. A thread reads its element of res before it writes
// out's, so out may be res.
extern "C" __global__ void moe_combine(const float* __restrict__ y, const int* __restrict__ pos,
                                       const float* __restrict__ wts, const float* res, float* out, int D, int k)
{
    pdl_wait();
    const int t = blockIdx.y;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < D; i += gridDim.x * blockDim.x) {
        float s = res ? res[(size_t)t * D + i] : 0.f;
        for (int j = 0; j < k; ++j) s += wts[(size_t)t * k + j] * y[(size_t)pos[(size_t)t * k + j] * D + i];
        out[(size_t)t * D + i] = s;
    }
}
PDL_READY(moe_combine);

// ---------------------------------------------------------------- float experts (F32, F16, BF16)
// The GEMV over a tile for weights stored as floats (an HF folder's experts, a GGUF's F16): gemv_f.cuh's
// warp per output row, the tile's rows (<= BM) of f32 activations against its expert's weights.
#ifndef WT
#define WT float
#endif
#ifndef BM
#define BM 8
#endif
template <bool GLU>
__device__ __forceinline__ void moe_gemv_f_body(const WT* __restrict__ w, const WT* __restrict__ w2,
                                                const int* __restrict__ tiles, long long estride,
                                                const float* __restrict__ x, float* __restrict__ y, int N, int K)
{
    pdl_wait();
    const int3 tl = moe_tile(tiles, blockIdx.y);
    const int e = tl.x, m0 = tl.y, nt = tl.z;
    const int n = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    if (e < 0 || n >= N) return;
    gemv_f_rows<BM, GLU>(w + e * estride + (size_t)n * K, GLU ? w2 + e * estride + (size_t)n * K : nullptr,
                         x + (size_t)m0 * K, y + (size_t)m0 * N, nt, n, N, K);
}

extern "C" __global__ void moe_gemv_f(const WT* __restrict__ w, const int* __restrict__ tiles, long long estride,
                                      const float* __restrict__ x, float* __restrict__ y, int N, int K)
{
    moe_gemv_f_body<false>(w, nullptr, tiles, estride, x, y, N, K);
}
PDL_READY(moe_gemv_f);
extern "C" __global__ void moe_gemv_f_glu(const WT* __restrict__ w, const WT* __restrict__ w2, const int* __restrict__ tiles,
                                          long long estride, const float* __restrict__ x, float* __restrict__ y, int N, int K)
{
    moe_gemv_f_body<true>(w, w2, tiles, estride, x, y, N, K);
}
PDL_READY(moe_gemv_f_glu);

// common.cuh: small device helpers shared by tffedu's kernels (chapters 10-12).
// Plain CUDA C; compiled at run time by PyCUDA's SourceModule (no_extern_c=True, so every
// kernel that Python looks up by name is declared extern "C").
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#define WARP 32

// ---- shared memory addresses and cp.async (every kernel that stages tiles) ----------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// copy 16 bytes global -> shared without waiting (cp.async.cg: through L2 only); the 3-argument
// form copies src_bytes of them (0 .. 16) and fills the rest with zeros (rows past a tensor's edge)
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src) { cp_async16(smem_u32(dst), src); }
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
    cp_async16(smem_u32(dst), src, src_bytes);
}
__device__ __forceinline__ void cp_async8(uint32_t dst, const void* src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// this thread's copies but the last N committed groups have landed
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// Programmatic dependent launch (PDL, chapter 13). A kernel launched with the PDL attribute may be
// started while the kernel before it in the stream is still running. pdl_wait() first lets the next
// kernel in the stream start launching (its blocks run up to their own pdl_wait), then blocks until
// the kernel before has finished and its writes are visible. Kernels several places down the stream
// may so run their part before pdl_wait while this one still runs: before it a kernel reads only what
// no kernel of the step writes -- constant weights, the step's inputs (chapter 12's decode attention:
// also the keys of earlier steps) -- and writes nothing. Without the attribute it is a no-op.
// PDL_READY(kernel), next to a kernel that calls pdl_wait() in time, is the flag the loader finds
// (a symbol kernel_pdl): only such kernels get the attribute.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" :::);
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
#define PDL_READY(kernel) extern "C" __device__ int kernel##_pdl = 1

// 2^x with the SFU instruction itself (exp2f adds denormal handling we do not need: the online
// softmaxes only ever exponentiate numbers <= 0, and results below 2^-126 are as good as 0;
// ex2(-inf) = 0).  Chapter 12's attention kernels.
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
// two floats -> an fp16 pair in one register (lo in the low half)
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&h);
}

// This block's query block and head in a causal attention grid, the longest (last) query blocks
// first: grid (q-blocks, Hq, B), or heads_first (Hq, q-blocks, B), where the first wave holds the
// longest blocks of ALL heads.  Chapter 12's flash kernels (their GRID_HQ).
template <bool HEADS_FIRST>
__device__ __forceinline__ void causal_block(int& qb, int& h) {
    qb = HEADS_FIRST ? gridDim.y - 1 - blockIdx.y : gridDim.x - 1 - blockIdx.x;
    h = HEADS_FIRST ? blockIdx.x : blockIdx.y;
}

// The pool row of position r of a sequence, through its row of the page table (max_pages entries,
// pages of ps rows, a pool of n_pages pages), or -1 where there is none: a position past the
// table, or an id outside the pool.  A hostile table then reads zeros, never outside the pages.
// Chapter 12's paged attention kernels.
__device__ __forceinline__ long page_row(const int* tab, int r, int ps, int max_pages, int n_pages) {
    const int pg = r / ps, id = r >= 0 && pg < max_pages ? tab[pg] : -1;
    return id >= 0 && id < n_pages ? (long)id * ps + r % ps : -1;
}

// SwiGLU's gate: silu(g) = g * sigmoid(g) (elementwise.cu, and the Q8_0 GEMV's and GEMM's epilogues).
__device__ __forceinline__ float silu(float g) { return g / (1.f + __expf(-g)); }

// Sum / max of a float over the 32 lanes of a warp: every lane gets the result.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The activations' int8 blocks (what the GEMVs read, like Q8_0 / Q8_1): a warp's 32 lanes hold one
// block's values; each gets its code against the block's scale d = amax / 127 (returned in d).
__device__ __forceinline__ int8_t quantize_q8_lane(float v, float& d) {
    d = warp_max(fabsf(v)) / 127.f;
    return (int8_t)(d > 0.f ? __float2int_rn(v / d) : 0);
}

// One Q8_0 block (chapter 03a: d as f16, then 32 int8 codes; 34 bytes at `blk`, 2-byte aligned) of
// the 32 values a warp holds, one a lane, as the numpy quantizer makes it (tffedu.quant, gguf-py):
// d = amax / 127, codes x * (1 / d) rounded halves away from zero. The _rn intrinsics keep nvcc
// from fusing the multiply and the add into an FMA, which would round once where numpy rounds twice.
// The 8-bit K/V pages (chapter 12) are written with it.
__device__ __forceinline__ void store_q8_0_block(float x, unsigned char* blk) {
    const int lane = threadIdx.x % WARP;
    const float d = warp_max(fabsf(x)) / 127.f, v = __fmul_rn(x, d != 0.f ? 1.f / d : 0.f);
    blk[2 + lane] = (unsigned char)(signed char)truncf(__fadd_rn(v, copysignf(0.5f, v)));
    if (lane == 0) *reinterpret_cast<__half*>(blk) = __float2half_rn(d);
}

// Block-wide sum with warp shuffles: one partial per warp goes through shared memory.
// `red` must hold 32 floats. Every thread gets the result. blockDim.x must be a multiple of 32.
__device__ __forceinline__ float block_sum(float v, float* red) {
    const int lane = threadIdx.x % WARP, wid = threadIdx.x / WARP, nw = blockDim.x / WARP;
    v = warp_sum(v);
    __syncthreads();                       // `red` may still be read by a previous call
    if (lane == 0) red[wid] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : 0.f;
    return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* red) {
    const int lane = threadIdx.x % WARP, wid = threadIdx.x / WARP, nw = blockDim.x / WARP;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) red[wid] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : -INFINITY;
    return warp_max(v);
}

// A matmul over up to three weights laid end to end ("cat": q, k and v; gate and up): output rows
// [0, n1) come from the first, [n1, n2) from the second, [n2, N) from the third.  The output is
// planar: each weight's [T, rows] block after the previous one, so every part is a contiguous
// tensor.  One weight is n1 = n2 = N: plain row-major [T, N].
__device__ __forceinline__ size_t cat_index(int t, int n, int T, int N, int n1, int n2) {
    const int s0 = n < n1 ? 0 : (n < n2 ? n1 : n2);             // the part's first row
    const int rows = (n < n1 ? n1 : (n < n2 ? n2 : N)) - s0;
    return (size_t)T * s0 + (size_t)t * rows + (n - s0);
}
// weight row n of the parts w0 | w1 | w2 (rows of row_bytes each)
__device__ __forceinline__ const uint8_t* cat_row(const uint8_t* w0, const uint8_t* w1, const uint8_t* w2,
                                                  int n, int n1, int n2, size_t row_bytes) {
    return n < n1 ? w0 + (size_t)n * row_bytes
                  : (n < n2 ? w1 + (size_t)(n - n1) * row_bytes : w2 + (size_t)(n - n2) * row_bytes);
}

// The GEMVs' epilogues (gemv_q8_0.cu's v3, gemv_quant.cu): 0 writes y; 1 adds a residual; 2 writes
// silu(gate) * up of the rows of two matrices; 3 writes the rows of w | w2 | w3 into a planar y.
#define EPI_NONE 0
#define EPI_ADD 1
#define EPI_GLU 2
#define EPI_CAT 3

__device__ __forceinline__ float warp_sum_f(float v) {        // every lane gets the warp's sum
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
// A warp's partial sums of rows n0 .. n0 + R - 1 (for EPI_GLU their up rows follow, R + r) for T
// tokens -> y through the epilogue; res_mine: lane r * T + t holds the residual of row n0 + r, token t;
// only the first nt tokens are written (a mixture of experts' tile of fewer rows: chapter 11d)
template <int EPI, int R, int RR, int T>
__device__ __forceinline__ void gemv_store(float (&acc)[RR][T], float res_mine, float* __restrict__ y,
                                           int n0, int N, int n1, int n2, int nt = T) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < T; ++t) {
            float s = warp_sum_f(acc[r][t]);
            if (EPI == EPI_GLU) s = silu(s) * warp_sum_f(acc[R + r][t]);
            if (EPI == EPI_ADD) s = __shfl_sync(0xffffffffu, res_mine, r * T + t) + s;
            if (lane == 0 && n0 + r < N && t < nt)
                y[EPI == EPI_CAT ? cat_index(t, n0 + r, T, N, n1, n2) : (size_t)t * N + n0 + r] = s;
        }
}

// Chapter 11d: tile slot `slot` of a grouped launch over a mixture of experts (the table moe.cu's
// moe_sort wrote): (expert, first sorted row, rows); expert -1: an unused slot.
__device__ __forceinline__ int3 moe_tile(const int* __restrict__ tiles, int slot) {
    const int* t = tiles + 3 * (size_t)slot;
    return make_int3(t[0], t[1], t[2]);
}
// The rows a tile slot of a grouped GEMM covers: sorted token rows [m0, mend) are expert e's, whose
// weights start e * n1 rows in (wrow); false for an unused slot.
__device__ __forceinline__ bool moe_tile_box(const int* __restrict__ tiles, int slot, int n1, int& wrow, int& m0,
                                             int& mend) {
    const int3 tl = moe_tile(tiles, slot);
    if (tl.x < 0) return false;
    wrow = tl.x * n1;
    m0 = tl.y;
    mend = m0 + tl.z;
    return true;
}

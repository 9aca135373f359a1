// Chapter 11, version 5: Hopper's warpgroup MMA.  y[M,N] (fp32) = x[M,K] @ w[N,K]^T, fp16/bf16 in.
//
// Version 4 feeds the tensor cores one warp at a time with mma.sync, every operand passing through
// registers (ldmatrix).  Hopper adds wgmma: a *warpgroup* (4 consecutive warps, 128 threads) issues
// one asynchronous m64nNk16 product whose operands the tensor cores read straight from shared memory,
// described by a 64-bit "matrix descriptor" (address, stride between 8-row groups, swizzle mode).
//   * the block has 2 warpgroups (256 threads); each owns 64 rows of the BM = 128-row tile and the
//     whole BN (128 or 256) width: one wgmma.m64n{BN}k16 per 16-wide k step, 4 per BK = 64 tile;
//   * tiles arrive with cp.async (STAGES-deep ring) in exactly the hardware's 128-byte swizzle:
//     rows of BK = 64 halves = 128 bytes, 16-byte chunk c of row r stored at c ^ (r % 8), tile bases
//     1024-byte aligned; so a descriptor with "128B swizzle" and an 8-row stride of 1024 bytes
//     describes it, and stepping 16 elements along k is adding 32 bytes to the start address;
//   * cp.async writes go through the generic proxy, wgmma reads through the async proxy:
//     fence.proxy.async before the barrier that publishes a tile;
//   * one wgmma batch stays in flight (wgmma.wait_group 1) while the next is issued, so the refill
//     distance is STAGES-2 tiles.
// Needs sm_90a (compile with -arch sm_90a).  K % 8 == 0, x and w 16-byte aligned; M, N any.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#ifndef BN
#define BN 128
#endif
#ifndef STAGES
#define STAGES 5
#endif
#define BM 128
#define BK 64
#define NTHREADS 256
#define CPR (BK / 8)
static_assert(BN == 128 || BN == 256, "BN must be 128 or 256");
static_assert(STAGES >= 3, "STAGES >= 3");

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ void fence_reg(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// Matrix descriptor: start address >> 4 (bits 0-13), leading byte offset >> 4 (16-29, unused for
// swizzled K-major), stride byte offset >> 4 (32-45: 1024 B between 8-row groups), 128B swizzle (62-63).
__device__ __forceinline__ uint64_t make_desc(const void* p) {
    const uint64_t a = smem_u32(p);
    return ((a & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_n128_f16(float* d, uint64_t da, uint64_t db) {
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, 1, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db)
        : "memory");
}
__device__ __forceinline__ void wgmma_n128_bf16(float* d, uint64_t da, uint64_t db) {
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, 1, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db)
        : "memory");
}
__device__ __forceinline__ void wgmma_n256_f16(float* d, uint64_t da, uint64_t db) {
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
        "%128, %129, 1, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db)
        : "memory");
}
__device__ __forceinline__ void wgmma_n256_bf16(float* d, uint64_t da, uint64_t db) {
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
        "%128, %129, 1, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db)
        : "memory");
}

template <typename T> struct WG;
template <> struct WG<__half> {
    static __device__ __forceinline__ void run(float* d, uint64_t da, uint64_t db) {
#if BN == 128
        wgmma_n128_f16(d, da, db);
#else
        wgmma_n256_f16(d, da, db);
#endif
    }
};
template <> struct WG<__nv_bfloat16> {
    static __device__ __forceinline__ void run(float* d, uint64_t da, uint64_t db) {
#if BN == 128
        wgmma_n128_bf16(d, da, db);
#else
        wgmma_n256_bf16(d, da, db);
#endif
    }
};

// rows [r0, r0+ROWS) x k-tile kt of src [R, K] -> swizzled smem tile (zero-filled outside)
template <typename T, int ROWS>
__device__ __forceinline__ void load_tile(T* dst, const T* __restrict__ src, int r0, int R, int K, int kt) {
    const int k0 = kt * BK;
#pragma unroll
    for (int i = 0; i < ROWS * CPR / NTHREADS; ++i) {
        const int e = threadIdx.x + i * NTHREADS;
        const int r = e / CPR, c = e % CPR;
        const int gr = r0 + r, gk = k0 + c * 8;
        const bool ok = gr < R && gk < K;
        const T* g = ok ? src + (size_t)gr * K + gk : src;
        cp_async16(smem_u32(dst + r * BK + ((c ^ (r & 7)) * 8)), g, ok ? 16 : 0);
    }
}

template <typename T>
__device__ __forceinline__ void gemm_wgmma(const T* __restrict__ x, const T* __restrict__ w, float* __restrict__ y,
                                           int M, int N, int K, int ldy)
{
    extern __shared__ unsigned char smem_raw[];
    // 1024-byte aligned base (the launcher asks for 1 KB extra)
    unsigned char* base = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    T* sx = reinterpret_cast<T*>(base);                 // [STAGES][BM][BK]
    T* sw = sx + STAGES * BM * BK;                      // [STAGES][BN][BK]
    const int tid = threadIdx.x, wg = tid >> 7, wid = (tid >> 5) & 3, lane = tid & 31;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int KT = (K + BK - 1) / BK;
    constexpr int PF = STAGES - 2;                      // refill distance

    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

#pragma unroll
    for (int s = 0; s < PF; ++s) {
        if (s < KT) {
            load_tile<T, BM>(sx + s * BM * BK, x, m0, M, K, s);
            load_tile<T, BN>(sw + s * BN * BK, w, n0, N, K, s);
        }
        cp_async_commit();
    }
    for (int kt = 0; kt < KT; ++kt) {
        cp_async_wait<PF - 1>();      // tile kt landed (this thread's copies)
        fence_proxy_async();          // make them visible to the tensor cores' (async) proxy
        __syncthreads();              // everybody's; and batch kt-2 is finished in both warpgroups
        const int nk = kt + PF;
        if (nk < KT) {
            load_tile<T, BM>(sx + (nk % STAGES) * BM * BK, x, m0, M, K, nk);
            load_tile<T, BN>(sw + (nk % STAGES) * BN * BK, w, n0, N, K, nk);
        }
        cp_async_commit();
        const T* tx = sx + (kt % STAGES) * BM * BK + wg * 64 * BK;
        const T* tw = sw + (kt % STAGES) * BN * BK;
        const uint64_t da = make_desc(tx), db = make_desc(tw);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) WG<T>::run(acc, da + 2 * kk, db + 2 * kk);   // +32 bytes per k16
        wgmma_commit();
        wgmma_wait<1>();              // keep one batch in flight
    }
    wgmma_wait<0>();
    cp_async_wait<0>();
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) fence_reg(acc[i]);

    // accumulator layout of m64nNk16: warp wid of the warpgroup holds rows 16*wid..+15; for each n8
    // chunk j: acc[4j], acc[4j+1] -> (row g, cols 8j+2t, +1), acc[4j+2], acc[4j+3] -> (row g+8, ...)
    const int g = lane >> 2, t = lane & 3;
    const int mrow = m0 + wg * 64 + wid * 16 + g;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int n = n0 + j * 8 + 2 * t;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = mrow + 8 * h;
            if (m >= M) continue;
            float* p = y + (size_t)m * ldy + n;
            const float a = acc[4 * j + 2 * h], b = acc[4 * j + 2 * h + 1];
            if (n + 1 < N && ((reinterpret_cast<uintptr_t>(p) & 7) == 0)) {
                *reinterpret_cast<float2*>(p) = make_float2(a, b);
            } else {
                if (n < N) p[0] = a;
                if (n + 1 < N) p[1] = b;
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(NTHREADS, 1)
matmul_wgmma_f16(const __half* __restrict__ x, const __half* __restrict__ w, float* __restrict__ y,
                 int M, int N, int K, int ldy)
{
    gemm_wgmma<__half>(x, w, y, M, N, K, ldy);
}

extern "C" __global__ void __launch_bounds__(NTHREADS, 1)
matmul_wgmma_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, float* __restrict__ y,
                  int M, int N, int K, int ldy)
{
    gemm_wgmma<__nv_bfloat16>(x, w, y, M, N, K, ldy);
}

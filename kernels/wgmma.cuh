// wgmma.cuh: Hopper helpers shared by the warpgroup-MMA kernels (chapter 11's matmul_wgmma.cu, v5,
// matmul_q8_wgmma.cu, v6, and matmul_q8_tma.cu, v7; chapter 12's flash_attn_wgmma.cu): the
// proxy fence, wgmma's fences, the shared-memory matrix descriptor, one wrapper per wgmma shape,
// and TMA, mbarriers and setmaxnreg.  Needs sm_90a.
#pragma once
#include "common.cuh"                 // smem_u32 and the cp.async helpers
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Pin a register at this point of the program: wgmma writes its accumulators (and reads its A
// registers) asynchronously, so after a wgmma_wait the compiler must not move their reads (or
// new definitions) above the wait.
__device__ __forceinline__ void fence_reg(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void fence_reg(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

// Matrix descriptor of a K-major tile whose rows are 64 halves (128 bytes) in the 128-byte swizzle
// (16-byte chunk c of row r stored at c ^ (r % 8), tile base 1024-byte aligned): start address >> 4
// (bits 0-13), leading byte offset >> 4 (16-29, unused when swizzled), stride byte offset >> 4
// (32-45: 1024 B between 8-row groups), swizzle mode 128B (62-63).  +2 steps 32 bytes = 16 halves.
__device__ __forceinline__ uint64_t make_desc(const void* p) {
    const uint64_t a = smem_u32(p);
    return ((a & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

// The accumulator operands of a wgmma with n columns: n/2 floats per thread, %0 .. %(n/2 - 1) in the
// instruction and "+f"(d[0]) .. as constraints.  PTX has no register arrays: every register is named.
#define WG_ACC8 "%0, %1, %2, %3, %4, %5, %6, %7"
#define WG_ACC16 WG_ACC8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define WG_ACC32 WG_ACC16 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WG_ACC64 WG_ACC32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WG_ACC128 WG_ACC64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define WG_D1(i) "+f"(d[i])
#define WG_D8(i) WG_D1(i), WG_D1(i + 1), WG_D1(i + 2), WG_D1(i + 3), WG_D1(i + 4), WG_D1(i + 5), WG_D1(i + 6), WG_D1(i + 7)
#define WG_D16(i) WG_D8(i), WG_D8(i + 8)
#define WG_D32(i) WG_D16(i), WG_D16(i + 16)
#define WG_D64(i) WG_D32(i), WG_D32(i + 32)
#define WG_D128(i) WG_D64(i), WG_D64(i + 64)

// d[N/2] (fp32, this thread's part of the 64 x N accumulator) += A[64 x 16] @ B[N x 16]^T, both
// operands in shared memory (descriptors da, db: the operands after the accumulators, DESC).
template <typename T, int N> struct Wgmma;
#define WGMMA_SS(T, PTX_T, N, ACC, D, DESC)                                                        \
    template <> struct Wgmma<T, N> {                                                               \
        static __device__ __forceinline__ void run(float* d, uint64_t da, uint64_t db) {            \
            asm volatile("{\n"                                                                      \
                "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_T "." PTX_T " "               \
                "{" ACC "}, "                                                                      \
                DESC ", 1, 1, 1, 0, 0;\n"                                                           \
                "}\n"                                                                              \
                : D                                                                                 \
                : "l"(da), "l"(db)                                                                  \
                : "memory");                                                                        \
        }                                                                                           \
    };
WGMMA_SS(__half, "f16", 64, WG_ACC32, WG_D32(0), "%32, %33")
WGMMA_SS(__half, "f16", 128, WG_ACC64, WG_D64(0), "%64, %65")
WGMMA_SS(__half, "f16", 256, WG_ACC128, WG_D128(0), "%128, %129")
WGMMA_SS(__nv_bfloat16, "bf16", 128, WG_ACC64, WG_D64(0), "%64, %65")
WGMMA_SS(__nv_bfloat16, "bf16", 256, WG_ACC128, WG_D128(0), "%128, %129")

// d = A @ B^T, the accumulator written, not read (scale-d = 0): the first k16 step of a product
// whose registers held something else, with no instruction zeroing them first (which, between a
// wgmma and its wait, would make ptxas serialize: C7513).  f16, both operands in shared memory.
#define WG_Z1(i) "=f"(d[i])
#define WG_Z8(i) WG_Z1(i), WG_Z1(i + 1), WG_Z1(i + 2), WG_Z1(i + 3), WG_Z1(i + 4), WG_Z1(i + 5), WG_Z1(i + 6), WG_Z1(i + 7)
#define WG_Z32(i) WG_Z8(i), WG_Z8(i + 8), WG_Z8(i + 16), WG_Z8(i + 24)
#define WG_Z64(i) WG_Z32(i), WG_Z32(i + 32)
template <int N> struct WgmmaZero;
#define WGMMA_ZERO(N, ACC, Z, DESC)                                                                 \
    template <> struct WgmmaZero<N> {                                                               \
        static __device__ __forceinline__ void run(float* d, uint64_t da, uint64_t db) {            \
            asm volatile("{\n"                                                                      \
                "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.f16.f16 "                           \
                "{" ACC "}, " DESC ", 0, 1, 1, 0, 0;\n"                                              \
                "}\n"                                                                              \
                : Z                                                                                 \
                : "l"(da), "l"(db)                                                                  \
                : "memory");                                                                        \
        }                                                                                           \
    };
WGMMA_ZERO(64, WG_ACC32, WG_Z32(0), "%32, %33")
WGMMA_ZERO(128, WG_ACC64, WG_Z64(0), "%64, %65")

// The same product with A (64 x 16, fp16) in registers: each warp of the warpgroup holds 16 rows as
// mma.sync's m16n8k16 A fragment (a[0]: row g, k 2t..2t+1; a[1]: row g+8; a[2], a[3]: k + 8), so a
// kernel can compute A in registers (e.g. dequantize it) and never write it to shared memory.
// TRANS_B = 1: B is MN-major (stored as K rows of N contiguous elements; `make_desc_mn`), which wgmma
// takes for 16-bit types only: the instruction's transpose bit.
template <int N, int TRANS_B = 0> struct WgmmaRA;
#define WGMMA_RA(N, TRANS_B, ACC, D, A_DESC)                                                            \
    template <> struct WgmmaRA<N, TRANS_B> {                                                            \
        static __device__ __forceinline__ void run(float* d, const uint32_t* a, uint64_t db) {      \
            asm volatile("{\n"                                                                      \
                "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.f16.f16 "                           \
                "{" ACC "}, "                                                                      \
                A_DESC ", 1, 1, 1, " #TRANS_B ";\n"                                                      \
                "}\n"                                                                              \
                : D                                                                                 \
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db)                               \
                : "memory");                                                                        \
        }                                                                                           \
    };
WGMMA_RA(16, 0, WG_ACC8, WG_D8(0), "{%8, %9, %10, %11}, %12")
WGMMA_RA(32, 0, WG_ACC16, WG_D16(0), "{%16, %17, %18, %19}, %20")
WGMMA_RA(64, 0, WG_ACC32, WG_D32(0), "{%32, %33, %34, %35}, %36")
WGMMA_RA(128, 0, WG_ACC64, WG_D64(0), "{%64, %65, %66, %67}, %68")
WGMMA_RA(256, 0, WG_ACC128, WG_D128(0), "{%128, %129, %130, %131}, %132")
WGMMA_RA(64, 1, WG_ACC32, WG_D32(0), "{%32, %33, %34, %35}, %36")
WGMMA_RA(128, 1, WG_ACC64, WG_D64(0), "{%64, %65, %66, %67}, %68")

// The descriptor of such an MN-major B in the 128-byte swizzle: K rows of 64 contiguous 16-bit
// elements (128 bytes), 8 rows an atom, as TMA delivers a box of V (keys x head dim).  Leading byte
// offset = bytes between 64-element blocks of N, stride byte offset = bytes between 8-row groups
// of K.  +128 steps 16 rows of K (one k16).
__device__ __forceinline__ uint64_t make_desc_mn(const void* p, uint32_t lbo, uint32_t sbo) {
    const uint64_t a = smem_u32(p);
    return ((a & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
}

// ---- TMA and mbarriers (version 7; flash attention version 4) ----------------------------------------------------------------
// A tensor map (CUtensorMap, written by the host's cuTensorMapEncodeTiled): how TMA finds a box of
// a tensor in global memory.  Passed by value as a __grid_constant__ kernel parameter.
struct alignas(64) TensorMap { uint64_t opaque[16]; };

// An mbarrier in shared memory: `count` arrivals (plus the bytes announced by expect_tx) complete its
// current phase; waiters spin on the parity of the phase they expect.
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
// one arrival that also announces `bytes` still to come (the TMA copies complete them)
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
}
// TMA: the box of `map` at element coordinates (c0 innermost, c1) -> shared memory at dst; its bytes
// complete_tx on `bar`.  Parts of the box outside the tensor are filled with zeros.
__device__ __forceinline__ void tma_load_2d(void* dst, const TensorMap* map, int c0, int c1, uint64_t* bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 ::"r"(smem_u32(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar))
                 : "memory");
}
__device__ __forceinline__ void tma_load_3d(void* dst, const TensorMap* map, int c0, int c1, int c2, uint64_t* bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                 ::"r"(smem_u32(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
                 : "memory");
}
// Move registers between warpgroups (all of a warpgroup's threads call it): a producer that only
// issues copies gives most of its registers to the consumers, which hold the accumulators.
template <int N>
__device__ __forceinline__ void regs_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N>
__device__ __forceinline__ void regs_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }
// The 256 consumer threads of a warp-specialized kernel meet (named barrier 1; __syncthreads is 0
// and would wait for the producer warpgroup too)
__device__ __forceinline__ void bar_sync_consumers() { asm volatile("bar.sync 1, 256;\n" ::: "memory"); }
__device__ __forceinline__ void tma_prefetch_map(const TensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

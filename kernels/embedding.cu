// embedding.cu: get_rows: out[t, :] = table[ids[t], :] as f32 (chapter 10).
// table F32, F16 or BF16 [V, D], or Q8_0 rows: D/32 blocks of {f16 scale d; int8 q[32]} (34 bytes),
// value = d * q. An id outside [0, V) gives a row of NaN (poison, so a bad id cannot pass unseen).
// Grid: one block per token (x), blocks over the row (y) when D is long.
#include "common.cuh"

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ void get_rows_plain(const T* __restrict__ table, const int* __restrict__ ids,
                                               float* __restrict__ out, int V, int D) {
    pdl_wait();
    const int t = blockIdx.x, id = ids[t];
    float* o = out + (size_t)t * D;
    for (int d = blockIdx.y * blockDim.x + threadIdx.x; d < D; d += gridDim.y * blockDim.x)
        o[d] = (id >= 0 && id < V) ? to_f32(table[(size_t)id * D + d]) : __int_as_float(0x7fc00000);
}
extern "C" __global__ void get_rows_f32(const float* __restrict__ table, const int* __restrict__ ids,
                                        float* __restrict__ out, int V, int D) {
    get_rows_plain(table, ids, out, V, D);
}
PDL_READY(get_rows_f32);
extern "C" __global__ void get_rows_f16(const __half* __restrict__ table, const int* __restrict__ ids,
                                        float* __restrict__ out, int V, int D) {
    get_rows_plain(table, ids, out, V, D);
}
PDL_READY(get_rows_f16);
extern "C" __global__ void get_rows_bf16(const __nv_bfloat16* __restrict__ table, const int* __restrict__ ids,
                                         float* __restrict__ out, int V, int D) {
    get_rows_plain(table, ids, out, V, D);
}
PDL_READY(get_rows_bf16);

// Q8_0: thread d reads the scale of its block (shared by 32 neighbouring threads: one broadcast
// load) and its int8; dequantized in registers, never stored as floats in memory.
extern "C" __global__ void get_rows_q8_0(const uint8_t* __restrict__ table, const int* __restrict__ ids,
                                         float* __restrict__ out, int V, int D) {
    pdl_wait();
    const int t = blockIdx.x, id = ids[t];
    const size_t row_bytes = (size_t)(D / 32) * 34;
    const uint8_t* row = table + (size_t)id * row_bytes;
    float* o = out + (size_t)t * D;
    for (int d = blockIdx.y * blockDim.x + threadIdx.x; d < D; d += gridDim.y * blockDim.x) {
        if (id < 0 || id >= V) { o[d] = __int_as_float(0x7fc00000); continue; }
        const uint8_t* blk = row + (d / 32) * 34;
        float scale = __half2float(*reinterpret_cast<const __half*>(blk));
        o[d] = scale * (float)(int8_t)blk[2 + d % 32];
    }
}
PDL_READY(get_rows_q8_0);

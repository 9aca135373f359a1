// rope.cu: rotary position embedding on x f32 [T, H, Dh] (in place allowed), chapter 10.
// Pair (a, b) of head dims rotated by angle pos[t] * theta^(-2j/Dh), j = 0 .. Dh/2-1:
//   a' = a cos - b sin,  b' = a sin + b cos
// mode NEOX (Qwen2/3, GPT-NeoX, HF's rotate_half): pair j = (j, j + Dh/2)
// mode NORM (original/llama.cpp "normal", GPT-J style): pair j = (2j, 2j + 1)
// The *_nd kernels are the general form the op uses: only the first n_dims dims of a head turn
// (partial rotary; the rest pass through), with angle pos * freq_scale * theta^(-2j/n_dims)
// (linear RoPE scaling squeezes positions by freq_scale = 1/factor), and, given a table ff of
// n_dims/2 factors (Llama 3.1+'s long-context RoPE, GGUF's rope_freqs.weight), pair j turns ff[j]
// times slower; ff == nullptr: no table.
#include "common.cuh"

// The angle is formed in double: pos * inv_freq reaches tens of thousands of radians, and in
// float its rounding alone (1e-7 relative) would cost ~1e-3 of accuracy; theta itself comes in
// as a double for the same reason. Hopper runs FP64 at half the FP32 rate, and this kernel is
// memory bound anyway.
__device__ __forceinline__ void rope_angle(int pos, int j, int Dh, double theta, float& c, float& s,
                                           double freq_scale = 1.0) {
    double inv_freq = pow(theta, -(double)(2 * j) / Dh);
    double ang = fmod((double)pos * freq_scale * inv_freq, 6.283185307179586);
    sincosf((float)ang, &s, &c);
}

// The op's kernels (*_nd) get the frequency step from the host instead: inv_freq_j = theta^(-2j/n)
// = exp(j * lstep) with lstep = -2 ln(theta) / n in double. One exp instead of a pow per value:
// pow in double was the slowest thing here (a decode step's q/k rotation waited on it).
__device__ __forceinline__ void rope_angle_step(int pos, int j, double lstep, float& c, float& s,
                                                double freq_scale, const double* __restrict__ ff) {
    double ang = (double)pos * freq_scale * exp(lstep * j);
    if (ff) ang /= ff[j];
    sincosf((float)(ang - 6.283185307179586 * floor(ang * 0.15915494309189535)), &s, &c);
}

template <bool STEP>      // theta_or_step: theta (rope_angle) or lstep (rope_angle_step, which takes ff)
__device__ __forceinline__ void angle(int pos, int j, int n, double theta_or_step, float& c, float& s,
                                      double freq_scale, const double* __restrict__ ff) {
    if (STEP) rope_angle_step(pos, j, theta_or_step, c, s, freq_scale, ff);
    else rope_angle(pos, j, n, theta_or_step, c, s, freq_scale);
}

// One thread per slot j = i % (Dh/2) of a head (T*H*(Dh/2) threads): j < n/2 rotates pair j of
// the first n = n_dims dims; j >= n/2 copies two pass-through dims (n + 2(j - n/2), +1).
template <bool STEP>
__device__ __forceinline__ void rope_slot(const float* __restrict__ x, float* __restrict__ y,
                                          const int* __restrict__ pos, long i, int H, int Dh, int n_dims,
                                          double theta, double freq_scale, int neox,
                                          const double* __restrict__ ff) {
    const int half = Dh / 2, nh = n_dims / 2;
    const int j = i % half;
    const long row = i / half;            // t * H + h
    if (j >= nh) {                        // a pass-through pair of dims
        const long ia = row * Dh + n_dims + 2 * (j - nh);
        y[ia] = x[ia];
        y[ia + 1] = x[ia + 1];
        return;
    }
    float c, s;
    angle<STEP>(pos[row / H], j, n_dims, theta, c, s, freq_scale, ff);
    const long ia = row * Dh + (neox ? j : 2 * j), ib = ia + (neox ? nh : 1);
    float a = x[ia], b = x[ib];
    y[ia] = a * c - b * s;
    y[ib] = a * s + b * c;
}

// Every dim of the head turns (the version the benchmarks time).
extern "C" __global__ void rope_f32(const float* __restrict__ x, float* __restrict__ y,
                                    const int* __restrict__ pos, int T, int H, int Dh,
                                    double theta, int neox) {
    pdl_wait();
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (long)T * H * (Dh / 2)) rope_slot<false>(x, y, pos, i, H, Dh, Dh, theta, 1.0, neox, nullptr);
}
PDL_READY(rope_f32);

// The general form the op launches: partial rotary (n_dims), linear scaling (freq_scale), per-pair
// factors (ff, or nullptr); lstep = -2 ln(theta) / n_dims.
extern "C" __global__ void rope_nd_f32(const float* __restrict__ x, float* __restrict__ y,
                                       const int* __restrict__ pos, int T, int H, int Dh, int n_dims,
                                       double lstep, double freq_scale, int neox, const double* __restrict__ ff) {
    pdl_wait();
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (long)T * H * (Dh / 2)) rope_slot<true>(x, y, pos, i, H, Dh, n_dims, lstep, freq_scale, neox, ff);
}
PDL_READY(rope_nd_f32);

// Qwen3: q and k get an RMSNorm over each head (weight w [Dh]) right before RoPE. Fused: one warp
// per (t, h) row loads the row once, normalises it in registers/shared memory, rotates, stores:
// one read and one write of x instead of two of each. Dh <= 256, even.
#ifndef QKN_WARPS
#define QKN_WARPS 4
#endif
// Qwen3's q and k rows of one step in ONE launch (qk_norm_rope_pair, chapter 13's lowering): rows
// [0, T*Hq) are q's (weight wq, token r / Hq), rows [T*Hq, T*Hq + T*Hk) k's (weight wk, token
// r' / Hk); y holds q's rows then k's. A decode step has one kernel fewer per block.
template <bool STEP>
__device__ __forceinline__ void norm_rope_row(const float* __restrict__ xr, float* __restrict__ yr,
                                              const float* __restrict__ w, int p, float* row, int Dh,
                                              int n_dims, float eps, double theta, double freq_scale, int neox,
                                              const double* __restrict__ ff,
                                              __half* __restrict__ kc = nullptr) {   // kc: an f16 copy too
    const int lane = threadIdx.x % WARP;
    float ss = 0.f;
    for (int d = lane; d < Dh; d += WARP) { float v = xr[d]; row[d] = v; ss += v * v; }
    const float inv = rsqrtf(warp_sum(ss) / Dh + eps);
    __syncwarp();
    const int nh = n_dims / 2;
    for (int j = lane; j < nh; j += WARP) {
        const int ia = neox ? j : 2 * j, ib = ia + (neox ? nh : 1);
        float a = row[ia] * inv * w[ia], b = row[ib] * inv * w[ib];
        float c, s;
        angle<STEP>(p, j, n_dims, theta, c, s, freq_scale, ff);
        const float ya = a * c - b * s, yb = a * s + b * c;
        yr[ia] = ya;
        yr[ib] = yb;
        if (kc) { kc[ia] = __float2half_rn(ya); kc[ib] = __float2half_rn(yb); }
    }
    for (int d = n_dims + lane; d < Dh; d += WARP) {
        const float y = row[d] * inv * w[d];
        yr[d] = y;
        if (kc) kc[d] = __float2half_rn(y);
    }
}

template <bool STEP>
__device__ __forceinline__ void qk_norm_rope_row(const float* __restrict__ x, float* __restrict__ y,
                                                 const float* __restrict__ w, const int* __restrict__ pos,
                                                 int T, int H, int Dh, int n_dims, float eps, double theta,
                                                 double freq_scale, int neox, const double* __restrict__ ff) {
    __shared__ float row[QKN_WARPS][256];
    pdl_wait();
    const long r = (long)blockIdx.x * QKN_WARPS + threadIdx.x / WARP;   // t * H + h
    if (r >= (long)T * H) return;
    norm_rope_row<STEP>(x + r * Dh, y + r * Dh, w, pos[r / H], row[threadIdx.x / WARP], Dh, n_dims, eps, theta,
                        freq_scale, neox, ff);
}

extern "C" __global__ void qk_norm_rope_f32(const float* __restrict__ x, float* __restrict__ y,
                                            const float* __restrict__ w, const int* __restrict__ pos,
                                            int T, int H, int Dh, float eps, double theta, int neox) {
    qk_norm_rope_row<false>(x, y, w, pos, T, H, Dh, Dh, eps, theta, 1.0, neox, nullptr);
}
PDL_READY(qk_norm_rope_f32);

extern "C" __global__ void qk_norm_rope_nd_f32(const float* __restrict__ x, float* __restrict__ y,
                                               const float* __restrict__ w, const int* __restrict__ pos,
                                               int T, int H, int Dh, int n_dims, float eps, double lstep,
                                               double freq_scale, int neox, const double* __restrict__ ff) {
    qk_norm_rope_row<true>(x, y, w, pos, T, H, Dh, n_dims, eps, lstep, freq_scale, neox, ff);
}
PDL_READY(qk_norm_rope_nd_f32);

// The pair's rows; with STORE, also kv_store's job (chapter 12): k's rotated rows and v's rows into
// the cache pages at slots[t] (< 0, a padding row, or past the pages' n_slots: not stored), as f16
// (STORE 1) or as Q8_0 blocks (STORE 2: 8-bit pages, Dh % 32 == 0). Rows [nq + nk, nq + 2 nk) are
// v's, copied. The attention after it then only reads the pages: one kernel fewer per block.
enum { NO_STORE = 0, STORE_F16 = 1, STORE_Q8 = 2 };
template <int STORE>
__device__ __forceinline__ void qk_pair_rows(const float* __restrict__ q, const float* __restrict__ k,
                                             float* __restrict__ y, const float* __restrict__ wq,
                                             const float* __restrict__ wk, const int* __restrict__ pos,
                                             int T, int Hq, int Hk, int Dh, int n_dims, float eps,
                                             double lstep, double freq_scale, int neox, const double* __restrict__ ff,
                                             const float* __restrict__ v, void* __restrict__ Kc,
                                             void* __restrict__ Vc, const int* __restrict__ slots, int n_slots) {
    __shared__ float row[QKN_WARPS][256];
    pdl_wait();
    const long r = (long)blockIdx.x * QKN_WARPS + threadIdx.x / WARP, nq = (long)T * Hq, nk = (long)T * Hk;
    if (r >= nq + nk * (STORE ? 2 : 1)) return;
    const bool is_q = r < nq;
    const long rr = is_q ? r : r - nq;                   // the row within q or k (or v)
    const int lane = threadIdx.x % WARP;
    if (STORE && !is_q) {
        const long rk = rr < nk ? rr : rr - nk;          // (token, head) of the k or v row
        const int slot = slots[rk / Hk];
        const bool keep = slot >= 0 && slot < n_slots;
        const long at = (long)slot * Hk + rk % Hk;       // the row's place in the pages
        void* pages = rr < nk ? Kc : Vc;
        const float* src = v + rk * Dh;                  // a v row: copied as it is
        if (rr < nk) {                                   // a k row: rotated first
            float* yr = y + r * Dh;
            norm_rope_row<true>(k + rr * Dh, yr, wk, pos[rr / Hk], row[threadIdx.x / WARP], Dh, n_dims, eps, lstep,
                                freq_scale, neox, ff, STORE == STORE_F16 && keep ? (__half*)pages + at * Dh : nullptr);
            if (STORE == STORE_F16) return;
            __syncwarp();                                // the warp's own writes of yr, visible to all its lanes
            src = yr;
        }
        if (!keep) return;
        if (STORE == STORE_F16)
            for (int d = lane; d < Dh; d += WARP) ((__half*)pages)[at * Dh + d] = __float2half_rn(src[d]);
        else
            for (int j = 0; j < Dh / 32; j++)
                store_q8_0_block(src[j * 32 + lane], (unsigned char*)pages + (at * (Dh / 32) + j) * 34);
        return;
    }
    norm_rope_row<true>((is_q ? q : k) + rr * Dh, y + r * Dh, is_q ? wq : wk, pos[rr / (is_q ? Hq : Hk)],
                        row[threadIdx.x / WARP], Dh, n_dims, eps, lstep, freq_scale, neox, ff);
}

extern "C" __global__ void qk_norm_rope_pair_f32(const float* __restrict__ q, const float* __restrict__ k,
                                                 float* __restrict__ y, const float* __restrict__ wq,
                                                 const float* __restrict__ wk, const int* __restrict__ pos,
                                                 int T, int Hq, int Hk, int Dh, int n_dims, float eps,
                                                 double lstep, double freq_scale, int neox,
                                                 const double* __restrict__ ff) {
    qk_pair_rows<NO_STORE>(q, k, y, wq, wk, pos, T, Hq, Hk, Dh, n_dims, eps, lstep, freq_scale, neox, ff,
                           nullptr, nullptr, nullptr, nullptr, 0);
}
PDL_READY(qk_norm_rope_pair_f32);

extern "C" __global__ void qk_norm_rope_store_f32(const float* __restrict__ q, const float* __restrict__ k,
                                                  float* __restrict__ y, const float* __restrict__ wq,
                                                  const float* __restrict__ wk, const int* __restrict__ pos,
                                                  int T, int Hq, int Hk, int Dh, int n_dims, float eps,
                                                  double lstep, double freq_scale, int neox,
                                                  const double* __restrict__ ff,
                                                  const float* __restrict__ v, __half* __restrict__ Kc,
                                                  __half* __restrict__ Vc, const int* __restrict__ slots,
                                                  int n_slots) {
    qk_pair_rows<STORE_F16>(q, k, y, wq, wk, pos, T, Hq, Hk, Dh, n_dims, eps, lstep, freq_scale, neox, ff, v, Kc, Vc,
                            slots, n_slots);
}
PDL_READY(qk_norm_rope_store_f32);

extern "C" __global__ void qk_norm_rope_store_q8(const float* __restrict__ q, const float* __restrict__ k,
                                                 float* __restrict__ y, const float* __restrict__ wq,
                                                 const float* __restrict__ wk, const int* __restrict__ pos,
                                                 int T, int Hq, int Hk, int Dh, int n_dims, float eps,
                                                 double lstep, double freq_scale, int neox,
                                                 const double* __restrict__ ff,
                                                 const float* __restrict__ v, unsigned char* __restrict__ Kc,
                                                 unsigned char* __restrict__ Vc, const int* __restrict__ slots,
                                                 int n_slots) {
    qk_pair_rows<STORE_Q8>(q, k, y, wq, wk, pos, T, Hq, Hk, Dh, n_dims, eps, lstep, freq_scale, neox, ff, v, Kc, Vc,
                           slots, n_slots);
}
PDL_READY(qk_norm_rope_store_q8);

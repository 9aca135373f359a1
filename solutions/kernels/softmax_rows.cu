// Exercise 12.3 (GPU), reference: a row's softmax with the online softmax, one warp per row.
extern "C" __global__ void softmax_rows_ex(const float* __restrict__ x, float* __restrict__ y, int rows, int n) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * n;
    float* yr = y + (size_t)row * n;
    float m = -INFINITY, s = 0.0f;
    for (int i = lane; i < n; i += 32) {                  // this lane's elements, online
        const float v = xr[i], m2 = fmaxf(m, v);
        s = s * expf(m - m2) + expf(v - m2);
        m = m2;
    }
    for (int o = 16; o > 0; o >>= 1) {                    // merge the lanes' (m, s)
        const float mo = __shfl_xor_sync(0xffffffffu, m, o), so = __shfl_xor_sync(0xffffffffu, s, o);
        const float mm = fmaxf(m, mo);
        // a lane with no elements has m = -inf, s = 0: its term is 0 (exp(-inf) = 0), no NaN
        s = (s == 0.0f ? 0.0f : s * expf(m - mm)) + (so == 0.0f ? 0.0f : so * expf(mo - mm));
        m = mm;
    }
    for (int i = lane; i < n; i += 32) yr[i] = expf(xr[i] - m) / s;
}

// Exercise 12.3 (GPU): a row's softmax in one pass over the row, with the online softmax, one warp
// per row. Each lane walks its elements keeping a running max m and a running sum s of exp(x - m)
// (written below). Then the 32 lanes' (m, s) pairs are merged with __shfl_xor_sync: two pairs make
// (max(m1, m2), s1 * exp(m1 - m) + s2 * exp(m2 - m)), as in merge_softmax_stats. Last, every lane
// writes exp(x - m) / s for its elements. Check it: python -m tffedu.exercises ch12
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
    // TODO: yours (merge the lanes' (m, s), then write y)
}

// Exercise 13.3 (GPU), reference: a step's K rows written into the paged cache by their slots.
extern "C" __global__ void kv_store_ex(const float* __restrict__ k, const int* __restrict__ slots,
                                       float* __restrict__ pages, int T, int width, int page_size) {
    const int t = blockIdx.x;
    if (t >= T) return;
    const int slot = slots[t];
    if (slot < 0) return;                                         // a padding row of the bucket
    float* dst = pages + ((size_t)(slot / page_size) * page_size + slot % page_size) * width;
    for (int j = threadIdx.x; j < width; j += blockDim.x) dst[j] = k[(size_t)t * width + j];
}

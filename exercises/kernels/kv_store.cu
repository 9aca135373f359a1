// Exercise 13.3 (GPU): a step's K rows written into the paged cache. Token t of the step has its
// slot slots[t] (chapter 13's StepInput): page slot / page_size, row slot % page_size of that page.
// pages is [num_pages, page_size, width] floats, k is [T, width]. A slot of -1 is a padding row of
// the bucket: write nothing for it. One block per token; its threads copy the row's width values.
// Check it: python -m tffedu.exercises ch13
extern "C" __global__ void kv_store_ex(const float* __restrict__ k, const int* __restrict__ slots,
                                       float* __restrict__ pages, int T, int width, int page_size) {
    // TODO: yours
}

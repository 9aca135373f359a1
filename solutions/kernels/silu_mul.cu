// Exercise 10.3 (GPU), reference: SwiGLU's pointwise half with a grid-stride loop.
extern "C" __global__ void silu_mul(const float* __restrict__ gate, const float* __restrict__ up,
                                    float* __restrict__ out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

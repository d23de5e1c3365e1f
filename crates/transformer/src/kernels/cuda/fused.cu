// Fused CUDA kernels for training in f32, the GPU's counterparts of the CPU's fused ops
// (kernels/adam_fused.rs, kernels/layer_norm_fused.rs), compiled to PTX by build.rs with the
// `cuda` feature and loaded through candle's device. Opt-in (TRANSFORMER_KERNELS=cuda-fused)
// until a GPU has passed `transformer bench check-kernels --device cuda`.

#include <stdint.h>

// The sum of `v` over the block, in every thread. `shared` holds one float per warp; blocks
// are whole warps, at most 1024 threads.
__device__ float block_sum(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous call's readers are done with `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? shared[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}

// One Adam step (torch.optim.Adam, no weight decay), in place, one pass:
// m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  p -= step_size m / (sqrt(v) scale + eps).
extern "C" __global__ void adam_f32(const uint64_t n, float* p, float* m, float* v,
                                    const float* g, const float beta1, const float beta2,
                                    const float step_size, const float scale, const float eps) {
  const uint64_t stride = (uint64_t)blockDim.x * gridDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float gi = g[i];
    const float mi = fmaf(beta1, m[i], (1.f - beta1) * gi);
    const float vi = fmaf(beta2, v[i], (1.f - beta2) * gi * gi);
    m[i] = mi;
    v[i] = vi;
    p[i] -= step_size * mi / fmaf(sqrtf(vi), scale, eps);
  }
}

// A row's mean and the factor (x - mean) * factor normalises it with: kind 0 is the Annotated
// Transformer's (unbiased std, eps outside the root), kind 1 torch's (biased variance, eps
// inside).
__device__ float2 row_statistics(const float* x, const int size, const int kind,
                                 const float eps, float* shared) {
  float s = 0.f;
  for (int i = threadIdx.x; i < size; i += blockDim.x) s += x[i];
  const float mean = block_sum(s, shared) / size;
  float q = 0.f;
  for (int i = threadIdx.x; i < size; i += blockDim.x) {
    const float c = x[i] - mean;
    q += c * c;
  }
  const float squares = block_sum(q, shared);
  const float factor = kind == 0 ? 1.f / (sqrtf(squares / (size - 1)) + eps)
                                 : rsqrtf(squares / size + eps);
  return make_float2(mean, factor);
}

// y = g (x - mean) factor + b, a block per row.
extern "C" __global__ void layer_norm_f32(const int rows, const int size, const int kind,
                                          const float eps, const float* x, const float* gain,
                                          const float* bias, float* y) {
  __shared__ float shared[32];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const float* xr = x + (size_t)row * size;
  float* yr = y + (size_t)row * size;
  const float2 st = row_statistics(xr, size, kind, eps, shared);
  for (int i = threadIdx.x; i < size; i += blockDim.x)
    yr[i] = gain[i] * (xr[i] - st.x) * st.y + bias[i];
}

// dx of each row (a block per row), and each row's statistics for the column sums after.
extern "C" __global__ void layer_norm_grad_rows_f32(const int rows, const int size,
                                                    const int kind, const float eps,
                                                    const float* x, const float* gain,
                                                    const float* dy, float* dx, float* stats) {
  __shared__ float shared[32];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const float* xr = x + (size_t)row * size;
  const float* dyr = dy + (size_t)row * size;
  float* dxr = dx + (size_t)row * size;
  const float2 st = row_statistics(xr, size, kind, eps, shared);
  const float mean = st.x, factor = st.y, n = (float)size;
  if (threadIdx.x == 0) {
    stats[2 * row] = mean;
    stats[2 * row + 1] = factor;
  }
  if (kind == 0) {
    const float d = 1.f / factor, s = d - eps;
    float dot = 0.f;
    for (int i = threadIdx.x; i < size; i += blockDim.x) dot += gain[i] * dyr[i] * (xr[i] - mean);
    dot = block_sum(dot, shared);
    // s = 0 (a constant row): every c is 0, so the second term is 0.
    const float coefficient = s > 0.f ? dot / (d * d * (n - 1.f) * s) : 0.f;
    float dc_sum = 0.f;
    for (int i = threadIdx.x; i < size; i += blockDim.x)
      dc_sum += gain[i] * dyr[i] / d - (xr[i] - mean) * coefficient;
    const float dc_mean = block_sum(dc_sum, shared) / n;
    for (int i = threadIdx.x; i < size; i += blockDim.x)
      dxr[i] = gain[i] * dyr[i] / d - (xr[i] - mean) * coefficient - dc_mean;
  } else {
    float gs = 0.f, ghs = 0.f;
    for (int i = threadIdx.x; i < size; i += blockDim.x) {
      const float u = gain[i] * dyr[i];
      gs += u;
      ghs += u * (xr[i] - mean) * factor;
    }
    const float g_mean = block_sum(gs, shared) / n;
    const float gh_mean = block_sum(ghs, shared) / n;
    for (int i = threadIdx.x; i < size; i += blockDim.x) {
      const float h = (xr[i] - mean) * factor;
      dxr[i] = factor * (gain[i] * dyr[i] - g_mean - h * gh_mean);
    }
  }
}

// dg = sum over rows of dy (x - mean) factor and db = sum over rows of dy, in two passes so
// that a few hundred columns still fill the GPU: each block (x: 128 columns, y: a chunk of
// `chunk_rows` rows) writes its chunk's sums to `partial` (chunks x 2 x size); then
// layer_norm_grad_sum_chunks_f32 adds the chunks up, in order (deterministic).
extern "C" __global__ void layer_norm_grad_columns_f32(const int rows, const int size,
                                                       const int chunk_rows, const float* x,
                                                       const float* dy, const float* stats,
                                                       float* partial) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= size) return;
  const int first = blockIdx.y * chunk_rows;
  const int last = min(rows, first + chunk_rows);
  float dg = 0.f, db = 0.f;
  for (int row = first; row < last; ++row) {
    const size_t at = (size_t)row * size + col;
    dg += dy[at] * (x[at] - stats[2 * row]) * stats[2 * row + 1];
    db += dy[at];
  }
  partial[((size_t)blockIdx.y * 2) * size + col] = dg;
  partial[((size_t)blockIdx.y * 2 + 1) * size + col] = db;
}

extern "C" __global__ void layer_norm_grad_sum_chunks_f32(const int chunks, const int size,
                                                          const float* partial, float* dgain,
                                                          float* dbias) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= size) return;
  float dg = 0.f, db = 0.f;
  for (int chunk = 0; chunk < chunks; ++chunk) {
    dg += partial[((size_t)chunk * 2) * size + col];
    db += partial[((size_t)chunk * 2 + 1) * size + col];
  }
  dgain[col] = dg;
  dbias[col] = db;
}

// Dropout's factor for a uniform draw u in [0, 1): kept (times 1 / (1 - p)) when u >= p, as
// the composed path's `rand(...).ge(p)` decides; 1 without dropout (p = 0).
__device__ __forceinline__ float keep_factor(const float* u, size_t at, float p, float scale) {
  return p > 0.f ? (u[at] >= p ? scale : 0.f) : 1.f;
}

// The mask's byte for score (row, col) of a (batch, heads, q_len, k_len) block, read through
// the mask's strides (0 where it broadcasts); every score is allowed without a mask.
struct MaskStrides {
  int64_t batch, head, query, key;
};

__device__ __forceinline__ bool allowed(const uint8_t* mask, const MaskStrides strides,
                                        int heads, int q_len, int row, int col) {
  if (mask == nullptr) return true;
  const int64_t b = row / (heads * q_len), h = (row / q_len) % heads, i = row % q_len;
  return mask[b * strides.batch + h * strides.head + i * strides.query + col * strides.key] != 0;
}

// Score (row, col) as the softmax reads it: -1e9 where the mask forbids it.
__device__ __forceinline__ float masked_score(const float* s, const uint8_t* mask,
                                              const MaskStrides strides, int heads, int q_len,
                                              int row, int col) {
  return allowed(mask, strides, heads, q_len, row, col) ? s[col] : -1e9f;
}

// The maximum of `v` over the block, in every thread (as block_sum).
__device__ float block_max(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? shared[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  return v;
}

// A row's softmax statistics: its largest masked score and the sum of exp(score - largest).
__device__ float2 softmax_statistics(const float* s, const uint8_t* mask,
                                     const MaskStrides strides, int heads, int q_len, int row,
                                     int k_len, float* shared) {
  float peak = -INFINITY;
  for (int j = threadIdx.x; j < k_len; j += blockDim.x)
    peak = fmaxf(peak, masked_score(s, mask, strides, heads, q_len, row, j));
  peak = block_max(peak, shared);
  float total = 0.f;
  for (int j = threadIdx.x; j < k_len; j += blockDim.x)
    total += expf(masked_score(s, mask, strides, heads, q_len, row, j) - peak);
  return make_float2(peak, block_sum(total, shared));
}

// The attention's probabilities after dropout: softmax over each row of the scores with
// masked scores set to -1e9 (as the reference's masked_fill), times dropout's factor. A block
// per row. `strides` are the mask's, in elements (ignored without a mask).
extern "C" __global__ void attention_softmax_f32(const int rows, const int k_len, const int heads,
                                                 const int q_len, const float* scores,
                                                 const uint8_t* mask, const MaskStrides strides,
                                                 const float* u, const float p, const float scale,
                                                 float* out) {
  __shared__ float shared[32];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const float* s = scores + (size_t)row * k_len;
  const float2 st = softmax_statistics(s, mask, strides, heads, q_len, row, k_len, shared);
  for (int j = threadIdx.x; j < k_len; j += blockDim.x) {
    const size_t at = (size_t)row * k_len + j;
    const float prob = expf(masked_score(s, mask, strides, heads, q_len, row, j) - st.x) / st.y;
    out[at] = prob * keep_factor(u, at, p, scale);
  }
}

// The scores' gradient from the dropped probabilities' one: the probabilities recomputed from
// the scores, dp = grad * factor, ds = prob * (dp - sum(dp * prob)). A block per row.
extern "C" __global__ void attention_softmax_grad_f32(const int rows, const int k_len,
                                                      const int heads, const int q_len,
                                                      const float* scores, const uint8_t* mask,
                                                      const MaskStrides strides, const float* u,
                                                      const float p, const float scale,
                                                      const float* grad, float* dscores) {
  __shared__ float shared[32];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const float* s = scores + (size_t)row * k_len;
  const float2 st = softmax_statistics(s, mask, strides, heads, q_len, row, k_len, shared);
  float dot = 0.f;
  for (int j = threadIdx.x; j < k_len; j += blockDim.x) {
    const size_t at = (size_t)row * k_len + j;
    const float prob = expf(masked_score(s, mask, strides, heads, q_len, row, j) - st.x) / st.y;
    dot += prob * grad[at] * keep_factor(u, at, p, scale);
  }
  dot = block_sum(dot, shared);
  for (int j = threadIdx.x; j < k_len; j += blockDim.x) {
    const size_t at = (size_t)row * k_len + j;
    const float prob = expf(masked_score(s, mask, strides, heads, q_len, row, j) - st.x) / st.y;
    // Zero where the mask replaced the score by its fill, as the composed path's where_cond
    // (a fully masked row's uniform probabilities depend on no score).
    dscores[at] = allowed(mask, strides, heads, q_len, row, j)
                      ? prob * (grad[at] * keep_factor(u, at, p, scale) - dot)
                      : 0.f;
  }
}

// out = x + y * factor (a sublayer's residual with its dropout), or, with relu = 1,
// out = max(0, y) * factor (the feed-forward's middle; x unused).
extern "C" __global__ void dropout_sum_f32(const uint64_t n, const int relu, const float* x,
                                           const float* y, const float* u, const float p,
                                           const float scale, float* out) {
  const uint64_t stride = (uint64_t)blockDim.x * gridDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float factor = keep_factor(u, i, p, scale);
    out[i] = relu ? fmaxf(y[i], 0.f) * factor : x[i] + y[i] * factor;
  }
}

// The gradient through dropout (and, with relu = 1, the ReLU before it, from its input y):
// dy = grad * factor (* [y > 0]).
extern "C" __global__ void dropout_grad_f32(const uint64_t n, const int relu, const float* y,
                                            const float* u, const float p, const float scale,
                                            const float* grad, float* dy) {
  const uint64_t stride = (uint64_t)blockDim.x * gridDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float through = relu && !(y[i] > 0.f) ? 0.f : 1.f;
    dy[i] = grad[i] * keep_factor(u, i, p, scale) * through;
  }
}

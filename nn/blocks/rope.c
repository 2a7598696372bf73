/* RoPE as the book's Qwen3 and Llama 3 compute it (split halves, as Hugging Face's):
 * compute_rope_params, with Llama 3's frequency scaling, and apply_rope. The parameters are
 * computed element by element in float32 as PyTorch 1.13's ops compute them on the CPU:
 * `theta_base ** t` is powf, `1.0 / t` and `2 * torch.pi / t` are t.reciprocal() * scalar
 * (Tensor.__rdiv__), a Python float meets a float32 tensor as a float, cos and sin are cosf and
 * sinf; tests/test_llm.c compares the bits with llm_ref.py's. */
#include <math.h>
#include <stdlib.h>

#include "blocks.h"
#include "extend.h"

void nn_compute_rope_params(int64_t head_dim, double theta_base, int64_t context_length, // def compute_rope_params(head_dim, theta_base=10_000,
                            const nn_RopeFreqConfig *fc, Tensor **cos_out, Tensor **sin_out) { //         context_length=4096, freq_config=None):
    if (head_dim < 2 || head_dim % 2 != 0)                                        //     assert head_dim % 2 == 0, "Embedding dimension must be even"
        ac_error("compute_rope_params: Embedding dimension must be even (head_dim %lld)", (long long)head_dim);
    if (context_length < 1) ac_error("compute_rope_params: context_length must be >= 1, got %lld", (long long)context_length);
    int64_t half = head_dim / 2;
    float *inv_freq = ac_malloc(sizeof(float) * (size_t)half);
    for (int64_t i = 0; i < half; i++) { //     inv_freq = 1.0 / (theta_base ** (torch.arange(0, head_dim, 2)[: (head_dim // 2)].float() / head_dim))
        float e = (float)(2 * i) / (float)head_dim;
        inv_freq[i] = (1.0f / powf((float)theta_base, e)) * 1.0f;
    }
    if (fc) {                                                                     //     if freq_config is not None:
        double low_wl = fc->original_context_length / fc->low_freq_factor;      //         low_freq_wavelen = ocl / low_freq_factor
        double high_wl = fc->original_context_length / fc->high_freq_factor;    //         high_freq_wavelen = ocl / high_freq_factor
        for (int64_t i = 0; i < half; i++) {
            float inv = inv_freq[i];
            float wavelen = (1.0f / inv) * (float)(2 * M_PI);                   //         wavelen = 2 * torch.pi / inv_freq
            float llama = wavelen > (float)low_wl ? inv / (float)fc->factor : inv; //         inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
            float smooth = ((1.0f / wavelen) * (float)fc->original_context_length - (float)fc->low_freq_factor) /
                           (float)(fc->high_freq_factor - fc->low_freq_factor);  //         smooth_factor = (ocl / wavelen - low) / (high - low)
            float smoothed = (1.0f - smooth) * (inv / (float)fc->factor) + smooth * inv; //         smoothed_inv_freq = (1 - s) * (inv_freq / factor) + s * inv_freq
            bool medium = wavelen <= (float)low_wl && wavelen >= (float)high_wl;  //         is_medium_freq = (wavelen <= low) & (wavelen >= high)
            inv_freq[i] = medium ? smoothed : llama;                             //         inv_freq = torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
        }
    }
    Tensor *c = ac_persist_zeros(AC_FLOAT32, SHAPE(context_length, head_dim));
    Tensor *s = ac_persist_zeros(AC_FLOAT32, SHAPE(context_length, head_dim));
    float *cd = c->data, *sd = s->data;
    for (int64_t p = 0; p < context_length; p++)                                  //     angles = positions.unsqueeze(1) * inv_freq.unsqueeze(0)
        for (int64_t i = 0; i < half; i++) {                                      //     angles = torch.cat([angles, angles], dim=1)
            float angle = (float)p * inv_freq[i];
            cd[p * head_dim + i] = cd[p * head_dim + half + i] = cosf(angle);    //     cos = torch.cos(angles)
            sd[p * head_dim + i] = sd[p * head_dim + half + i] = sinf(angle);    //     sin = torch.sin(angles)
        }
    free(inv_freq);
    *cos_out = c;
    *sin_out = s;
}

Tensor *nn_apply_rope(Tensor *x, Tensor *cos, Tensor *sin, int64_t offset) {     // def apply_rope(x, cos, sin, offset=0):
    ac_check_defined(x, "apply_rope");
    if (x->ndim != 4) ac_error("apply_rope: expected x of shape (batch_size, num_heads, seq_len, head_dim), got %s", ac_shape_str(x));
    int64_t seq_len = x->shape[2], head_dim = x->shape[3];                        //     batch_size, num_heads, seq_len, head_dim = x.shape
    if (head_dim % 2 != 0) ac_error("apply_rope: Head dimension must be even (got %lld)", (long long)head_dim); // assert head_dim % 2 == 0, "Head dimension must be even"
    if (cos->ndim != 2 || cos->shape[1] != head_dim || offset < 0 || offset + seq_len > cos->shape[0])
        ac_error("apply_rope: positions %lld..%lld and head_dim %lld do not fit cos of shape %s", (long long)offset,
                 (long long)(offset + seq_len - 1), (long long)head_dim, ac_shape_str(cos));
    Tensor *x1 = torch_slice(x, -1, 0, head_dim / 2);                              //     x1 = x[..., : head_dim // 2]
    Tensor *x2 = torch_slice(x, -1, head_dim / 2, head_dim);                       //     x2 = x[..., head_dim // 2:]
    Tensor *c = torch_unsqueeze(torch_unsqueeze(torch_slice(cos, 0, offset, offset + seq_len), 0), 0); //     cos = cos[offset:offset + seq_len, :].unsqueeze(0).unsqueeze(0)
    Tensor *s = torch_unsqueeze(torch_unsqueeze(torch_slice(sin, 0, offset, offset + seq_len), 0), 0); //     sin = sin[offset:offset + seq_len, :].unsqueeze(0).unsqueeze(0)
    Tensor *rotated = torch_cat(2, (Tensor *[]){torch_neg(x2), x1}, -1);          //     rotated = torch.cat((-x2, x1), dim=-1)
    return torch_add(torch_mul(x, c), torch_mul(rotated, s));                     //     x_rotated = (x * cos) + (rotated * sin)
}

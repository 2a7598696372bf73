/* RMSNorm: the book's class (Qwen3, `scale`) and nn.RMSNorm (Llama 3, `weight`). Both compute
 *     variance = x.pow(2).mean(dim=-1, keepdim=True)
 *     norm_x = x * torch.rsqrt(variance + self.eps) * self.scale
 * in float32, torch.rsqrt as PyTorch's: 1 / sqrt(x) in float, and RsqrtBackward0's
 * -0.5 * grad * r^3 (pow(., -0.5) gives the same forward, but its backward, -0.5 x^-1.5, differs by
 * ulps: a trained model drifted from PyTorch's from the first step). */
#include <stdio.h>
#include <string.h>

#include "blocks.h"
#include "extend.h"

bool nn_rmsnorm_fused = true;

static Tensor *rmsnorm_fwd(nn_Module *m, Tensor *x) { return nn_RMSNorm_forward((nn_RMSNorm *)m, x); }

/* nn.RMSNorm's extra_repr: '{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}' */
static char *torch_rmsnorm_repr(nn_Module *m) {
    nn_RMSNorm *n = (nn_RMSNorm *)m;
    char eps[32];
    snprintf(eps, sizeof eps, "%g", n->eps); /* Python's repr of 1e-05, 1e-06 */
    if (strchr(eps, 'e')) {
        char *e = strchr(eps, 'e');
        if ((e[1] == '-' || e[1] == '+') && e[2] && !e[3]) { /* 1e-5 -> 1e-05 */
            memmove(e + 3, e + 2, 2);
            e[2] = '0';
        }
    } else if (!strchr(eps, '.')) {
        strcat(eps, ".0");
    }
    return nn_repr_printf("(%lld,), eps=%s, elementwise_affine=True", (long long)n->emb_dim, eps);
}

static nn_RMSNorm *rmsnorm_new(int64_t emb_dim, double eps, bool torch_style) { // class RMSNorm(nn.Module): def __init__(self, emb_dim, eps=1e-6):
    if (emb_dim < 1) ac_error("RMSNorm: emb_dim must be >= 1, got %lld", (long long)emb_dim);
    nn_RMSNorm *n = nn_module_new(sizeof *n, "RMSNorm", rmsnorm_fwd);
    n->emb_dim = emb_dim;
    n->eps = eps;                                                                //     self.eps = eps
    n->torch_style = torch_style;
    if (torch_style) n->module.extra_repr = torch_rmsnorm_repr;                 /* (C: Llama 3's nn.RMSNorm prints as PyTorch's) */
    ac_mark mk = ac_arena_mark();
    n->scale = nn_register_parameter(&n->module, torch_style ? "weight" : "scale", torch_ones(SHAPE(emb_dim))); //     self.scale = nn.Parameter(torch.ones(emb_dim)) (C: nn.RMSNorm's "weight")
    ac_arena_release(mk);
    return n;
}

nn_RMSNorm *nn_RMSNorm_new(int64_t emb_dim, double eps) { return rmsnorm_new(emb_dim, eps, false); }
nn_RMSNorm *nn_TorchRMSNorm_new(int64_t normalized_shape, double eps) { return rmsnorm_new(normalized_shape, eps, true); }

Tensor *nn_RMSNorm_forward(nn_RMSNorm *self, Tensor *x) {                      // def forward(self, x):
    ac_check_defined(x, "RMSNorm");
    if (x->ndim < 1 || x->shape[x->ndim - 1] != self->emb_dim)
        ac_error("RMSNorm: expected input with last dimension %lld, got %s", (long long)self->emb_dim, ac_shape_str(x));
    if (nn_rmsnorm_fused && ac_book_rms_norm_fits(x, self->scale))             // (C: the three lines below as one op,
        return ac_book_rms_norm(x, self->scale, self->eps);                     // the same bits: tensor/ops/fused.c)
    Tensor *variance = torch_mean_dim(torch_pow(x, 2.0), 1, (int64_t[]){-1}, true); //     variance = x.pow(2).mean(dim=-1, keepdim=True)
    Tensor *norm_x = torch_mul(x, torch_rsqrt(torch_add_scalar(variance, self->eps))); //     norm_x = x * torch.rsqrt(variance + self.eps)
    return torch_mul(norm_x, self->scale);                                       //     norm_x = norm_x * self.scale
}

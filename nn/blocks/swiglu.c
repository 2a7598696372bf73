/* The SwiGLU FeedForward of Qwen3 and Llama 3 (the book's FeedForward class). */
#include "blocks.h"
#include "extend.h"

static Tensor *ff_fwd(nn_Module *m, Tensor *x) { return nn_SwiGLUFeedForward_forward((nn_SwiGLUFeedForward *)m, x); }

nn_SwiGLUFeedForward *nn_SwiGLUFeedForward_new(int64_t emb_dim, int64_t hidden_dim) { // def __init__(self, cfg):
    nn_SwiGLUFeedForward *f = nn_module_new(sizeof *f, "FeedForward", ff_fwd);
    f->fc1 = (nn_Linear *)nn_register_module(&f->module, "fc1", &nn_Linear_new(emb_dim, hidden_dim, false)->module); //     self.fc1 = nn.Linear(emb_dim, hidden_dim, bias=False)
    f->fc2 = (nn_Linear *)nn_register_module(&f->module, "fc2", &nn_Linear_new(emb_dim, hidden_dim, false)->module); //     self.fc2 = nn.Linear(emb_dim, hidden_dim, bias=False)
    f->fc3 = (nn_Linear *)nn_register_module(&f->module, "fc3", &nn_Linear_new(hidden_dim, emb_dim, false)->module); //     self.fc3 = nn.Linear(hidden_dim, emb_dim, bias=False)
    return f;
}

Tensor *nn_SwiGLUFeedForward_forward(nn_SwiGLUFeedForward *self, Tensor *x) {    // def forward(self, x):
    Tensor *x_fc1 = nn_call(&self->module, "fc1", x);                             //     x_fc1 = self.fc1(x)
    Tensor *x_fc2 = nn_call(&self->module, "fc2", x);                             //     x_fc2 = self.fc2(x)
    return nn_call(&self->module, "fc3", torch_mul(torch_silu(x_fc1), x_fc2));   //     return self.fc3(nn.functional.silu(x_fc1) * x_fc2)
}

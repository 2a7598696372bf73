/* The smallest complete attention.c program: the article's SelfAttention, one
 * forward and one backward, printed as PyTorch prints them. In the tree:
 *     make build/minimal && ./build/minimal
 * Against an installed copy (make install):
 *     cc minimal.c $(pkg-config --cflags --libs attention) -o minimal && ./minimal
 * The Python it mirrors is on the right; the (C: ...) lines are C's own work. */
#include <attention/nn.h>
#include <attention/tensor.h>

int main(void) {
    torch_manual_seed(123);                                   // torch.manual_seed(123)
    nn_SelfAttention *sa = nn_SelfAttention_new(3, 2, 4);     // sa = SelfAttention(d_in=3, d_out_kq=2, d_out_v=4)
    ac_mark step = ac_arena_mark();                           // (C: what is made from here on is freed in one call)
    Tensor *x = torch_rand(SHAPE(6, 3));                      // x = torch.rand(6, 3)
    Tensor *context = nn_SelfAttention_forward(sa, x);        // context = sa(x)
    torch_print(context);                                     // print(context)
    torch_backward(torch_sum(context), NULL);                 // context.sum().backward()
    torch_print(sa->W_query->grad);                           // print(sa.W_query.grad)
    ac_arena_release(step);                                   // (C: the tensors and the graph of this step)
    nn_free(&sa->module);                                     // (C: the module, its parameters and their .grad)
    ac_shutdown();                                            // (C: the arena's blocks)
    return 0;
}

/* Appendix A of Sebastian Raschka's "Build a Large Language Model (From Scratch)", "Introduction
 * to PyTorch": the cells of the book's notebook (rasbt/LLMs-from-scratch,
 * appendix-A/01_main-chapter-code/code-part1.ipynb) in their order, in C. Each statement carries
 * the Python it reproduces; ./build/appendix_a prints what tests/tools/appendix_a.py (the cells
 * as one script, run with PyTorch 1.13) prints: tests/data/appendix_a_expected.txt, byte for byte.
 * A cell that ends in an expression shows its value, as Jupyter does (`show(...)` there).
 *
 *   ./build/appendix_a               the notebook's outputs
 *   ./build/appendix_a --html FILE   the reader's page: the Python beside this C, and the outputs
 *
 * Left out, as in appendix_a.py: torch.__version__ and torch.cuda.is_available() (the machine),
 * torch.save / load_state_dict (files), and part 2 (GPUs). The first NeuralNetwork(50, 3) is drawn
 * from the default generator's seed, 67280421310721, as in a fresh PyTorch process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "nn.h"
#include "optim.h"
#include "tensor.h"

static void section(const char *title, const char *functions); /* the page's sections (below main) */

/* class NeuralNetwork(torch.nn.Module): */
typedef struct {
    nn_Module module;
    nn_Sequential *layers;
} NeuralNetwork;

static Tensor *NeuralNetwork_forward(NeuralNetwork *self, Tensor *x) {   // def forward(self, x):
    Tensor *logits = nn_Sequential_forward(self->layers, x);              //     logits = self.layers(x)
    return logits;                                                        //     return logits
}

static Tensor *neuralnetwork_fwd(nn_Module *m, Tensor *x) { return NeuralNetwork_forward((NeuralNetwork *)m, x); }

static NeuralNetwork *NeuralNetwork_new(int64_t num_inputs, int64_t num_outputs) { // def __init__(self, num_inputs, num_outputs):
    NeuralNetwork *self = nn_module_new(sizeof *self, "NeuralNetwork", neuralnetwork_fwd); // super().__init__()
    nn_Linear *hidden1 = nn_Linear_new(num_inputs, 30, true);                   // torch.nn.Linear(num_inputs, 30),  # 1st hidden layer
    nn_ReLU *relu1 = nn_ReLU_new();                                       // torch.nn.ReLU(),
    nn_Linear *hidden2 = nn_Linear_new(30, 20, true);                       // torch.nn.Linear(30, 20),  # 2nd hidden layer
    nn_ReLU *relu2 = nn_ReLU_new();                                       // torch.nn.ReLU(),
    nn_Linear *output = nn_Linear_new(20, num_outputs, true);                   // torch.nn.Linear(20, num_outputs),  # output layer
    self->layers = nn_Sequential_new(MODULES(&hidden1->module, &relu1->module, &hidden2->module, // self.layers = torch.nn.Sequential(...)
                                             &relu2->module, &output->module));
    nn_register_module(&self->module, "layers", &self->layers->module);
    return self;
}

static double compute_accuracy(NeuralNetwork *model, const TensorDataLoader *dataloader) { // def compute_accuracy(model, dataloader):
    nn_eval(&model->module);                                              // model.eval()
    Tensor *correct = torch_scalar_tensor(0.0);                           // correct = 0.0
    int64_t total_examples = 0;                                           // total_examples = 0
    Tensor *features, *labels, *logits = NULL;
    TensorDataLoaderIter it = TensorDataLoader_iter(dataloader);          // for idx, (features, labels) in enumerate(dataloader):
    while (TensorDataLoaderIter_next(&it, &features, &labels)) {
        TORCH_NO_GRAD {                                                   //     with torch.no_grad():
            logits = NeuralNetwork_forward(model, features);              //         logits = model(features)
        }
        Tensor *predictions = torch_argmax(logits, 1, false);             //     predictions = torch.argmax(logits, dim=1)
        Tensor *compare = torch_eq(labels, predictions);                  //     compare = labels == predictions
        correct = torch_add(correct, torch_to_float(torch_sum(compare))); //     correct += torch.sum(compare)
        total_examples += torch_numel(compare);                           //     total_examples += len(compare)
    }
    return torch_item(torch_div_scalar(correct, (double)total_examples)); // return (correct / total_examples).item()
}

static void batches(const TensorDataLoader *loader) {
    Tensor *x, *y;
    int64_t idx = 0;
    TensorDataLoaderIter it = TensorDataLoader_iter(loader);              // for idx, (x, y) in enumerate(train_loader):
    while (TensorDataLoaderIter_next(&it, &x, &y))
        printf("Batch %lld: %s %s\n", (long long)++idx, torch_repr(x), torch_repr(y)); // print(f"Batch {idx+1}:", x, y)
}

static void appendix_a(void) {
    section("A.2 Understanding tensors", NULL);
    Tensor *tensor0d = torch_tensor_long((int64_t[]){1}, 0, NULL);        // tensor0d = torch.tensor(1)
    Tensor *tensor1d = torch_tensor_long((int64_t[]){1, 2, 3}, SHAPE(3)); // tensor1d = torch.tensor([1, 2, 3])
    Tensor *tensor2d = torch_tensor_long((int64_t[]){1, 2, 3, 4}, SHAPE(2, 2)); // tensor2d = torch.tensor([[1, 2], [3, 4]])
    Tensor *tensor3d_1 =                                                  // tensor3d_1 = torch.tensor([[[1, 2], [3, 4]],
        torch_tensor_long((int64_t[]){1, 2, 3, 4, 5, 6, 7, 8}, SHAPE(2, 2, 2)); //                            [[5, 6], [7, 8]]])
    int64_t ary3d_data[] = {1, 2, 3, 4, 5, 6, 7, 8};                      // ary3d = np.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]]])
    Tensor *tensor3d_2 = torch_tensor_long(ary3d_data, SHAPE(2, 2, 2));   // tensor3d_2 = torch.tensor(ary3d)  # Copies NumPy array
    Tensor *tensor3d_3 = torch_tensor_long(ary3d_data, SHAPE(2, 2, 2));   // tensor3d_3 = torch.from_numpy(ary3d)  # Shares memory
    int64_t *ary3d = ac_data_long(tensor3d_3);                            // (C: the array is now the storage tensor3d_3 shares)
    (void)tensor0d, (void)tensor2d, (void)tensor3d_1;
    ary3d[0 * 4 + 0 * 2 + 0] = 999;                                       // ary3d[0, 0, 0] = 999
    torch_print(tensor3d_2);                                              // print(tensor3d_2) # remains unchanged
    torch_print(tensor3d_3);                                              // print(tensor3d_3) # changes because of memory sharing
    tensor1d = torch_tensor_long((int64_t[]){1, 2, 3}, SHAPE(3));         // tensor1d = torch.tensor([1, 2, 3])
    printf("%s\n", torch_dtype_str(tensor1d->dtype));                     // print(tensor1d.dtype)
    Tensor *floatvec = torch_tensor((float[]){1.0f, 2.0f, 3.0f}, SHAPE(3)); // floatvec = torch.tensor([1.0, 2.0, 3.0])
    printf("%s\n", torch_dtype_str(floatvec->dtype));                     // print(floatvec.dtype)
    floatvec = torch_to_float(tensor1d);                                  // floatvec = tensor1d.to(torch.float32)
    printf("%s\n", torch_dtype_str(floatvec->dtype));                     // print(floatvec.dtype)
    tensor2d = torch_tensor_long((int64_t[]){1, 2, 3, 4, 5, 6}, SHAPE(2, 3)); // tensor2d = torch.tensor([[1, 2, 3], [4, 5, 6]])
    torch_print(tensor2d);                                                // tensor2d
    torch_print_shape(tensor2d);                                          // tensor2d.shape
    torch_print(torch_reshape(tensor2d, SHAPE(3, 2)));                    // tensor2d.reshape(3, 2)
    torch_print(torch_view(tensor2d, SHAPE(3, 2)));                       // tensor2d.view(3, 2)
    torch_print(torch_T(tensor2d));                                       // tensor2d.T
    torch_print(torch_matmul(tensor2d, torch_T(tensor2d)));               // tensor2d.matmul(tensor2d.T)
    torch_print(torch_matmul(tensor2d, torch_T(tensor2d)));               // tensor2d @ tensor2d.T

    section("A.3 Seeing models as computation graphs", NULL);
    Tensor *y = torch_tensor((float[]){1.0f}, SHAPE(1));                  // y = torch.tensor([1.0])  # true label
    Tensor *x1 = torch_tensor((float[]){1.1f}, SHAPE(1));                 // x1 = torch.tensor([1.1]) # input feature
    Tensor *w1 = torch_tensor((float[]){2.2f}, SHAPE(1));                 // w1 = torch.tensor([2.2]) # weight parameter
    Tensor *b = torch_tensor((float[]){0.0f}, SHAPE(1));                  // b = torch.tensor([0.0])  # bias unit
    Tensor *z = torch_add(torch_mul(x1, w1), b);                          // z = x1 * w1 + b          # net input
    Tensor *a = torch_sigmoid(z);                                         // a = torch.sigmoid(z)     # activation & output
    Tensor *loss = torch_binary_cross_entropy(a, y);                      // loss = F.binary_cross_entropy(a, y)
    torch_print(loss);                                                    // print(loss)

    section("A.4 Automatic differentiation made easy", NULL);
    y = torch_tensor((float[]){1.0f}, SHAPE(1));                          // y = torch.tensor([1.0])
    x1 = torch_tensor((float[]){1.1f}, SHAPE(1));                         // x1 = torch.tensor([1.1])
    w1 = torch_requires_grad_(torch_tensor((float[]){2.2f}, SHAPE(1)), true); // w1 = torch.tensor([2.2], requires_grad=True)
    b = torch_requires_grad_(torch_tensor((float[]){0.0f}, SHAPE(1)), true);  // b = torch.tensor([0.0], requires_grad=True)
    z = torch_add(torch_mul(x1, w1), b);                                  // z = x1 * w1 + b
    a = torch_sigmoid(z);                                                 // a = torch.sigmoid(z)
    loss = torch_binary_cross_entropy(a, y);                              // loss = F.binary_cross_entropy(a, y)
    Tensor **grad_L_w1 = torch_autograd_grad(loss, TENSORS(w1), NULL, true); // grad_L_w1 = grad(loss, w1, retain_graph=True)
    Tensor **grad_L_b = torch_autograd_grad(loss, TENSORS(b), NULL, true);   // grad_L_b = grad(loss, b, retain_graph=True)
    printf("(%s,)\n", torch_repr(grad_L_w1[0]));                          // print(grad_L_w1)
    printf("(%s,)\n", torch_repr(grad_L_b[0]));                           // print(grad_L_b)
    torch_backward(loss, NULL);                                           // loss.backward()
    torch_print(w1->grad);                                                // print(w1.grad)
    torch_print(b->grad);                                                 // print(b.grad)

    section("A.5 Implementing multilayer neural networks", "NeuralNetwork_new NeuralNetwork_forward");
    NeuralNetwork *model = NeuralNetwork_new(50, 3);                      // model = NeuralNetwork(50, 3)
    nn_print(&model->module);                                             // print(model)
    nn_TensorList params = nn_named_parameters(&model->module);           // num_params = sum(p.numel() for p in model.parameters()
    int64_t num_params = 0;                                               //                  if p.requires_grad)
    for (int i = 0; i < params.n; i++)
        if (params.tensors[i]->requires_grad) num_params += torch_numel(params.tensors[i]);
    printf("Total number of trainable model parameters: %lld\n", (long long)num_params); // print("Total number of trainable model parameters:", num_params)
    nn_Linear *layer0 = (nn_Linear *)nn_Sequential_get(model->layers, 0); // model.layers[0]
    torch_print(layer0->weight);                                          // print(model.layers[0].weight)
    nn_free(&model->module);                                              // (C: the first model is let go)
    torch_manual_seed(123);                                               // torch.manual_seed(123)
    model = NeuralNetwork_new(50, 3);                                     // model = NeuralNetwork(50, 3)
    layer0 = (nn_Linear *)nn_Sequential_get(model->layers, 0);
    torch_print(layer0->weight);                                          // print(model.layers[0].weight)
    torch_print_shape(layer0->weight);                                    // print(model.layers[0].weight.shape)
    torch_manual_seed(123);                                               // torch.manual_seed(123)
    Tensor *X = torch_rand(SHAPE(1, 50));                                 // X = torch.rand((1, 50))
    Tensor *out = NeuralNetwork_forward(model, X);                        // out = model(X)
    torch_print(out);                                                     // print(out)
    TORCH_NO_GRAD {                                                       // with torch.no_grad():
        out = NeuralNetwork_forward(model, X);                            //     out = model(X)
    }
    torch_print(out);                                                     // print(out)
    TORCH_NO_GRAD {                                                       // with torch.no_grad():
        out = torch_softmax(NeuralNetwork_forward(model, X), 1);          //     out = torch.softmax(model(X), dim=1)
    }
    torch_print(out);                                                     // print(out)
    nn_free(&model->module);                                              // (C: and the second)

    section("A.6 Setting up efficient data loaders", NULL);
    Tensor *X_train = torch_tensor((float[]){-1.2f, 3.1f,                 // X_train = torch.tensor([[-1.2, 3.1],
                                             -0.9f, 2.9f,                 //                         [-0.9, 2.9],
                                             -0.5f, 2.6f,                 //                         [-0.5, 2.6],
                                             2.3f, -1.1f,                 //                         [2.3, -1.1],
                                             2.7f, -1.5f}, SHAPE(5, 2));  //                         [2.7, -1.5]])
    Tensor *y_train = torch_tensor_long((int64_t[]){0, 0, 0, 1, 1}, SHAPE(5)); // y_train = torch.tensor([0, 0, 0, 1, 1])
    Tensor *X_test = torch_tensor((float[]){-0.8f, 2.8f,                  // X_test = torch.tensor([[-0.8, 2.8],
                                            2.6f, -1.6f}, SHAPE(2, 2));   //                        [2.6, -1.6]])
    Tensor *y_test = torch_tensor_long((int64_t[]){0, 1}, SHAPE(2));      // y_test = torch.tensor([0, 1])
    TensorDataset train_ds = TensorDataset_new(X_train, y_train);         // train_ds = ToyDataset(X_train, y_train)
    TensorDataset test_ds = TensorDataset_new(X_test, y_test);            // test_ds = ToyDataset(X_test, y_test)
    printf("%lld\n", (long long)TensorDataset_len(&train_ds));            // len(train_ds)
    torch_manual_seed(123);                                               // torch.manual_seed(123)
    TensorDataLoader train_loader = TensorDataLoader_new(&train_ds, 2, true, false); // train_loader = DataLoader(dataset=train_ds,
                                                                          //     batch_size=2, shuffle=True, num_workers=0)
    test_ds = TensorDataset_new(X_test, y_test);                          // test_ds = ToyDataset(X_test, y_test)
    TensorDataLoader test_loader = TensorDataLoader_new(&test_ds, 2, false, false); // test_loader = DataLoader(dataset=test_ds,
                                                                          //     batch_size=2, shuffle=False, num_workers=0)
    batches(&train_loader);                                               // for idx, (x, y) in enumerate(train_loader): ...
    train_loader = TensorDataLoader_new(&train_ds, 2, true, true);        // train_loader = DataLoader(dataset=train_ds,
                                                                          //     batch_size=2, shuffle=True, num_workers=0, drop_last=True)
    batches(&train_loader);                                               // for idx, (x, y) in enumerate(train_loader): ...

    section("A.7 A typical training loop", NULL);
    torch_manual_seed(123);                                               // torch.manual_seed(123)
    model = NeuralNetwork_new(2, 2);                                      // model = NeuralNetwork(num_inputs=2, num_outputs=2)
    optim_Optimizer *optimizer =                                          // optimizer = torch.optim.SGD(
        optim_SGD(nn_named_parameters(&model->module), 0.5, 0, 0, 0, false); //     model.parameters(), lr=0.5)
    int num_epochs = 3;                                                   // num_epochs = 3
    for (int epoch = 0; epoch < num_epochs; epoch++) {                    // for epoch in range(num_epochs):
        nn_train(&model->module, true);                                   //     model.train()
        Tensor *features, *labels;
        int64_t batch_idx = 0;
        TensorDataLoaderIter it = TensorDataLoader_iter(&train_loader);   //     for batch_idx, (features, labels) in enumerate(train_loader):
        for (; TensorDataLoaderIter_next(&it, &features, &labels); batch_idx++) {
            Tensor *logits = NeuralNetwork_forward(model, features);      //         logits = model(features)
            loss = torch_cross_entropy(logits, labels, -100);             //         loss = F.cross_entropy(logits, labels) # Loss function
            optim_zero_grad(optimizer);                                   //         optimizer.zero_grad()
            torch_backward(loss, NULL);                                   //         loss.backward()
            optim_step(optimizer);                                        //         optimizer.step()
            printf("Epoch: %03d/%03d", epoch + 1, num_epochs);            //         print(f"Epoch: {epoch+1:03d}/{num_epochs:03d}"
            printf(" | Batch %03lld/%03lld", (long long)batch_idx + 1,    //               f" | Batch {batch_idx+1:03d}/{len(train_loader):03d}"
                   (long long)TensorDataLoader_len(&train_loader));
            printf(" | Train/Val Loss: %.2f\n", torch_item(loss));        //               f" | Train/Val Loss: {loss:.2f}")
        }
        nn_eval(&model->module);                                          //     model.eval()
    }
    nn_eval(&model->module);                                              // model.eval()
    Tensor *outputs = NULL;
    TORCH_NO_GRAD {                                                       // with torch.no_grad():
        outputs = NeuralNetwork_forward(model, X_train);                  //     outputs = model(X_train)
    }
    torch_print(outputs);                                                 // print(outputs)
    torch_set_printoptions_sci_mode(TORCH_SCI_MODE_FALSE);                // torch.set_printoptions(sci_mode=False)
    Tensor *probas = torch_softmax(outputs, 1);                           // probas = torch.softmax(outputs, dim=1)
    torch_print(probas);                                                  // print(probas)
    Tensor *predictions = torch_argmax(probas, 1, false);                 // predictions = torch.argmax(probas, dim=1)
    torch_print(predictions);                                             // print(predictions)
    predictions = torch_argmax(outputs, 1, false);                        // predictions = torch.argmax(outputs, dim=1)
    torch_print(predictions);                                             // print(predictions)
    torch_print(torch_eq(predictions, y_train));                          // predictions == y_train
    torch_print(torch_sum(torch_eq(predictions, y_train)));               // torch.sum(predictions == y_train)

    section("A.8 The accuracy of the model", "compute_accuracy");
    char buf[32];
    printf("%s\n", ac_pyfloat(compute_accuracy(model, &train_loader), buf)); // compute_accuracy(model, train_loader)
    printf("%s\n", ac_pyfloat(compute_accuracy(model, &test_loader), buf));  // compute_accuracy(model, test_loader)
    torch_set_printoptions_sci_mode(TORCH_SCI_MODE_NONE);                 // (C: the default again)
    optim_free(optimizer);                                                // (C: the optimizer's state,
    nn_free(&model->module);                                              //  the model, its parameters and their .grad)
}

/* ==== the reader's page ============================================================================ */
#include <unistd.h>

#include "appendix_a_sources.h" /* appendix_a_c_source: generated by make from this file */
#include "viz.h"

#define MAX_SECTIONS 16
typedef struct { const char *title, *functions; long out_begin; } Section;
static struct { bool html; int n; Section s[MAX_SECTIONS]; } page;

static void section(const char *title, const char *functions) {
    if (!page.html) return;
    if (page.n == MAX_SECTIONS) {
        fprintf(stderr, "appendix_a: more than %d sections\n", MAX_SECTIONS);
        exit(1);
    }
    fflush(stdout);
    page.s[page.n++] = (Section){title, functions, (long)lseek(1, 0, SEEK_CUR)};
}

static void write_page(FILE *f, const char *out, size_t out_len) {
    ac_page_begin(f, "Appendix A, Introduction to PyTorch: the book's Python beside C",
                  "<p>The code of appendix A of Sebastian Raschka's <i>Build a Large Language Model (From "
                  "Scratch)</i> (its notebook, <code>appendix-A/01_main-chapter-code/code-part1.ipynb</code>) in its "
                  "order: the Python on the left, <b>attention.c</b> on the right, row for row, and below them what "
                  "both print, byte for byte the same (PyTorch 1.13). The C column is "
                  "<code>examples/appendix_a.c</code> itself, so it cannot drift from the code. Made by "
                  "<code>./build/appendix_a --html FILE</code>; no script, no network.</p>");
    const char *ids[MAX_SECTIONS], *titles[MAX_SECTIONS];
    char idbuf[MAX_SECTIONS][16];
    for (int i = 0; i < page.n; i++) {
        snprintf(idbuf[i], sizeof idbuf[i], "s%d", i + 1);
        ids[i] = idbuf[i], titles[i] = page.s[i].title;
    }
    ac_page_toc(f, page.n, ids, titles);
    const char *body = strstr(appendix_a_c_source, "\nstatic void appendix_a(void) {\n");
    if (!body) {
        fprintf(stderr, "appendix_a: appendix_a() not found in its own source\n");
        exit(1);
    }
    const char *p = strstr(body, "section(");
    for (int i = 0; i < page.n; i++) {
        Section *s = &page.s[i];
        ac_page_section_begin(f, ids[i], s->title);
        if (s->functions) { /* the class or function the section defines, from this file */
            char names[128];
            snprintf(names, sizeof names, "%s", s->functions);
            ac_rows fr = {0};
            for (char *nm = strtok(names, " "); nm; nm = strtok(NULL, " "))
                if (!ac_rows_function(appendix_a_c_source, nm, &fr)) {
                    fprintf(stderr, "appendix_a: %s not found in its own source\n", nm);
                    exit(1);
                }
            ac_page_code(f, "Defined above the cells (examples/appendix_a.c)", "Python (the notebook)",
                         "C (examples/appendix_a.c)", fr.n, fr.rows);
            ac_code_rows_free(fr.n, fr.rows);
        }
        ac_rows r = {0};
        p = ac_rows_collect(strchr(p, '\n') + 1, "section(", &r);
        ac_rows_dedent(&r);
        ac_page_code(f, NULL, "Python (the notebook)", "C (examples/appendix_a.c)", r.n, r.rows);
        ac_code_rows_free(r.n, r.rows);
        long end = i + 1 < page.n ? page.s[i + 1].out_begin : (long)out_len;
        if (end > s->out_begin) ac_page_output(f, out + s->out_begin, (size_t)(end - s->out_begin));
        ac_page_section_end(f);
        if (*p == '}') break;
    }
    ac_page_end(f, "<p>attention.c: same seed, same numbers. The outputs above come from running the C; "
                   "<code>tests/data/appendix_a_expected.txt</code> is PyTorch's, and a test checks they are identical.</p>");
}

static void usage(FILE *f) {
    fprintf(f, "usage: appendix_a [--html FILE]\n"
               "Runs the book's appendix A (Introduction to PyTorch) in C and prints what its notebook prints.\n"
               "  --html FILE   write the reader's page: each cell's Python beside this C and its output,\n"
               "                one self-contained HTML file (no script, no network)\n"
               "  --help        this text\n");
}

static void appendix_error(ac_error_kind kind, const char *msg, void *user) {
    fflush(stdout);
    fprintf(stderr, "appendix_a: error: %s\n", msg);
    exit(1);
}

static int run_appendix_a(void *unused) {
    (void)unused;
    appendix_a();
    return 0;
}

int main(int argc, char **argv) {
    ac_set_error_handler(appendix_error, NULL);
    ac_set_exact(true); /* PyTorch's sums, digit for digit */
    const char *html = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return ac_finish_output("appendix_a", 0);
        } else if (strcmp(argv[i], "--html") == 0 && i + 1 < argc) {
            html = argv[++i];
        } else {
            fprintf(stderr, "appendix_a: %s: unknown flag or missing value\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!html) {
        appendix_a();
        ac_shutdown();
        return ac_finish_output("appendix_a", 0);
    }
    page.html = true;
    int rc = ac_page_of_run("appendix_a", html, run_appendix_a, NULL, write_page); /* the run's output, section by section, on the page */
    if (rc) return rc;
    ac_shutdown();
    return ac_finish_output("appendix_a", 0);
}

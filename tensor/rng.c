/* PyTorch 1.13's CPU generator, bit for bit (../shared/spec/pytorch-rng-and-print.md,
 * Part 1): MT19937, the float/double uniforms, Box-Muller normals with the
 * cached second value, the 16-wide "fill then transform" normal path (the scalar
 * path "A" that ATEN_CPU_CAPABILITY=default runs, and that the article's numbers
 * come from), randint, randperm, bernoulli_, exponential_ and multinomial.
 * The build uses -ffp-contract=off: no multiply-add here may be fused. */
#include <math.h>
#include <string.h>

#include <pthread.h>

#include "internal.h"

#define MT_N 624
#define MT_M 397

torch_Generator torch_default_generator = {.left = 1, .seed = 67280421310721ULL};
static bool default_seeded;

/* The default generator is one per process, as PyTorch's, and a draw holds
 * its lock (as PyTorch's CPU generator does): several threads may draw from
 * it, each op's numbers staying together, in an order the threads decide. A
 * thread that wants its own reproducible stream sets its own generator with
 * ac_set_thread_generator; then its draws take no lock. */
static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local torch_Generator *thread_gen;
static _Thread_local bool holding;

void ac_set_thread_generator(torch_Generator *g) { thread_gen = g; }
torch_Generator *ac_thread_generator(void) { return thread_gen ? thread_gen : &torch_default_generator; }

void torch_generator_manual_seed(torch_Generator *g, uint64_t seed) {
    g->seed = seed;
    g->st[0] = (uint32_t)(seed & 0xFFFFFFFFu);
    for (uint32_t j = 1; j < MT_N; j++)
        g->st[j] = 1812433253u * (g->st[j - 1] ^ (g->st[j - 1] >> 30)) + j;
    g->left = 1;
    g->next = 0;
    g->has_next_double_normal = false;
}

void torch_manual_seed(uint64_t seed) {
    if (thread_gen) { /* this thread draws from its own generator: seed that one */
        torch_generator_manual_seed(thread_gen, seed);
        return;
    }
    pthread_mutex_lock(&default_lock);
    torch_generator_manual_seed(&torch_default_generator, seed);
    default_seeded = true;
    pthread_mutex_unlock(&default_lock);
}

static void gen_done(void);
static pthread_once_t hook_once = PTHREAD_ONCE_INIT;
static void register_hook(void) { ac_on_error(gen_done); }

/* The generator of an op's draws: the one passed (generator=g), else this
 * thread's; gen_done() after the op's last draw. */
static torch_Generator *gen(torch_Generator *given) {
    if (given) return given;
    if (thread_gen) return thread_gen;
    pthread_once(&hook_once, register_hook); /* an error inside the draw lets go of the lock */
    pthread_mutex_lock(&default_lock);
    holding = true;
    if (!default_seeded) {
        torch_generator_manual_seed(&torch_default_generator, 67280421310721ULL);
        default_seeded = true;
    }
    return &torch_default_generator;
}

static void gen_done(void) {
    if (!holding) return;
    holding = false;
    pthread_mutex_unlock(&default_lock);
}



/* The next MT_N words of the state; three runs instead of an index mod MT_N at every word (the
 * words a step reads past the end wrap to the start, which was rewritten first, as MT19937 wants). */
static inline uint32_t mix(uint32_t hi, uint32_t lo, uint32_t far) {
    uint32_t y = (hi & 0x80000000u) | (lo & 0x7FFFFFFFu);
    return far ^ (y >> 1) ^ (lo & 1u ? 0x9908B0DFu : 0u);
}
static void twist(torch_Generator *g) {
    uint32_t *st = g->st;
    int k = 0;
    for (; k < MT_N - MT_M; k++) st[k] = mix(st[k], st[k + 1], st[k + MT_M]);
    for (; k < MT_N - 1; k++) st[k] = mix(st[k], st[k + 1], st[k + MT_M - MT_N]);
    st[MT_N - 1] = mix(st[MT_N - 1], st[0], st[MT_M - 1]);
    g->left = MT_N;
    g->next = 0;
}

static inline uint32_t temper(uint32_t y) {
    y ^= y >> 11;
    y ^= (y << 7) & 0x9D2C5680u;
    y ^= (y << 15) & 0xEFC60000u;
    y ^= y >> 18;
    return y;
}

uint32_t ac_random32(torch_Generator *g) {
    if (--g->left <= 0) twist(g); /* <= : a generator never seeded (all zero) twists, not reads past st */
    return temper(g->st[g->next++]);
}

/* n draws, the very ones n calls of ac_random32 give: a run of the state tempered at once, in a
 * loop the compiler vectorizes (a bernoulli_ over a dropout's millions of elements spent most of
 * its time in the call per draw). */
static void random32_fill(torch_Generator *g, uint32_t *out, int64_t n) {
    while (n > 0) {
        if (g->left <= 1) { /* the call that would twist: after it, all MT_N words are ahead */
            twist(g);
            g->left = MT_N + 1;
        }
        int64_t take = n < (int64_t)g->left - 1 ? n : (int64_t)g->left - 1;
        const uint32_t *st = g->st + g->next;
        for (int64_t i = 0; i < take; i++) out[i] = temper(st[i]);
        g->next += (int)take;
        g->left -= (int)take;
        out += take, n -= take;
    }
}

uint64_t ac_random64(torch_Generator *g) {
    uint64_t hi = ac_random32(g);
    uint64_t lo = ac_random32(g);
    return (hi << 32) | lo;
}

/* uniform_real_distribution<float>(0,1): the low 24 bits of one draw. */
static float u01f(torch_Generator *g) { return (float)(ac_random32(g) & 0xFFFFFFu) * (1.0f / 16777216.0f); }
/* uniform_real_distribution<double>(0,1): the low 53 bits of random64(). */
static double u01d(torch_Generator *g) {
    return (double)(ac_random64(g) & ((1ULL << 53) - 1)) * (1.0 / 9007199254740992.0);
}

static double normal_double(torch_Generator *g, double mean, double std) {
    if (g->has_next_double_normal) {
        g->has_next_double_normal = false;
        return g->next_double_normal * std + mean;
    }
    double u1 = u01d(g), u2 = u01d(g);
    double r = sqrt(-2.0 * log(1.0 - u2));
    double theta = 2.0 * M_PI * u1;
    g->next_double_normal = r * sin(theta);
    g->has_next_double_normal = true;
    return r * cos(theta) * std + mean;
}

/* normal_fill_16 of the DEFAULT kernel: the first 8 values give the radius,
 * the last 8 the angle; 2*pi*u2 is computed in double, the rest in float. */
static void fill16(float *p, float mean, float std) {
    for (int j = 0; j < 8; j++) {
        float u1 = 1.0f - p[j];
        float u2 = p[j + 8];
        float radius = sqrtf(-2.0f * logf(u1));
        float theta = (float)(6.283185307179586 * (double)u2);
        float c = radius * cosf(theta), s = radius * sinf(theta);
        c = c * std;
        s = s * std;
        p[j] = c + mean;
        p[j + 8] = s + mean;
    }
}

/* In-place draws: float32 only, and not into a leaf that requires grad (as
 * PyTorch). Each op bumps t's version once its arguments are checked too. */
static void check_inplace_float(Tensor *t, const char *op) {
    ac_check_float(t, op);
    ac_check_inplace(t, op);
}

/* Visit every element of t in row-major order (any strides); BODY writes *ptr. */
#define FOR_EACH_ELEMENT(t, ptr, BODY)                                             \
    do {                                                                           \
        Tensor *t_ = (t);                                                          \
        int64_t n_ = torch_numel(t_), idx_[AC_MAX_DIMS] = {0}, off_ = t_->offset;   \
        for (int64_t k_ = 0; k_ < n_; k_++) {                                      \
            float *ptr = (float *)t_->data + off_;                                 \
            BODY;                                                                  \
            ac_advance(t_->ndim, t_->shape, t_->stride, idx_, &off_);              \
        }                                                                          \
    } while (0)

Tensor *torch_uniform_gen_(Tensor *t, double from, double to, torch_Generator *generator) {
    check_inplace_float(t, "uniform_");
    if (!(from <= to))
        ac_error("uniform_: uniform_ expects to return a [from, to) range, but found from=%g > to=%g", from, to);
    ac_bump_version(t);
    torch_Generator *g = gen(generator);
    float lo = (float)from, hi = (float)to, range = hi - lo;
    /* DEFAULT kernel: two roundings, (u * range) then + from. */
    FOR_EACH_ELEMENT(t, p, { float v = u01f(g) * range; *p = v + lo; });
    gen_done();
    return t;
}

Tensor *torch_normal_gen_(Tensor *t, double mean, double std, torch_Generator *generator) {
    check_inplace_float(t, "normal_");
    if (!(std >= 0.0)) ac_error("normal_: normal expects std >= 0.0, but found std %g", std);
    ac_bump_version(t);
    torch_Generator *g = gen(generator);
    int64_t n = torch_numel(t);
    if (n >= 16 && torch_is_contiguous(t)) {
        float *d = (float *)t->data + t->offset, m = (float)mean, s = (float)std;
        for (int64_t i = 0; i < n; i++) d[i] = u01f(g);
        for (int64_t i = 0; i + 16 <= n; i += 16) fill16(d + i, m, s);
        if (n % 16 != 0) {
            for (int k = 0; k < 16; k++) d[n - 16 + k] = u01f(g); /* 16 new draws */
            fill16(d + n - 16, m, s);
        }
        gen_done();
        return t;
    }
    FOR_EACH_ELEMENT(t, p, { *p = (float)normal_double(g, mean, std); });
    gen_done();
    return t;
}

/* keep[j] = u01d(g) < p for the next m <= 256 elements, from their 2m draws: the 53-bit draw
 * against thr = ceil(p 2^53) as integers (bits 2^-53 < p exactly when bits < thr, both sides
 * exact), so the loop has no conversion to double and vectorizes. */
static uint64_t bernoulli_threshold(double p) { return (uint64_t)ceil(p * 9007199254740992.0); }
static void bernoulli_block(torch_Generator *g, uint64_t thr, bool *keep, int64_t m) {
    uint32_t w[512], th = (uint32_t)(thr >> 32), tl = (uint32_t)thr;
    random32_fill(g, w, 2 * m);
    for (int64_t j = 0; j < m; j++) {
        uint32_t h = w[2 * j] & 0x1FFFFFu, l = w[2 * j + 1];
        keep[j] = (h < th) | ((h == th) & (l < tl)); /* no branch: the loop vectorizes */
    }
}

void ac_bernoulli_mask(torch_Generator *generator, double p, bool *keep, int64_t n) {
    torch_Generator *g = gen(generator);
    for (int64_t i = 0; i < n; i += 256) bernoulli_block(g, bernoulli_threshold(p), keep + i, n - i < 256 ? n - i : 256);
    gen_done();
}

Tensor *torch_bernoulli_gen_(Tensor *t, double p, torch_Generator *generator) {
    check_inplace_float(t, "bernoulli_");
    if (!(p >= 0.0 && p <= 1.0)) ac_error("bernoulli_: bernoulli_ expects p to be in [0, 1], but got p=%g", p);
    ac_bump_version(t);
    if (torch_is_contiguous(t)) { /* u01d's two draws an element, drawn a run at a time */
        float *q = (float *)t->data + t->offset;
        torch_Generator *g = gen(generator);
        bool keep[256];
        for (int64_t i = 0, n = torch_numel(t); i < n; i += 256) {
            int64_t m = n - i < 256 ? n - i : 256;
            bernoulli_block(g, bernoulli_threshold(p), keep, m);
            for (int64_t j = 0; j < m; j++) q[i + j] = keep[j] ? 1.0f : 0.0f;
        }
        gen_done();
        return t;
    }
    torch_Generator *g = gen(generator);
    FOR_EACH_ELEMENT(t, q, { *q = u01d(g) < p ? 1.0f : 0.0f; });
    gen_done();
    return t;
}
Tensor *torch_exponential_gen_(Tensor *t, double lambd, torch_Generator *generator) {
    check_inplace_float(t, "exponential_");
    if (!(lambd > 0.0)) ac_error("exponential_: expects lambda > 0.0, but found lambda=%g", lambd);
    ac_bump_version(t);
    torch_Generator *g = gen(generator);
    FOR_EACH_ELEMENT(t, q, { *q = (float)(-1.0 / lambd * log(1.0 - u01d(g))); });
    gen_done();
    return t;
}

/* t.random_(): numbers over the dtype's range as PyTorch 1.13's CPU kernel
 * draws them (uniform_int_distribution): int64 random64() % 2^63, int32
 * random() % 2^31, float32 random() % (2^24 + 1), bfloat16 random() % (2^8 + 1), float64 random64() %
 * (2^53 + 1), bool random() & 1. A DataLoader's seeds are int64 draws. */
Tensor *torch_random_gen_(Tensor *t, torch_Generator *generator) {
    ac_check_inplace(t, "random_");
    ac_bump_version(t);
    torch_Generator *g = gen(generator);
    int64_t n = torch_numel(t), idx[AC_MAX_DIMS] = {0}, off = t->offset;
    for (int64_t k = 0; k < n; k++) {
        switch (t->dtype) {
        case AC_INT64: ((int64_t *)t->data)[off] = (int64_t)(ac_random64(g) % (1ULL << 63)); break;
        case AC_INT32: ((int32_t *)t->data)[off] = (int32_t)(ac_random32(g) % (1ULL << 31)); break;
        case AC_FLOAT32: ((float *)t->data)[off] = (float)(ac_random32(g) % ((1ULL << 24) + 1)); break;
        case AC_FLOAT64: ((double *)t->data)[off] = (double)(ac_random64(g) % ((1ULL << 53) + 1)); break;
        case AC_BOOL: ((bool *)t->data)[off] = ac_random32(g) & 1; break;
        case AC_BFLOAT16: ((uint16_t *)t->data)[off] = ac_f32_to_bf16((float)(ac_random32(g) % ((1u << 8) + 1))); break;
        }
        ac_advance(t->ndim, t->shape, t->stride, idx, &off);
    }
    gen_done();
    return t;
}

Tensor *torch_random_(Tensor *t) { return torch_random_gen_(t, NULL); }

Tensor *torch_rand_gen(int ndim, const int64_t *shape, torch_Generator *generator) {
    Tensor *t = ac_new(AC_FLOAT32, ndim, shape);
    torch_Generator *g = gen(generator);
    float *p = t->data;
    for (int64_t i = 0, n = torch_numel(t); i < n; i++) p[i] = u01f(g);
    gen_done();
    return t;
}

Tensor *torch_randn_gen(int ndim, const int64_t *shape, torch_Generator *generator) {
    return torch_normal_gen_(ac_new(AC_FLOAT32, ndim, shape), 0.0, 1.0, generator);
}

Tensor *torch_randint_gen(int64_t low, int64_t high, int ndim, const int64_t *shape, torch_Generator *generator) {
    if (!(low < high))
        ac_error("randint: random_ expects 'from' to be less than 'to', but got from=%lld >= to=%lld",
                 (long long)low, (long long)high);
    Tensor *t = ac_new(AC_INT64, ndim, shape);
    torch_Generator *g = gen(generator);
    uint64_t range = (uint64_t)high - (uint64_t)low;
    int64_t *p = t->data;
    for (int64_t i = 0, n = torch_numel(t); i < n; i++) {
        uint64_t v = range >= (1ULL << 32) ? ac_random64(g) : ac_random32(g);
        p[i] = (int64_t)(v % range) + low;
    }
    gen_done();
    return t;
}

Tensor *torch_randperm_gen(int64_t n, torch_Generator *generator) {
    if (n < 0) ac_error("randperm: Trying to create tensor with negative dimension %lld: [%lld]", (long long)n, (long long)n);
    Tensor *t = torch_arange(n);
    int64_t *r = t->data;
    torch_Generator *g = gen(generator);
    for (int64_t i = 0; i + 1 < n; i++) {
        int64_t z = (int64_t)(ac_random32(g) % (uint64_t)(n - i));
        int64_t tmp = r[i];
        r[i] = r[i + z];
        r[i + z] = tmp;
    }
    gen_done();
    return t;
}

/* torch.multinomial on 1-D or 2-D weights (1.13 algorithms, spec 1.10). */
Tensor *torch_multinomial_gen(Tensor *probs, int64_t k, bool replacement, torch_Generator *generator) {
    ac_check_float(probs, "multinomial");
    if (probs->ndim < 1 || probs->ndim > 2)
        ac_error("multinomial: prob_dist must be 1 or 2 dim (got %d)", probs->ndim);
    int64_t rows = probs->ndim == 2 ? probs->shape[0] : 1, ncat = probs->shape[probs->ndim - 1];
    if (k <= 0) ac_error("multinomial: cannot sample n_sample <= 0 samples (got %lld)", (long long)k);
    if (!replacement && k > ncat)
        ac_error("multinomial: cannot sample n_sample > prob_dist.size(-1) samples without "
                 "replacement (%lld > %lld)", (long long)k, (long long)ncat);
    const float *p = ac_cdata(probs);
    for (int64_t i = 0; i < rows * ncat; i++)
        if (!(p[i] >= 0.0f) || isinf(p[i]))
            ac_error("multinomial: probability tensor contains either `inf`, `nan` or element < 0");
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t j = 0; j < ncat; j++) s += p[r * ncat + j];
        if (s <= 0) ac_error("multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
    }
    int64_t oshape[2] = {rows, k};
    Tensor *out = probs->ndim == 2 ? ac_new(AC_INT64, 2, oshape) : ac_new(AC_INT64, 1, &k);
    int64_t *o = out->data;
    torch_Generator *g = gen(generator);
    if (!replacement) {
        float *q = ac_arena_alloc(sizeof(float) * (size_t)(rows * ncat));
        for (int64_t i = 0; i < rows * ncat; i++) q[i] = (float)(-1.0 * log(1.0 - u01d(g)));
        for (int64_t r = 0; r < rows; r++) {
            float *v = q + r * ncat; /* v = p / q in place */
            for (int64_t j = 0; j < ncat; j++) v[j] = p[r * ncat + j] / v[j];
            for (int64_t s = 0; s < k; s++) { /* the s-th largest; first index wins ties */
                int64_t best = -1;
                for (int64_t j = 0; j < ncat; j++) {
                    if (v[j] == -INFINITY) continue;
                    if (best < 0 || isnan(v[j]) || v[j] > v[best]) best = j;
                    if (isnan(v[best])) break;
                }
                o[r * k + s] = best;
                v[best] = -INFINITY;
            }
        }
        gen_done();
        return out;
    }
    float *cum = ac_arena_alloc(sizeof(float) * (size_t)ncat);
    for (int64_t r = 0; r < rows; r++) {
        float s = 0;
        for (int64_t j = 0; j < ncat; j++) cum[j] = s = s + p[r * ncat + j];
        for (int64_t j = 0; j < ncat; j++) cum[j] = cum[j] / s;
        cum[ncat - 1] = 1.0f;
        for (int64_t t = 0; t < k; t++) {
            double u = u01d(g);
            int64_t lo = 0, hi = ncat;
            while (hi - lo > 0) {
                int64_t mid = lo + (hi - lo) / 2;
                if (cum[mid] < u) lo = mid + 1; else hi = mid;
            }
            o[r * k + t] = lo;
        }
    }
    gen_done();
    return out;
}

/* Without generator=: this thread's generator (the default one unless set). */
Tensor *torch_uniform_(Tensor *t, double from, double to) { return torch_uniform_gen_(t, from, to, NULL); }
Tensor *torch_normal_(Tensor *t, double mean, double std) { return torch_normal_gen_(t, mean, std, NULL); }
Tensor *torch_bernoulli_(Tensor *t, double p) { return torch_bernoulli_gen_(t, p, NULL); }
Tensor *torch_exponential_(Tensor *t, double lambd) { return torch_exponential_gen_(t, lambd, NULL); }
Tensor *torch_rand(int ndim, const int64_t *shape) { return torch_rand_gen(ndim, shape, NULL); }
Tensor *torch_randint(int64_t low, int64_t high, int ndim, const int64_t *shape) { return torch_randint_gen(low, high, ndim, shape, NULL); }
Tensor *torch_randperm(int64_t n) { return torch_randperm_gen(n, NULL); }
Tensor *torch_multinomial(Tensor *probs, int64_t k, bool replacement) { return torch_multinomial_gen(probs, k, replacement, NULL); }
Tensor *torch_randn(int ndim, const int64_t *shape) { return torch_randn_gen(ndim, shape, NULL); }

/* ---- the generator's state (torch.get_rng_state, g.get_state) -------------------------------
 * An int64 tensor of 628 values: the 624 MT19937 words, left, next, whether
 * a normal is cached, and the cached normal's bits. (PyTorch's is a
 * 5056-byte ByteTensor; attention.c has no uint8 dtype, and its layout is its own.) */
#define STATE_LEN 628

Tensor *torch_generator_get_state(torch_Generator *g) {
    Tensor *t = ac_new(AC_INT64, 1, (const int64_t[]){STATE_LEN});
    int64_t *p = t->data;
    g = gen(g);
    for (int i = 0; i < MT_N; i++) p[i] = g->st[i];
    p[624] = g->left;
    p[625] = g->next;
    p[626] = g->has_next_double_normal;
    memcpy(&p[627], &g->next_double_normal, sizeof(double));
    gen_done();
    return t;
}

bool ac_rng_state_check(const Tensor *t, char *err, size_t errlen) {
    if (!t || t->dtype != AC_INT64 || t->ndim != 1 || t->shape[0] != STATE_LEN) {
        snprintf(err, errlen, "Expected an RNG state of %d int64 values (torch_get_rng_state's), but found %s%s%s",
                 STATE_LEN, t ? ac_dtype_name(t->dtype) : "none", t ? " of shape " : "", t ? ac_shape_str(t) : "");
        return false;
    }
    Tensor *c = ac_materialize((Tensor *)(uintptr_t)t);
    const int64_t *p = c->data;
    for (int i = 0; i < MT_N; i++)
        if (p[i] < 0 || p[i] > (int64_t)UINT32_MAX) {
            snprintf(err, errlen, "the RNG state holds a generator word out of range (value %d: %lld)", i, (long long)p[i]);
            return false;
        }
    /* left draws remain before the next twist, reading st[next .. next + left - 2]: so
     * 1 <= left <= 624 and next + left <= 625 (next = 624 with left = 1 is a real state) */
    if (p[624] < 1 || p[624] > MT_N || p[625] < 0 || p[625] + p[624] > MT_N + 1 || (p[626] != 0 && p[626] != 1)) {
        snprintf(err, errlen, "the RNG state holds an invalid generator position");
        return false;
    }
    return true;
}

void torch_generator_set_state(torch_Generator *g, Tensor *state) {
    char err[200];
    if (state) ac_check_live(state, "set_state");
    if (!ac_rng_state_check(state, err, sizeof err)) ac_error("set_state: %s", err);
    const int64_t *p = ac_materialize(state)->data;
    g = gen(g);
    for (int i = 0; i < MT_N; i++) g->st[i] = (uint32_t)p[i];
    g->left = (int)p[624];
    g->next = (int)p[625];
    g->has_next_double_normal = p[626] != 0;
    memcpy(&g->next_double_normal, &p[627], sizeof(double));
    if (g == &torch_default_generator) default_seeded = true;
    gen_done();
}

Tensor *torch_get_rng_state(void) { return torch_generator_get_state(NULL); }
void torch_set_rng_state(Tensor *state) { torch_generator_set_state(NULL, state); }
uint64_t torch_generator_initial_seed(torch_Generator *g) {
    g = gen(g);
    uint64_t s = g->seed;
    gen_done();
    return s;
}
uint64_t torch_initial_seed(void) { return torch_generator_initial_seed(NULL); }

/* amk_llm.h - AMK's generation API. Part of AMK (amk.h has the library's manual).

   WHAT IT DOES
     amk_llm: a model file (or random weights) opened, its decode step built, lowered and loaded
     onto a backend, the GPU when there is one (the CUDA runtime) else the reference VM, chosen
     once behind a small backend interface; one decode step or a chain of greedy steps at a time;
     the KV cache reset; sampling (temperature, top-k, top-p) on the host.
     Weights: a model file's quantized matrices (GGUF block formats) stay in their format by
     default (amk_llm_opts.weights_as_stored), the rest in build.weight_dtype; with
     weights_as_stored 0 every matrix is converted to build.weight_dtype. Random weights are in
     build.weight_dtype, or in the block formats build.weight_dtype_of names (random blocks).
   WHAT IT DOES NOT DO
     Batch > 1, prefill in one launch.
   CONTENTS
     declarations >>llm | implementation >>impl_llm */
#ifndef AMK_LLM_H
#define AMK_LLM_H

#include "amk_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== >>llm: a model ready to run, and sampling =================================================== */

typedef enum amk_backend {
    AMK_BACKEND_AUTO = 0, /* the GPU when there is one, else the reference VM */
    AMK_BACKEND_CPU = 1,  /* the reference VM */
    AMK_BACKEND_CUDA = 2  /* the megakernel; fails without a GPU */
} amk_backend;

typedef struct amk_llm_opts {
    /* build.weight_dtype and build.act_dtype: AMK_DTYPE_AUTO by default, chosen as the model opens.
       On the GPU (backend CUDA, or AUTO where a device and a device image are): BF16 matrices
       (those not kept in a block format), and activations and KV cache in the matrices' dtype
       (BF16 unless weight_dtype is set): the path of the prompt's tensor cores and of the
       benchmarks. On the reference VM: F32, its exact path. */
    amk_llama_build_opts build;
    amk_backend backend;
    uint64_t random_seed; /* amk_llm_open_random: the weights' seed */
    /* A model file's matrices and embedding stored in a block format (a quantized GGUF): 1
       (default) they keep it, read as stored: where build.weight_dtype_of is NULL it becomes the
       file's stored dtype of each tensor (amk_model_tensor_dtype; amk_llama_build_opts says which
       buffers can take a block format, the rest being build.weight_dtype); 0 every matrix is
       converted to build.weight_dtype as it loads. Random weights ignore it. */
    int weights_as_stored;
    /* The device VM image (amk_vm.cuh built by `make device`: a cubin, fatbin or PTX). Without one
       AUTO runs on the reference VM and CUDA fails. */
    const void *device_image;
    size_t device_image_size;
    double timeout_ms;    /* per GPU launch (a step, a prefill chunk); <= 0: 10 s */
    /* The prompt (amk_llm_prefill): chunks of this many tokens through a prefill program beside
       the decode step (amk_llama_build_opts.prefill_rows), sharing its weights and KV caches; 0
       (default) the backend's (AMK_LLM_PREFILL_ROWS on the GPU, AMK_LLM_PREFILL_ROWS_CPU on the
       reference VM), at most the context; -1 none: the prompt goes through the decode step a
       token at a time, as it does for a config the prefill program does not take and on the
       reference VM with random weights. Beside it up to AMK_LLM_PREFILL_SUBS smaller prefill
       programs, each of a quarter of the rows of the one before (AMK_LLM_PREFILL_SHORT_DIV, when
       that is AMK_LLM_PREFILL_SHORT_MIN rows or more; on the GPU 2048, 512 and 128), take shorter
       prompts and the ends of long ones (amk_llm_prefill_rows_at). Where the device (or the host,
       on the reference VM) has no memory for the set, the set of a quarter of the rows and one
       program fewer (512 and 128, then 128 alone, ...), with a note (amk_llm_note). */
    int prefill_rows;
    /* Called while weights load (what: "weights", done/total in bytes; then for a folded step,
       what: "fold", done/total in rows of W_fold computed: amk_llama_build's qkv_fold). May be NULL. */
    void (*progress)(void *user, const char *what, uint64_t done, uint64_t total);
    /* (amk_llm_prefill also calls it, what: "prompt", done/total in tokens) */
    void *progress_user;
} amk_llm_opts;

/* A model ready to run: its config, its decode-step program, its weights on a backend, and its
   tokenizer (NULL for random weights). */
typedef struct amk_llm amk_llm;

/* Sets o->weight_dtype_of (and its user) so that the matrices and the embedding of model stored in
   a block format keep it (each tensor's amk_model_tensor_dtype): what amk_llm does for
   weights_as_stored, for a caller who builds a model's step itself (amk_llama_build). model must
   stay open while o builds. NULL o is ignored. */
AMK_API void amk_llama_build_opts_stored(amk_llama_build_opts *o, amk_model *model);

/* Defaults: AUTO backend, random_seed 1, weights_as_stored 1, amk_llama_build_opts_default's build
   with AMK_DTYPE_AUTO dtypes. NULL is ignored. */
AMK_API void amk_llm_opts_default(amk_llm_opts *o);
/* Opens a model file (see amk_model_open), builds, lowers and loads its decode step. Refuses a
   tokenizer with more tokens than the embedding has rows (AMK_ERR_MISMATCH; fewer is legal: HF
   pads embeddings), a build.max_seq above the model's context, max_pos (AMK_ERR_INVALID_ARG),
   and on the reference VM a step whose buffers (weights, KV cache) need more than the machine's
   physical memory, before allocating them (AMK_ERR_INVALID_ARG when the KV cache alone does: a
   smaller max_seq is the cure; else AMK_ERR_OUT_OF_MEMORY). NULL out or path:
   AMK_ERR_INVALID_ARG. */
AMK_API amk_result amk_llm_open(const char *model_path, const amk_llm_opts *o, amk_llm **out,
                                amk_diag *d);
/* The same from a model the caller already opened and its tokenizer (tok may be NULL: then it
   is made from the model). Takes both over, also on failure (a NULL out too): the caller frees
   neither. */
AMK_API amk_result amk_llm_open_model(amk_model *model, amk_tokenizer *tok, const amk_llm_opts *o,
                                      amk_llm **out, amk_diag *d);
/* The same program with random weights (uniform, scaled by 1/sqrt(fan-in); norms 1). A buffer in
   a block format (o->build.weight_dtype_of) gets random quants, its scales set a block so that its
   values have mean 0 (where the format has a min) and variance 1/fan-in, on the reference VM; the
   GPU backend makes every random weight on the device (amk_cuda_fill_random: a block format's
   scales set from the fan-in only; timing weights). */
AMK_API amk_result amk_llm_open_random(const amk_llama_config *cfg, const amk_llm_opts *o,
                                       amk_llm **out, amk_diag *d);
AMK_API void amk_llm_close(amk_llm *m);
AMK_API const amk_llama_config *amk_llm_config(const amk_llm *m);
AMK_API const amk_program *amk_llm_program(const amk_llm *m);
AMK_API const amk_tokenizer *amk_llm_tokenizer(const amk_llm *m);
AMK_API int amk_llm_max_seq(const amk_llm *m);
AMK_API const char *amk_llm_backend_name(const amk_llm *m); /* "cpu" or "cuda" */
/* Why m runs where it does, one phrase for the user: on the GPU its device and the image build it
   loaded ("NVIDIA H200, the full image"); on the reference VM why (asked for; no device image in
   the program; or, AUTO, the GPU's error: "no usable GPU: no CUDA driver: ..."). */
AMK_API const char *amk_llm_backend_reason(const amk_llm *m);
/* What opening m changed of the options it was given, as one line for the user ("" when nothing),
   for a backend that may be the GPU: build.num_sms above the device's SM count becomes the
   device's (the step's blocks must all be resident); build.qkv_fold 1 where the GPU's forms do not
   take the folded step (a context past the lean attention's window, F32 weights, the portable
   image) builds the step unfolded. */
AMK_API const char *amk_llm_note(const amk_llm *m);
/* Runs one decode step: token at position pos. *logits (logits may be NULL) points at vocab
   floats owned by m, valid until the next step; with logits NULL the GPU backend does not copy
   them back (a greedy loop asks for argmax alone). *argmax (may be NULL) gets the greedy token.
   Positions must be fed in order from 0 (the KV cache holds the earlier ones): m remembers the
   next position (0 after open and amk_llm_reset, pos + 1 after a step) and refuses a pos past it
   (AMK_ERR_INVALID_ARG). An earlier pos is legal: it overwrites that row, and the rows after it
   no longer count (the next position becomes pos + 1). A pos outside the KV cache or a token
   outside the vocabulary: AMK_ERR_RUNTIME. */
AMK_API amk_result amk_llm_step(amk_llm *m, int token, int pos, const float **logits, int *argmax,
                                amk_diag *d);
/* Runs the prompt tokens[0..n) at positions pos..pos + n - 1, as n amk_llm_step calls would: the
   KV cache gets their rows, *logits (logits may be NULL) and *argmax (may be NULL) those of the
   last token. With prefill programs (amk_llm_opts.prefill_rows) the tokens go in chunks of the
   longest's rows, a run (on the GPU a launch) a chunk; what is left after the whole chunks goes in
   one chunk of it, padded, where the tokens fill a share of it (AMK_LLM_PREFILL_TOP_PCT % with two
   smaller programs below it, AMK_LLM_PREFILL_LONG_PCT % with one, AMK_LLM_PREFILL_PAD_PCT % with
   none), else in chunks of the next smaller program by the same rule (amk_llm_prefill_rows_at),
   and past the shortest a step a token; without a prefill program a step a token. A padded chunk
   whose rows would pass the cache's end starts earlier, over tokens of this call it then computes
   again (their cache rows written again, the same math), where there are enough of them. The padded rows write cache rows past the prompt, which
   no later step reads before writing. Progress: amk_llm_opts.progress ("prompt", tokens done).
   Arguments as amk_llm_step's (n >= 1; pos + n must fit the KV cache); the next position becomes
   pos + n. */
AMK_API amk_result amk_llm_prefill(amk_llm *m, const int *tokens, int n, int pos, const float **logits,
                                   int *argmax, amk_diag *d);
/* The rows of a prefill chunk amk_llm_prefill runs; 0 when it runs the prompt a token at a time
   (a config the prefill program does not take yet, random weights on the reference VM,
   prefill_rows -1). */
AMK_API int amk_llm_prefill_rows(const amk_llm *m);
/* The rows of the prefill program of tier t: 0 the longest (amk_llm_prefill_rows), 1.. the smaller
   ones (each a quarter of the one before, AMK_LLM_PREFILL_SHORT_DIV: short prompts and a prompt's
   end; at most AMK_LLM_PREFILL_SUBS, none of fewer than 8 rows); 0 past the last. */
AMK_API int amk_llm_prefill_rows_at(const amk_llm *m, int t);
/* amk_llm_prefill_rows_at(m, 1): the next smaller prefill program's rows, 0 when there is none. */
AMK_API int amk_llm_prefill_rows_short(const amk_llm *m);
/* The prefill program and its GPU runtime (NULL when amk_llm_prefill_rows is 0): for timing a
   chunk and its timeline (amk bench --prefill). */
AMK_API const amk_program *amk_llm_prefill_program(const amk_llm *m);
AMK_API amk_cuda *amk_llm_prefill_cuda(amk_llm *m);
/* The device memory m holds on the GPU, in bytes: the step's arena (weights, KV caches,
   activations, tables) and each prefill program's own (its activations, a quantized model's
   dequantized copies); 0 on the reference VM. */
AMK_API uint64_t amk_llm_device_bytes(const amk_llm *m);
/* Greedy decode of n tokens in order from token at position pos: tokens[i] gets the greedy token
   of the step at position pos + i, whose input is token (i = 0) or tokens[i - 1] (so tokens[n -
   1] has not been fed). On the GPU backend the n steps run in one launch (amk_cuda_run_chain: no
   host round trip between them); else amk_llm_step a step. n in [1, AMK_CUDA_MAX_CHAIN]; pos + n
   must fit the KV cache (AMK_ERR_RUNTIME, as amk_llm_step); pos must not skip ahead of the next
   position (AMK_ERR_INVALID_ARG, as amk_llm_step), which becomes pos + n. */
AMK_API amk_result amk_llm_generate(amk_llm *m, int token, int pos, int n, int *tokens, amk_diag *d);
/* The GPU backend's runtime (NULL on the reference VM): for timing and the timeline. */
AMK_API amk_cuda *amk_llm_cuda(amk_llm *m);
/* Zeroes the KV cache (a new conversation): the next position is 0 again. */
AMK_API amk_result amk_llm_reset(amk_llm *m, amk_diag *d);
/* Makes pos (0..max_seq) the next position without running the steps before it: the KV cache's
   rows below pos are taken as they are (zeros after open or amk_llm_reset). For timing a step at
   a long context (amk bench) or reusing a prefix already in the cache. AMK_ERR_INVALID_ARG for a
   pos outside [0, max_seq]. */
AMK_API amk_result amk_llm_seek(amk_llm *m, int pos, amk_diag *d);

/* Sampling: temperature 0 is greedy; else softmax(logits / temperature) restricted to the top_k
   most likely (0 = all) and the smallest set whose probability reaches top_p (1 = all). */
typedef struct amk_sampler {
    float temperature;
    int top_k;
    float top_p;
    uint64_t state[4];
    int *scratch_idx; float *scratch_p; int scratch_n; /* internal */
} amk_sampler;
/* NULL s is ignored (init and free). sample returns -1 for a NULL s or logits, or n < 1. */
AMK_API void amk_sampler_init(amk_sampler *s, float temperature, int top_k, float top_p,
                              uint64_t seed);
AMK_API int amk_sampler_sample(amk_sampler *s, const float *logits, int n);
AMK_API void amk_sampler_free(amk_sampler *s);


#ifdef __cplusplus
}
#endif
#endif /* AMK_LLM_H */

#if defined(AMK_IMPLEMENTATION) && !defined(AMK_LLM_IMPLEMENTATION_DONE)
#define AMK_LLM_IMPLEMENTATION_DONE
/* ==== >>impl_llm: sampling, the LLM object ======================================================= */
/* ---- sampling ------------------------------------------------------------------------------- */

AMK_API void amk_sampler_init(amk_sampler *s, float temperature, int top_k, float top_p, uint64_t seed) {
    amk__rng r;
    if (!s) return;
    memset(s, 0, sizeof *s);
    s->temperature = temperature;
    s->top_k = top_k;
    s->top_p = top_p;
    amk__rng_seed(&r, seed);
    memcpy(s->state, r.s, sizeof s->state);
}

AMK_API void amk_sampler_free(amk_sampler *s) {
    if (!s) return;
    amk__free(s->scratch_idx);
    amk__free(s->scratch_p);
    s->scratch_idx = NULL;
    s->scratch_p = NULL;
    s->scratch_n = 0;
}

AMK__FN int amk__argmax(const float *x, int n) {
    int i, best = 0;
    for (i = 1; i < n; i++)
        if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i])) best = i;
    return best;
}

/* Token a comes before token b by their values in l (logits or probabilities): the higher first
   (NaN last), ties by lower index (a fixed order, so a seed's draws are reproducible). */
AMK__FN int amk__l_before(const float *l, int a, int b) {
    const float x = l[a] == l[a] ? l[a] : -INFINITY, y = l[b] == l[b] ? l[b] : -INFINITY;
    return x > y || (x == y && a < b);
}

/* Sifts h[r] down the heap h[0..n): with last = 0 the first element comes first in
   amk__l_before's order (a max-heap), with last = 1 it comes last (a min-heap). */
AMK__FN void amk__heap_down(int *h, const float *l, int n, int r, int last) {
    for (;;) {
        int c = 2 * r + 1, tmp;
        if (c >= n) break;
        if (c + 1 < n && amk__l_before(l, h[c + 1], h[c]) != last) c++;
        if (amk__l_before(l, h[c], h[r]) == last) break;
        tmp = h[r]; h[r] = h[c]; h[c] = tmp; r = c;
    }
}

/* h[0..k) = the k tokens of v[0..n) that come first in amk__l_before's order, in that order: a
   min-heap of the best k so far, O(n log k), then sorted. */
AMK__FN void amk__top_k(int *h, const float *v, int n, int k) {
    int i, m = 0, end;
    for (i = 0; i < n; i++) {
        if (m < k) {
            int c = m++;
            h[c] = i;
            while (c > 0 && amk__l_before(v, h[(c - 1) / 2], h[c])) { /* sift up */
                int pa = (c - 1) / 2, tmp = h[pa];
                h[pa] = h[c]; h[c] = tmp; c = pa;
            }
        } else if (amk__l_before(v, i, h[0])) {
            h[0] = i;
            amk__heap_down(h, v, k, 0, 1);
        }
    }
    for (end = k - 1; end > 0; end--) { /* the last in order to the end, repeatedly */
        int tmp = h[0];
        h[0] = h[end]; h[end] = tmp;
        amk__heap_down(h, v, end, 0, 1);
    }
}

/* The fewest first tokens of h[0..k) whose mass in p reaches thr (all k when it never does);
   *mass gets their mass. */
AMK__FN int amk__mass_prefix(const int *h, const float *p, int k, double thr, double *mass) {
    double m = 0.0;
    int i;
    for (i = 0; i < k && m < thr; i++) m += p[h[i]];
    *mass = m;
    return i;
}

/* why no full sort: sorting SmolLM2's 49152 logits every token costs milliseconds a draw
   (bench/RESULTS.md run 73). Without top-k/top-p the draw walks the probabilities
   in vocabulary order, O(n); top-k takes the k best logits with a k-heap, O(n log k), and exp()
   of those only; top-p alone first tries the best 256 (a peaked distribution stops there), else
   pops a heap of the whole vocabulary until the kept mass reaches p, O(n + kept log n). Each
   token is drawn with its softmax probability (restricted to the kept ones and renormalised
   when truncated); the kept ones are walked in descending order. */
AMK_API int amk_sampler_sample(amk_sampler *s, const float *logits, int n) {
    int i, k, best, kept = 0;
    const float T = s ? s->temperature : 0.0f;
    const int top_p = s && s->top_p > 0.0f && s->top_p < 1.0f;
    float mx, *p;
    int *h;
    double total = 0.0, sum = 0.0, acc = 0.0, u;
    amk__rng r;
#define AMK__P(i) (logits[i] == logits[i] ? expf((logits[i] - mx) / T) : 0.0f)
    if (!s || !logits || n < 1) return -1;
    best = amk__argmax(logits, n);
    if (!(T > 0.0f)) return best;
    if (s->scratch_n < n) {
        amk_sampler_free(s);
        s->scratch_idx = (int *)amk__malloc((size_t)n * sizeof(int));
        s->scratch_p = (float *)amk__malloc((size_t)n * sizeof(float));
        if (!s->scratch_idx || !s->scratch_p) { amk_sampler_free(s); return best; }
        s->scratch_n = n;
    }
    h = s->scratch_idx;
    p = s->scratch_p;
    mx = logits[best];
    k = s->top_k > 0 && s->top_k < n ? s->top_k : n;
    memcpy(r.s, s->state, sizeof r.s);
    u = (double)(amk__rng_u64(&r) >> 11) / 9007199254740992.0; /* why: 53 random bits, in [0, 1) */
    memcpy(s->state, r.s, sizeof r.s);
    if (k < n) { /* the top k logits, then top-p within them */
        amk__top_k(h, logits, n, k);
        for (i = 0; i < k; i++) total += p[h[i]] = AMK__P(h[i]);
        kept = k;
        sum = total;
        if (top_p) kept = amk__mass_prefix(h, p, k, (double)s->top_p * total, &sum);
    } else {
        for (i = 0; i < n; i++) total += p[i] = AMK__P(i);
        if (!top_p) { /* the whole distribution */
            u *= total;
            for (i = 0; i < n; i++) {
                acc += p[i];
                if (u < acc) return i;
            }
            return best;
        }
        if (n > 256) { /* the best 256 first */
            amk__top_k(h, p, n, 256);
            kept = amk__mass_prefix(h, p, 256, (double)s->top_p * total, &sum);
            if (sum < (double)s->top_p * total) kept = 0;
        }
        if (!kept) { /* pop a max-heap into h[n-1], h[n-2], ... until the kept mass reaches p */
            int end;
            for (i = 0; i < n; i++) h[i] = i;
            for (i = n / 2 - 1; i >= 0; i--) amk__heap_down(h, p, n, i, 0);
            for (end = n, sum = 0.0; end > 0 && sum < (double)s->top_p * total; kept++) {
                int tmp = h[0];
                end--;
                h[0] = h[end]; h[end] = tmp;
                amk__heap_down(h, p, end, 0, 0);
                sum += p[tmp];
            }
            for (i = 0; i < kept / 2; i++) { /* reverse h[n-kept..n) in place, then to the front */
                int tmp = h[n - kept + i];
                h[n - kept + i] = h[n - 1 - i];
                h[n - 1 - i] = tmp;
            }
            memmove(h, h + (n - kept), (size_t)kept * sizeof(int));
        }
    }
#undef AMK__P
    u *= sum;
    for (i = 0; i < kept; i++) {
        acc += p[h[i]];
        if (u < acc) return h[i];
    }
    return kept > 0 ? h[kept - 1] : best;
}

/* ---- the LLM object --------------------------------------------------------------------------- */

/* What the LLM object asks of its backend (the reference VM or the CUDA runtime: the two sections
   below), chosen once when the model opens (amk__llm_backend_open). The backend keeps its state in
   m->state; every op takes the LLM object for the program, its buffer ids and its options. Nothing
   outside the two backend sections asks which backend runs; an optional op left NULL says what a
   backend lacks. */
typedef struct amk__llm_backend {
    const char *name;                      /* amk_llm_backend_name's "cpu" or "cuda" */
    amk_result (*open)(amk_llm *m, amk_diag *d); /* m->state for m->prog; left NULL on failure */
    void (*close)(amk_llm *m);             /* frees m->state (NULL too) */
    amk_cuda *(*cuda)(const amk_llm *m);   /* amk_llm_cuda: the CUDA runtime or NULL */
    amk_cuda *(*cuda_prefill)(const amk_llm *m); /* amk_llm_prefill_cuda's; NULL: the backend runs no prefill program */
    /* Writes buffer id whole: write_begin points *host at *nbytes bytes to fill (in: the buffer's
       size; out: the size the backend holds), write_end puts them into the buffer when keep and lets
       go of *host. write_begin fills no diag, the caller naming the buffer: AMK_ERR_INVALID_ARG when
       the backend has no storage for it, AMK_ERR_OUT_OF_MEMORY when no host memory. */
    amk_result (*write_begin)(amk_llm *m, int id, void **host, size_t *nbytes);
    amk_result (*write_end)(amk_llm *m, int id, void *host, size_t nbytes, int keep, amk_diag *d);
    /* n values of buffer id as F32: the host's random weights read back to derive W_cat; NULL in a
       backend with random_weight (it never holds host-made random weights) */
    amk_result (*read_f32)(amk_llm *m, int id, float *dst, int64_t n, amk_diag *d);
    amk_result (*zero)(amk_llm *m, int id, amk_diag *d); /* a KV cache buffer (amk_llm_reset) */
    /* A random weight made by the backend itself (rank 2: uniform in +-scale; else 1), no host copy;
       NULL: the host makes random weights, and derives the folded step's W_cat from them. */
    amk_result (*random_weight)(amk_llm *m, int id, float scale, amk_diag *d);
    /* One decode step (amk_llm_step, arguments checked and params set): m->logits gets the logits
       (at least when want_logits), *argmax (argmax may be NULL) the greedy token. */
    amk_result (*step)(amk_llm *m, int token, int pos, int want_logits, int *argmax, amk_diag *d);
    /* n >= 2 greedy steps at once (amk_llm_generate, arguments checked, a program without per-step
       params). NULL, or AMK_ERR_UNSUPPORTED before anything ran: amk_llm_generate steps them one by one. */
    amk_result (*generate)(amk_llm *m, int token, int pos, int n, int *tokens, amk_diag *d);
    /* One chunk of the prefill program of tier t (amk__llm_tier: 0 m->pre, j + 1 the smaller
       m->pre2[j]) (amk_llm_prefill, arguments checked): tokens and pos its rows' inputs, last the
       row whose logits (at least when want_logits) and greedy token it makes. */
    amk_result (*prefill)(amk_llm *m, int t, const int32_t *tokens, const int32_t *pos, int32_t last,
                          int want_logits, int *argmax, amk_diag *d);
    /* After open: the prefill program m->pre's state beside the step's (its shared buffers the
       step's), then the smaller ones' beside it (their shared buffers m->pre's); on failure it drops
       the program (m->pre drops them all) with a note (amk__llm_prefill_failed). Returns m->pre's
       failure, or OUT_OF_MEMORY where any of them does not fit (then all are dropped: amk_llm
       tries a set of fewer rows), else AMK_OK. */
    amk_result (*open_prefill)(amk_llm *m);
    int prefill_rows; /* the chunk rows of amk_llm_opts.prefill_rows 0 on this backend */
} amk__llm_backend;

/* A prefill program's chunk: its rows, the buffer ids of its inputs (token, pos, last) and outputs
   (logits, next_token), and io, [2 * rows] a chunk's tokens and positions on the host. */
typedef struct amk__llm_chunk {
    int32_t *io;
    int rows, token, pos, last, logits, next;
} amk__llm_chunk;

struct amk_llm {
    amk_llama_config cfg;
    amk_llm_opts opts;
    amk_program *prog;
    amk_weight_entry *weights; /* the step's weight plan (amk_llama_build_step): an entry a WEIGHT buffer */
    int n_weights;
    int *entry_of;            /* [n_buffers]: a buffer's entry in weights, or -1 */
    int kv_window;            /* the KV rows of each split (amk__llama_set_pos) */
    /* The prefill program (amk__llm_build_prefill; NULL: the prompt goes a token at a time) and its
       weight plan; pre_share[b]: the step's buffer that its buffer b is (weights of the same layout,
       the KV caches), or -1 for one of its own (loaded by its plan: ids past the step's buffers,
       amk__llm_buffer). Its inputs and outputs, and its rows. */
    amk_program *pre;
    amk_weight_entry *pre_weights;
    int pre_n_weights;
    int *pre_share;
    amk__llm_chunk pc;        /* its chunk's rows, inputs and outputs */
    /* The smaller prefill programs (n_pre2 of them; rows of m->pre's / AMK_LLM_PREFILL_SHORT_DIV,
       then / that again): pre2_share[j][b] m->pre's buffer that buffer b of pre2[j] is (every
       weight and KV cache), or -1 for one of its own (activations). */
    amk_program *pre2[AMK_LLM_PREFILL_SUBS];
    int *pre2_share[AMK_LLM_PREFILL_SUBS];
    amk__llm_chunk pc2[AMK_LLM_PREFILL_SUBS];
    int n_pre2;
    char note[320];           /* amk_llm_note */
    char backend_reason[560]; /* amk_llm_backend_reason (room for a diag's message) */
    amk_model *model;         /* NULL for random weights */
    amk_tokenizer *tok;       /* NULL for random weights */
    const amk__llm_backend *backend; /* NULL until amk__llm_backend_open */
    void *state;              /* the backend's */
    int *step_tasks, n_step_tasks; /* tasks whose params change per position (KV_APPEND, ATTENTION_TILE) */
    int buf_token, buf_pos, buf_logits, buf_next;
    int max_seq;
    int next_pos;             /* the KV cache holds rows [0, next_pos): a step may be at next_pos or before */
    float *logits;            /* [vocab] host copy handed to the caller */
};

/* Buffer id of m's one id space: the step's buffer id, or past the step's buffers the prefill
   program's buffer id - prog->n_buffers (its own weights, which the loader fills by its plan). */
AMK__FN const amk_buffer *amk__llm_buffer(const amk_llm *m, int id) {
    return id < m->prog->n_buffers ? &m->prog->buffers[id] : &m->pre->buffers[id - m->prog->n_buffers];
}

/* Frees the smaller prefill programs from pre2[from] on: prompts then go in chunks of the others
   and steps. */
AMK__FN void amk__llm_drop_short(amk_llm *m, int from) {
    int j;
    for (j = from; j < m->n_pre2; j++) {
        amk_program_free(m->pre2[j]);
        amk__free(m->pre2_share[j]);
        amk__free(m->pc2[j].io);
        m->pre2[j] = NULL;
        m->pre2_share[j] = NULL;
        memset(&m->pc2[j], 0, sizeof m->pc2[j]);
    }
    if (from < m->n_pre2) m->n_pre2 = from;
}

/* The prefill tiers: T (amk__llm_tiers) programs of falling rows, tier 0 m->pre, tier j + 1 m->pre2[j]. */
AMK__FN int amk__llm_tiers(const amk_llm *m) { return m->pre ? 1 + m->n_pre2 : 0; }
AMK__FN const amk__llm_chunk *amk__llm_tier(const amk_llm *m, int t) { return t == 0 ? &m->pc : &m->pc2[t - 1]; }

/* Frees the prefill programs: the prompt then runs a token at a time. */
AMK__FN void amk__llm_drop_prefill(amk_llm *m) {
    amk__llm_drop_short(m, 0);
    amk_program_free(m->pre);
    amk__free(m->pre_weights);
    amk__free(m->pre_share);
    amk__free(m->pc.io);
    m->pre = NULL;
    m->pre_weights = NULL;
    m->pre_share = NULL;
    m->pre_n_weights = 0;
    memset(&m->pc, 0, sizeof m->pc);
}

/* A backend could not load the prefill program (why): the note says so, and the programs are
   dropped (amk__llm_prepare may then try a smaller set; without one the prompt runs a token at a
   time). */
AMK__FN void amk__llm_prefill_failed(amk_llm *m, const char *why) {
    snprintf(m->note + strlen(m->note), sizeof m->note - strlen(m->note), "%sthe prefill program of %d rows does not "
             "load (%s)", m->note[0] ? "; " : "", m->pc.rows, why);
    amk__llm_drop_prefill(m);
}

/* A backend could not load the smaller prefill program pre2[j] (why): the note says so; it and the
   ones after it are dropped, prompts go in chunks of the others and steps. */
AMK__FN void amk__llm_short_failed(amk_llm *m, int j, const char *why) {
    snprintf(m->note + strlen(m->note), sizeof m->note - strlen(m->note), "%sno prefill program of %d rows (%s)",
             m->note[0] ? "; " : "", m->pc2[j].rows, why);
    amk__llm_drop_short(m, j);
}

/* ---- backend: reference VM -------------------------------------------------------------------- */
/* m->state: an amk__llm_refvm. Buffers live in host memory: weights are written in place. */

typedef struct amk__llm_refvm {
    amk_refvm *vm;  /* the step's */
    amk_refvm *pre; /* the prefill program's (m->pre), its shared buffers bound to vm's storage, or NULL */
    amk_refvm *pre2[AMK_LLM_PREFILL_SUBS]; /* the smaller ones' (m->pre2), their shared buffers bound to pre's storage */
} amk__llm_refvm;

AMK__FN amk_refvm *amk__llm_vm(const amk_llm *m) { return ((amk__llm_refvm *)m->state)->vm; }

/* The VM that holds buffer *id of m's one id space (amk__llm_buffer), *id made its own. */
AMK__FN amk_refvm *amk__llm_vm_holder(const amk_llm *m, int *id) {
    amk__llm_refvm *s = (amk__llm_refvm *)m->state;
    if (*id < m->prog->n_buffers) return s->vm;
    *id -= m->prog->n_buffers;
    return s->pre;
}

/* The machine's physical memory in bytes; 0 where it cannot be asked (then nothing is checked). */
AMK__FN uint64_t amk__llm_host_memory(void) {
#if !defined(_WIN32) && defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t bytes;
    if (pages > 0 && page > 0 && amk__mul_u64((uint64_t)pages, (uint64_t)page, &bytes)) return bytes;
#endif
    return 0;
}

/* Refuses a step whose buffers the reference VM cannot hold (it keeps every one, weights and KV
   cache, in host memory), before amk_refvm_create allocates them. why physical memory: past it an
   allocation may still succeed (overcommit) and the process swaps or is killed long after (issue
   38: --ctx 16777216 grew to 12.4 GB before it failed). INVALID_ARG when the KV cache alone is too
   large (a smaller context is the cure), else OUT_OF_MEMORY. */
AMK__FN amk_result amk__llm_refvm_fits(const amk_llm *m, amk_diag *d) {
    const uint64_t host = amk__llm_host_memory();
    const int n_all = m->prog->n_buffers + (m->pre ? m->pre->n_buffers : 0);
    uint64_t total = 0, kv = 0;
    int i, j;
    if (!host) return AMK_OK;
    for (i = 0; i < n_all; i++) { /* the step's buffers, then the prefill program's own */
        const amk_buffer *b = amk__llm_buffer(m, i);
        const int64_t nb = amk__buffer_nbytes(b);
        const uint64_t u = nb < 0 ? UINT64_MAX : (uint64_t)nb;
        if (i >= m->prog->n_buffers && m->pre_share[i - m->prog->n_buffers] >= 0) continue;
        if (!amk__add_u64(total, u, &total)) total = UINT64_MAX;
        if (b->kind == AMK_KIND_KV_CACHE && !amk__add_u64(kv, u, &kv)) kv = UINT64_MAX;
    }
    for (j = 0; j < m->n_pre2; j++) /* the smaller programs' own (their activations) */
        for (i = 0; i < m->pre2[j]->n_buffers; i++) {
            const int64_t nb = amk__buffer_nbytes(&m->pre2[j]->buffers[i]);
            if (m->pre2_share[j][i] < 0 && !amk__add_u64(total, nb < 0 ? UINT64_MAX : (uint64_t)nb, &total))
                total = UINT64_MAX;
        }
    if (total <= host) return AMK_OK;
    if (kv > host)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "the KV cache of a %d-token context needs %.1f GB, more than this "
                         "machine's %.1f GB of memory (the reference VM keeps it in host memory); use a smaller "
                         "context (--ctx)", m->max_seq, (double)kv / 1e9, (double)host / 1e9);
    return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "the reference VM needs %.1f GB of host memory for this step "
                     "(%.1f GB of it the KV cache of a %d-token context), more than this machine's %.1f GB",
                     (double)total / 1e9, (double)kv / 1e9, m->max_seq, (double)host / 1e9);
}

/* *out: a VM of p (validated when it was lowered) whose buffers b with share[b] >= 0 are buffer
   share[b] of from (named with in a failure): its storage, a KV cache read and written, the rest
   read-only. On failure *out is NULL. */
AMK__FN amk_result amk__llm_refvm_open_shared(const amk_program *p, const int *share, amk_refvm *from, const char *with,
                                              amk_refvm **out, amk_diag *d) {
    amk_result r = amk__refvm_create_validated(p, out, d);
    int b;
    for (b = 0; b < p->n_buffers && r == AMK_OK; b++) {
        size_t nb = 0;
        void *data;
        if (share[b] < 0) continue;
        data = amk_refvm_buffer(from, share[b], &nb);
        r = p->buffers[b].kind == AMK_KIND_KV_CACHE ? amk_refvm_bind_storage(*out, b, data, nb)
                                                    : amk_refvm_bind(*out, b, data, nb);
        if (r != AMK_OK) amk__fail(d, r, "cannot share '%s' with %s", p->buffers[b].name, with);
    }
    if (r != AMK_OK) {
        amk_refvm_free(*out);
        *out = NULL;
    }
    return r;
}

/* The prefill program's VM beside the step's, its shared buffers bound to the step's storage
   (weights read-only, the KV caches read and written). why a failure drops the prefill program
   instead of failing the open: the step alone runs every prompt, a token at a time; the note says
   why. why its shared buffers cost nothing: the VM's calloc'd blocks of them, freed by the bind,
   were never touched. */
AMK__FN amk_result amk__llm_refvm_open_prefill(amk_llm *m) {
    amk__llm_refvm *s = (amk__llm_refvm *)m->state;
    amk_diag dp;
    amk_result r;
    int j;
    /* why not with random weights: the host draws them in each program's layouts, so a prefill
       weight of a layout the step lacks would be another draw, and the two programs other models */
    if (!m->model) {
        amk__llm_drop_prefill(m);
        return AMK_OK;
    }
    amk_diag_clear(&dp);
    r = amk__llm_refvm_fits(m, &dp); /* the step's buffers and now the prefill program's own */
    if (r == AMK_OK) r = amk__llm_refvm_open_shared(m->pre, m->pre_share, s->vm, "the step", &s->pre, &dp);
    if (r != AMK_OK) {
        amk__llm_prefill_failed(m, dp.message);
        return r;
    }
    for (j = 0; j < m->n_pre2; j++)
        if (amk__llm_refvm_open_shared(m->pre2[j], m->pre2_share[j], s->pre, "the prefill program", &s->pre2[j], &dp) !=
            AMK_OK) {
            amk__llm_short_failed(m, j, dp.message);
            break;
        }
    return AMK_OK;
}

AMK__FN amk_result amk__llm_refvm_open(amk_llm *m, amk_diag *d) {
    amk__llm_refvm *s;
    amk_result r;
    if ((r = amk__llm_refvm_fits(m, d)) != AMK_OK) return r;
    s = (amk__llm_refvm *)amk__calloc(1, sizeof *s);
    if (!s) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    m->state = s;
    /* why not amk_refvm_create: the step was validated when it was lowered (amk_program_lower),
       and nothing changed it since */
    return amk__refvm_create_validated(m->prog, &s->vm, d);
}

AMK__FN void amk__llm_refvm_close(amk_llm *m) {
    amk__llm_refvm *s = (amk__llm_refvm *)m->state;
    int j;
    if (!s) return;
    /* why first: they use the prefill program's storage, which uses the step's */
    for (j = 0; j < AMK_LLM_PREFILL_SUBS; j++) amk_refvm_free(s->pre2[j]);
    amk_refvm_free(s->pre);
    amk_refvm_free(s->vm);
    amk__free(s);
    m->state = NULL;
}

AMK__FN amk_cuda *amk__llm_refvm_cuda(const amk_llm *m) {
    (void)m;
    return NULL;
}

AMK__FN amk_result amk__llm_refvm_write_begin(amk_llm *m, int id, void **host, size_t *nbytes) {
    amk_refvm *vm = amk__llm_vm_holder(m, &id);
    *host = amk_refvm_buffer(vm, id, nbytes);
    return *host ? AMK_OK : AMK_ERR_INVALID_ARG;
}

AMK__FN amk_result amk__llm_refvm_write_end(amk_llm *m, int id, void *host, size_t nbytes, int keep, amk_diag *d) {
    (void)m; (void)id; (void)host; (void)nbytes; (void)keep; (void)d; /* written in place */
    return AMK_OK;
}

AMK__FN amk_result amk__llm_refvm_read_f32(amk_llm *m, int id, float *dst, int64_t n, amk_diag *d) {
    size_t nb;
    const void *src = amk_refvm_buffer(amk__llm_vm(m), id, &nb);
    if (!src) return amk__fail(d, AMK_ERR_INVALID_ARG, "no storage for weight '%s'", m->prog->buffers[id].name);
    amk__refvm_load_row(src, m->prog->buffers[id].dtype, 0, n, dst);
    return AMK_OK;
}

AMK__FN amk_result amk__llm_refvm_zero(amk_llm *m, int id, amk_diag *d) {
    size_t nb;
    void *b = amk_refvm_buffer(amk__llm_vm(m), id, &nb);
    if (!b) return amk__fail(d, AMK_ERR_INVALID_ARG, "no storage for KV cache");
    memset(b, 0, nb);
    return AMK_OK;
}

AMK__FN amk_result amk__llm_refvm_step(amk_llm *m, int token, int pos, int want_logits, int *argmax, amk_diag *d) {
    amk_refvm *vm = amk__llm_vm(m);
    amk_result r;
    void *buf;
    size_t nb;
    int32_t v;
    (void)want_logits; /* the copy of host memory costs little: always made */
    v = token;
    buf = amk_refvm_buffer(vm, m->buf_token, &nb);
    memcpy(buf, &v, 4);
    v = pos;
    buf = amk_refvm_buffer(vm, m->buf_pos, &nb);
    memcpy(buf, &v, 4);
    r = amk_refvm_run(vm, NULL, d);
    if (r != AMK_OK) return r;
    buf = amk_refvm_buffer(vm, m->buf_logits, &nb);
    memcpy(m->logits, buf, (size_t)m->cfg.vocab * sizeof(float)); /* logits: F32 [1, vocab] (the builder) */
    if (argmax) {
        buf = amk_refvm_buffer(vm, m->buf_next, &nb);
        *argmax = (int)amk__load_i64(buf, AMK_DTYPE_I32, 0);
    }
    return AMK_OK;
}

/* A chunk of the prefill program: its inputs into the VM's buffers, a run, the logits and the
   greedy token out. */
AMK__FN amk_result amk__llm_refvm_prefill(amk_llm *m, int t, const int32_t *tokens, const int32_t *pos,
                                          int32_t last, int want_logits, int *argmax, amk_diag *d) {
    amk__llm_refvm *s = (amk__llm_refvm *)m->state;
    amk_refvm *vm = t ? s->pre2[t - 1] : s->pre;
    const amk__llm_chunk *ck = amk__llm_tier(m, t);
    size_t nb;
    amk_result r;
    (void)want_logits; /* the copy of host memory costs little: always made */
    memcpy(amk_refvm_buffer(vm, ck->token, &nb), tokens, (size_t)ck->rows * 4);
    memcpy(amk_refvm_buffer(vm, ck->pos, &nb), pos, (size_t)ck->rows * 4);
    memcpy(amk_refvm_buffer(vm, ck->last, &nb), &last, 4);
    r = amk_refvm_run(vm, NULL, d);
    if (r != AMK_OK) return r;
    memcpy(m->logits, amk_refvm_buffer(vm, ck->logits, &nb), (size_t)m->cfg.vocab * sizeof(float));
    if (argmax) *argmax = (int)amk__load_i64(amk_refvm_buffer(vm, ck->next, &nb), AMK_DTYPE_I32, 0);
    return AMK_OK;
}

static const amk__llm_backend amk__llm_refvm_backend = {
    "cpu", amk__llm_refvm_open, amk__llm_refvm_close, amk__llm_refvm_cuda, NULL /* cuda_prefill */,
    amk__llm_refvm_write_begin, amk__llm_refvm_write_end, amk__llm_refvm_read_f32, amk__llm_refvm_zero,
    NULL /* random_weight */,
    amk__llm_refvm_step, NULL /* generate */, amk__llm_refvm_prefill, amk__llm_refvm_open_prefill,
    AMK_LLM_PREFILL_ROWS_CPU
};

/* ---- backend: CUDA ---------------------------------------------------------------------------- */
/* m->state: an amk__llm_cuda. Weights go up through a host staging copy. */

typedef struct amk__llm_cuda {
    amk_cuda *cuda;
    amk_cuda *pre;            /* the prefill program's runtime (m->pre), sharing cuda's buffers, or NULL */
    amk_cuda *pre2[AMK_LLM_PREFILL_SUBS]; /* the smaller ones' (m->pre2), sharing pre's buffers */
    int32_t *chain_tok;       /* [chain_cap] a chained launch's tokens */
    int chain_cap;
} amk__llm_cuda;

AMK__FN amk_cuda *amk__llm_cuda_of(const amk_llm *m) { return ((amk__llm_cuda *)m->state)->cuda; }
AMK__FN amk_cuda *amk__llm_cuda_pre_of(const amk_llm *m) { return ((amk__llm_cuda *)m->state)->pre; }

/* The runtime that holds buffer *id of m's one id space (amk__llm_buffer), *id made its own. */
AMK__FN amk_cuda *amk__llm_cuda_holder(const amk_llm *m, int *id) {
    amk__llm_cuda *s = (amk__llm_cuda *)m->state;
    if (*id < m->prog->n_buffers) return s->cuda;
    *id -= m->prog->n_buffers;
    return s->pre;
}

/* The prefill program's runtime beside the step's, sharing its buffers (m->pre_share). why a
   failure drops the prefill program instead of failing the open: the decode step alone runs
   every prompt, a token at a time; the note says why. */
AMK__FN amk_result amk__llm_cuda_open_prefill(amk_llm *m) {
    amk__llm_cuda *s = (amk__llm_cuda *)m->state;
    amk_diag dp;
    amk_result r;
    int j;
    amk_diag_clear(&dp);
    r = amk__cuda_create_from(m->pre, m->opts.device_image, m->opts.device_image_size, s->cuda, m->pre_share,
                              &s->pre, &dp);
    if (r != AMK_OK) {
        amk__llm_prefill_failed(m, dp.message);
        return r;
    }
    /* why pre as the base: every buffer a smaller program shares is one of pre's (which may itself
       be the step's: its address is pre's) */
    for (j = 0; j < m->n_pre2; j++) {
        r = amk__cuda_create_from(m->pre2[j], m->opts.device_image, m->opts.device_image_size, s->pre, m->pre2_share[j],
                                  &s->pre2[j], &dp);
        if (r == AMK_ERR_OUT_OF_MEMORY) { /* why all: the short programs matter most; amk_llm tries a smaller set */
            for (j = 0; j < AMK_LLM_PREFILL_SUBS; j++) {
                amk_cuda_free(s->pre2[j]);
                s->pre2[j] = NULL;
            }
            amk_cuda_free(s->pre);
            s->pre = NULL;
            amk__llm_prefill_failed(m, dp.message);
            return r;
        }
        if (r != AMK_OK) {
            amk__llm_short_failed(m, j, dp.message);
            break;
        }
    }
    return AMK_OK;
}

AMK__FN amk_result amk__llm_cuda_open(amk_llm *m, amk_diag *d) {
    amk_cuda *c = NULL;
    amk__llm_cuda *s;
    /* why unchecked: validated when it was lowered (amk_program_lower), unchanged since; the
       runtime's memory-safety checks of every task still run */
    const amk_result r = amk__cuda_create_unchecked(m->prog, m->opts.device_image, m->opts.device_image_size, &c, d);
    if (r != AMK_OK) return r;
    s = (amk__llm_cuda *)amk__calloc(1, sizeof *s);
    if (!s) {
        amk_cuda_free(c);
        return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    }
    s->cuda = c;
    m->state = s;
    return AMK_OK;
}

AMK__FN void amk__llm_cuda_close(amk_llm *m) {
    amk__llm_cuda *s = (amk__llm_cuda *)m->state;
    int j;
    if (!s) return;
    /* why first: they use pre's buffers, which use the step's */
    for (j = 0; j < AMK_LLM_PREFILL_SUBS; j++) amk_cuda_free(s->pre2[j]);
    amk_cuda_free(s->pre);
    amk_cuda_free(s->cuda);
    amk__free(s->chain_tok);
    amk__free(s);
    m->state = NULL;
}

AMK__FN amk_result amk__llm_cuda_write_begin(amk_llm *m, int id, void **host, size_t *nbytes) {
    (void)m; (void)id;
    *host = amk__malloc(*nbytes);
    return *host ? AMK_OK : AMK_ERR_OUT_OF_MEMORY;
}

AMK__FN amk_result amk__llm_cuda_write_end(amk_llm *m, int id, void *host, size_t nbytes, int keep, amk_diag *d) {
    amk_cuda *c = amk__llm_cuda_holder(m, &id);
    const amk_result r = keep ? amk_cuda_upload(c, id, host, nbytes, d) : AMK_OK;
    amk__free(host);
    return r;
}

AMK__FN amk_result amk__llm_cuda_zero(amk_llm *m, int id, amk_diag *d) {
    return amk_cuda_fill_value(amk__llm_cuda_of(m), id, 0.0f, d);
}

/* why made on the device: no host copy of 16 GB for an 8B model's random weights. A prefill
   program's own weight (a layout the step lacks) gets values of its own: random weights are for
   timing, and their numbers mean nothing. */
AMK__FN amk_result amk__llm_cuda_random_weight(amk_llm *m, int id, float scale, amk_diag *d) {
    const uint64_t seed = m->opts.random_seed * 1000003u + (uint64_t)id;
    const int rank = amk__llm_buffer(m, id)->rank;
    amk_cuda *c = amk__llm_cuda_holder(m, &id);
    return rank == 2 ? amk_cuda_fill_random(c, id, seed, scale, d) : amk_cuda_fill_value(c, id, 1.0f, d);
}

AMK__FN amk_result amk__llm_cuda_step(amk_llm *m, int token, int pos, int want_logits, int *argmax, amk_diag *d) {
    amk_cuda *c = amk__llm_cuda_of(m);
    int32_t next = -1, tp[2];
    amk_cuda_in in[2];
    amk_cuda_out out[2];
    amk_result r;
    tp[0] = token;
    tp[1] = pos;
    in[0].buffer_id = m->buf_token; in[0].host = &tp[0]; in[0].nbytes = 4;
    in[1].buffer_id = m->buf_pos; in[1].host = &tp[1]; in[1].nbytes = 4;
    out[0].buffer_id = m->buf_next; out[0].host = &next; out[0].nbytes = 4;
    /* why the logits only when asked: a greedy loop needs the token alone, and their copy
       (vocab floats, 0.2-0.5 MB) is a sizeable part of a small model's step */
    out[1].buffer_id = m->buf_logits; out[1].host = m->logits; out[1].nbytes = (size_t)m->cfg.vocab * 4;
    r = amk_cuda_update_task_params(c, m->prog, m->step_tasks, m->n_step_tasks, d);
    /* why one call: each separate copy waited for the device (~60 us a token on SmolLM2) */
    if (r == AMK_OK) r = amk_cuda_run_io(c, in, 2, out, want_logits ? 2 : 1, m->opts.timeout_ms, d);
    if (r != AMK_OK) return r;
    if (argmax) *argmax = next;
    return AMK_OK;
}

/* The n steps in one launch (amk_cuda_run_chain: no host round trip between them). */
AMK__FN amk_result amk__llm_cuda_generate(amk_llm *m, int token, int pos, int n, int *tokens, amk_diag *d) {
    amk__llm_cuda *s = (amk__llm_cuda *)m->state;
    amk_cuda_chain ch;
    amk_result r;
    int i;
    ch.token_buf = m->buf_token;
    ch.pos_buf = m->buf_pos;
    ch.next_buf = m->buf_next;
    ch.n_steps = n;
    if (n > s->chain_cap) {
        int32_t *t = (int32_t *)amk__malloc((size_t)n * sizeof(int32_t));
        if (!t) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
        amk__free(s->chain_tok);
        s->chain_tok = t;
        s->chain_cap = n;
    }
    r = amk_cuda_set_chain(s->cuda, &ch, d); /* UNSUPPORTED: an image without the chained kernel */
    if (r != AMK_OK) return r;
    /* run_chain never answers UNSUPPORTED (its errors: the arguments', the copies', the launch's), so
       amk_llm_generate never steps a chain again that ran */
    r = amk_cuda_run_chain(s->cuda, token, pos, s->chain_tok, m->opts.timeout_ms > 0 ? m->opts.timeout_ms * n : 0.0, d);
    for (i = 0; i < n && r == AMK_OK; i++) tokens[i] = (int)s->chain_tok[i];
    amk_cuda_set_chain(s->cuda, NULL, NULL); /* why: a later amk_cuda_time_runs times single steps again */
    return r;
}

/* A chunk of the prefill program: its inputs up and its next token (and logits) down in one
   wait (amk_cuda_run_io). */
AMK__FN amk_result amk__llm_cuda_prefill(amk_llm *m, int t, const int32_t *tokens, const int32_t *pos,
                                         int32_t last, int want_logits, int *argmax, amk_diag *d) {
    amk__llm_cuda *s = (amk__llm_cuda *)m->state;
    const amk__llm_chunk *ck = amk__llm_tier(m, t);
    int32_t next = -1;
    amk_cuda_in in[3];
    amk_cuda_out out[2];
    amk_result r;
    in[0].buffer_id = ck->token; in[0].host = tokens; in[0].nbytes = (size_t)ck->rows * 4;
    in[1].buffer_id = ck->pos; in[1].host = pos; in[1].nbytes = (size_t)ck->rows * 4;
    in[2].buffer_id = ck->last; in[2].host = &last; in[2].nbytes = 4;
    out[0].buffer_id = ck->next; out[0].host = &next; out[0].nbytes = 4;
    out[1].buffer_id = ck->logits; out[1].host = m->logits; out[1].nbytes = (size_t)m->cfg.vocab * 4;
    r = amk_cuda_run_io(t ? s->pre2[t - 1] : s->pre, in, 3, out, want_logits ? 2 : 1, m->opts.timeout_ms, d);
    if (r == AMK_OK && argmax) *argmax = next;
    return r;
}

static const amk__llm_backend amk__llm_cuda_backend = {
    "cuda", amk__llm_cuda_open, amk__llm_cuda_close, amk__llm_cuda_of, amk__llm_cuda_pre_of,
    amk__llm_cuda_write_begin, amk__llm_cuda_write_end, NULL /* read_f32 */, amk__llm_cuda_zero,
    amk__llm_cuda_random_weight,
    amk__llm_cuda_step, amk__llm_cuda_generate, amk__llm_cuda_prefill, amk__llm_cuda_open_prefill,
    AMK_LLM_PREFILL_ROWS
};

/* ---- choosing the backend --------------------------------------------------------------------- */

/* Opens m's backend for m->prog as m->opts.backend asks: CPU the reference VM; CUDA the runtime
   (fails without a device image or a driver); AUTO the runtime where there is a device image and a
   driver, else the reference VM. */
AMK__FN amk_result amk__llm_backend_open(amk_llm *m, amk_diag *d) {
    if (m->opts.backend == AMK_BACKEND_CPU) {
        snprintf(m->backend_reason, sizeof m->backend_reason, "%s", "the reference VM asked for");
    } else if (!m->opts.device_image) {
        if (m->opts.backend == AMK_BACKEND_CUDA)
            return amk__fail(d, AMK_ERR_INVALID_ARG, "no device image (build the program with `make app`, or set amk_llm_opts.device_image)");
        snprintf(m->backend_reason, sizeof m->backend_reason, "%s", "no device image in this program");
    } else {
        amk_diag dc; /* why its own: the reason keeps the message even when the caller passes no diag */
        amk_result r;
        amk_diag_clear(&dc);
        r = amk__llm_cuda_backend.open(m, &dc);
        if (r != AMK_OK && d) *d = dc;
        if (r == AMK_OK) {
            amk_cuda_info info;
            amk_cuda_get_info(amk__llm_cuda_of(m), &info);
            snprintf(m->backend_reason, sizeof m->backend_reason, "%s, the %s image", info.device_name,
                     AMK_IMAGE_KIND_NAME(info.image_kind));
            m->backend = &amk__llm_cuda_backend;
            return AMK_OK;
        }
        if (r != AMK_ERR_NO_DRIVER || m->opts.backend != AMK_BACKEND_AUTO) return r;
        snprintf(m->backend_reason, sizeof m->backend_reason, "no usable GPU: %s", dc.message);
        amk_diag_clear(d);
    }
    m->backend = &amk__llm_refvm_backend;
    return m->backend->open(m, d);
}

AMK_API void amk_llm_opts_default(amk_llm_opts *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    amk_llama_build_opts_default(&o->build);
    o->build.weight_dtype = AMK_DTYPE_AUTO;
    o->build.act_dtype = AMK_DTYPE_AUTO;
    o->backend = AMK_BACKEND_AUTO;
    o->random_seed = 1;
    o->weights_as_stored = 1;
}

/* weight_dtype_of of a model file read as stored: the tensor's stored dtype (user: the amk_model);
   -1 for one the model lacks. */
AMK__FN int amk__llm_stored_dtype(void *user, const char *tensor, int64_t rows, int64_t cols) {
    int t = -1;
    (void)rows; (void)cols;
    return amk_model_tensor_dtype((amk_model *)user, tensor, &t, NULL) == AMK_OK ? t : -1;
}

AMK_API void amk_llama_build_opts_stored(amk_llama_build_opts *o, amk_model *model) {
    if (!o) return;
    o->weight_dtype_of = model ? amk__llm_stored_dtype : NULL;
    o->weight_dtype_user = model;
}

AMK_API const amk_llama_config *amk_llm_config(const amk_llm *m) { return m ? &m->cfg : NULL; }
AMK_API const amk_program *amk_llm_program(const amk_llm *m) { return m ? m->prog : NULL; }
AMK_API const amk_tokenizer *amk_llm_tokenizer(const amk_llm *m) { return m ? m->tok : NULL; }
AMK_API int amk_llm_max_seq(const amk_llm *m) { return m ? m->max_seq : 0; }
AMK_API amk_cuda *amk_llm_cuda(amk_llm *m) { return m ? m->backend->cuda(m) : NULL; }
AMK_API const char *amk_llm_backend_name(const amk_llm *m) { return m ? m->backend->name : "cpu"; }
AMK_API const char *amk_llm_note(const amk_llm *m) { return m ? m->note : ""; }
AMK_API const char *amk_llm_backend_reason(const amk_llm *m) { return m ? m->backend_reason : ""; }
AMK_API int amk_llm_prefill_rows(const amk_llm *m) { return m && m->pre ? m->pc.rows : 0; }
AMK_API int amk_llm_prefill_rows_short(const amk_llm *m) { return amk_llm_prefill_rows_at(m, 1); }
AMK_API int amk_llm_prefill_rows_at(const amk_llm *m, int tier) {
    return m && tier >= 0 && tier < amk__llm_tiers(m) ? amk__llm_tier(m, tier)->rows : 0;
}
AMK_API const amk_program *amk_llm_prefill_program(const amk_llm *m) { return m ? m->pre : NULL; }
AMK_API amk_cuda *amk_llm_prefill_cuda(amk_llm *m) {
    return m && m->pre && m->backend->cuda_prefill ? m->backend->cuda_prefill(m) : NULL;
}

AMK_API uint64_t amk_llm_device_bytes(const amk_llm *m) {
    const amk__llm_cuda *s;
    amk_cuda_info info;
    uint64_t sum = 0;
    int j;
    if (!m || m->backend != &amk__llm_cuda_backend || !m->state) return 0;
    s = (const amk__llm_cuda *)m->state;
    for (j = -2; j < AMK_LLM_PREFILL_SUBS; j++) { /* the step, the longest prefill program, the smaller ones */
        amk_cuda *c = j == -2 ? s->cuda : j == -1 ? s->pre : s->pre2[j];
        if (!c) continue;
        amk_cuda_get_info(c, &info);
        if (info.arena_bytes > 0) sum += (uint64_t)info.arena_bytes;
    }
    return sum;
}

AMK_API void amk_llm_close(amk_llm *m) {
    if (!m) return;
    if (m->backend) m->backend->close(m);
    amk__llm_drop_prefill(m);
    amk__free(m->step_tasks);
    amk__free(m->weights);
    amk__free(m->entry_of);
    amk_program_free(m->prog);
    amk_tokenizer_free(m->tok);
    amk_model_close(m->model);
    amk__free(m->logits);
    amk__free(m);
}

/* Buffer x (plan entry e) is buffer y (plan entry f) of another program of the same builder: the
   same kind, dtype and size, and for a weight the same layout (a weight one transposes or folds is
   not the other's). */
AMK__FN int amk__llm_same_layout(const amk_buffer *x, const amk_weight_entry *e, const amk_buffer *y,
                                 const amk_weight_entry *f) {
    if (x->kind != y->kind || x->dtype != y->dtype || amk__buffer_nbytes(x) != amk__buffer_nbytes(y)) return 0;
    if (x->kind != AMK_KIND_WEIGHT) return 1;
    return e && f && e->transform == f->transform && e->heads == f->heads && x->source && y->source &&
           strcmp(x->source, y->source) == 0;
}

/* The plan entry of buffer b among the n entries w, or NULL. */
AMK__FN const amk_weight_entry *amk__llm_plan_entry(const amk_weight_entry *w, int n, int b) {
    int k;
    for (k = 0; k < n; k++)
        if (w[k].buffer == b) return &w[k];
    return NULL;
}

/* ck: the rows, inputs and outputs of a chunk of prefill program p (ck->io NULL when out of
   memory); 0, or -1 when p lacks one. */
AMK__FN int amk__llm_chunk_io(const amk_program *p, int rows, amk__llm_chunk *ck) {
    ck->rows = rows;
    ck->io = (int32_t *)amk__malloc((size_t)rows * 2 * sizeof(int32_t));
    ck->token = amk_program_find_buffer(p, "token");
    ck->pos = amk_program_find_buffer(p, "pos");
    ck->last = amk_program_find_buffer(p, "last");
    ck->logits = amk_program_find_buffer(p, "logits");
    ck->next = amk_program_find_buffer(p, "next_token");
    return ck->token < 0 || ck->pos < 0 || ck->last < 0 || ck->logits < 0 || ck->next < 0 ? -1 : 0;
}

/* The smaller prefill programs beside m->pre (amk_llm_opts.prefill_rows), up to subs (at most
   AMK_LLM_PREFILL_SUBS): rows of m->pre's rows / AMK_LLM_PREFILL_SHORT_DIV, then / that again, none of
   fewer than AMK_LLM_PREFILL_SHORT_MIN; every weight and KV cache m->pre's (pre2_share), their
   activations their own. A program that would need a buffer of its own beyond those is left out
   (and those after it), with a note. */
AMK__FN amk_result amk__llm_build_short(amk_llm *m, const amk_llama_build_opts *base, int subs, amk_diag *d) {
    amk_llama_build_opts bo = *base;
    int j, rows = m->pc.rows;
    for (j = 0; j < subs && j < AMK_LLM_PREFILL_SUBS; j++) {
        amk_llama_step st;
        amk_diag dp;
        int b;
        rows /= AMK_LLM_PREFILL_SHORT_DIV;
        if (rows < AMK_LLM_PREFILL_SHORT_MIN) return AMK_OK;
        bo.prefill_rows = rows;
        amk_diag_clear(&dp);
        if (amk__llama_build_step(&m->cfg, &bo, 1, 1, &st, NULL, &dp) != AMK_OK) { /* m->pre's config: not expected */
            snprintf(m->note + strlen(m->note), sizeof m->note - strlen(m->note), "%sno prefill program of %d rows (%s)",
                     m->note[0] ? "; " : "", rows, dp.message);
            return AMK_OK;
        }
        m->pre2[j] = st.program;
        m->pc2[j].rows = rows;
        m->n_pre2 = j + 1;
        m->pre2_share[j] = (int *)amk__malloc((size_t)(st.program->n_buffers > 0 ? st.program->n_buffers : 1) * sizeof(int));
        if (!m->pre2_share[j]) {
            amk__free(st.weights);
            return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
        }
        for (b = 0; b < st.program->n_buffers; b++) {
            const amk_buffer *x = &st.program->buffers[b];
            const int b2 = amk_program_find_buffer(m->pre, x->name);
            m->pre2_share[j][b] = -1;
            if (x->kind != AMK_KIND_WEIGHT && x->kind != AMK_KIND_KV_CACHE) continue;
            if (b2 < 0 || !amk__llm_same_layout(x, amk__llm_plan_entry(st.weights, st.n_weights, b), &m->pre->buffers[b2],
                                                amk__llm_plan_entry(m->pre_weights, m->pre_n_weights, b2)))
                break;
            m->pre2_share[j][b] = b2;
        }
        amk__free(st.weights);
        if (b < st.program->n_buffers) { /* why never met: the programs come from one builder, one config */
            snprintf(m->note + strlen(m->note), sizeof m->note - strlen(m->note), "%sno prefill program of %d rows "
                     "(its '%s' is not the longest program's)", m->note[0] ? "; " : "", rows, st.program->buffers[b].name);
            amk__llm_drop_short(m, j);
            return AMK_OK;
        }
        if (amk__llm_chunk_io(m->pre2[j], rows, &m->pc2[j]) < 0)
            return amk__fail(d, AMK_ERR_MISMATCH, "the prefill program of %d rows lacks an input or output", rows);
        if (!m->pc2[j].io) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    }
    return AMK_OK;
}

/* The prefill program of m's model beside its step (m->pre): a chunk of rows tokens, at most the
   step's context, and up to subs smaller ones (amk__llm_build_short); its weights and KV caches
   the step's where they are the same buffers (pre_share), the rest its own. A config the prefill
   program does not take (AMK_ERR_UNSUPPORTED: Qwen2's biases, Qwen3's norms, the spec's opcodes)
   leaves it out, with a note: the prompt then runs a token at a time. */
AMK__FN amk_result amk__llm_build_prefill(amk_llm *m, int rows, int subs, amk_diag *d) {
    amk_llama_build_opts bo = m->opts.build;
    amk_llama_step st;
    amk_diag dp;
    amk_result r;
    int b;
    if (rows > m->max_seq) rows = m->max_seq;
    bo.prefill_rows = rows;
    bo.max_seq = m->max_seq;
    amk_diag_clear(&dp);
    r = amk__llama_build_step(&m->cfg, &bo, 1, 1, &st, NULL, &dp);
    if (r == AMK_ERR_UNSUPPORTED) {
        snprintf(m->note + strlen(m->note), sizeof m->note - strlen(m->note),
                 "%sthe prompt runs a token at a time (%s)", m->note[0] ? "; " : "", dp.message);
        return AMK_OK;
    }
    if (r != AMK_OK) {
        if (d) *d = dp;
        return r;
    }
    m->pre = st.program;
    m->pre_weights = st.weights;
    m->pre_n_weights = st.n_weights;
    m->pc.rows = rows;
    m->pre_share = (int *)amk__malloc((size_t)(m->pre->n_buffers > 0 ? m->pre->n_buffers : 1) * sizeof(int));
    if (!m->pre_share) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    for (b = 0; b < m->pre->n_buffers; b++) {
        const amk_buffer *x = &m->pre->buffers[b];
        const amk_weight_entry *e = amk__llm_plan_entry(m->pre_weights, m->pre_n_weights, b);
        const int b2 = amk_program_find_buffer(m->prog, x->name);
        m->pre_share[b] = -1;
        if (x->kind != AMK_KIND_WEIGHT && x->kind != AMK_KIND_KV_CACHE) continue;
        if (b2 >= 0 && amk__llm_same_layout(x, e, &m->prog->buffers[b2], m->entry_of[b2] >= 0 ? &m->weights[m->entry_of[b2]] : NULL))
            m->pre_share[b] = b2;
        else if (x->kind == AMK_KIND_KV_CACHE) /* why never met: both programs come from one builder */
            return amk__fail(d, AMK_ERR_MISMATCH, "the prefill program's '%s' is not the step's", x->name);
        else if (!e)
            return amk__fail(d, AMK_ERR_MISMATCH, "the prefill program's weight plan has no entry for '%s'", x->name);
    }
    if (amk__llm_chunk_io(m->pre, rows, &m->pc) < 0)
        return amk__fail(d, AMK_ERR_MISMATCH, "the prefill program lacks an input or output");
    if (!m->pc.io) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    return amk__llm_build_short(m, &bo, subs, d);
}

/* AMK_DTYPE_AUTO dtypes of o->build as amk_llm_opts says, for the GPU (gpu 1) or the reference VM. */
AMK__FN void amk__llm_resolve_dtypes(amk_llm_opts *o, int gpu) {
    if (o->build.weight_dtype == AMK_DTYPE_AUTO) {
        o->build.weight_dtype = gpu ? AMK_DTYPE_BF16 : AMK_DTYPE_F32;
        if (o->build.act_dtype == AMK_DTYPE_AUTO) o->build.act_dtype = o->build.weight_dtype;
    }
    if (o->build.act_dtype == AMK_DTYPE_AUTO) o->build.act_dtype = gpu ? o->build.weight_dtype : AMK_DTYPE_F32;
}

/* Builds and lowers the step of m->cfg and opens its backend. */
AMK__FN amk_result amk__llm_prepare(amk_llm *m, amk_diag *d) {
    amk_result r;
    int i;
    /* why refused: positions past max_pos are outside what the model was trained for (and a
       context larger than the model's is only memory spent) */
    if (m->opts.build.max_seq > 0 && m->cfg.max_pos > 0 && m->opts.build.max_seq > m->cfg.max_pos)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "a context of %d tokens is longer than the model's context of %d "
                         "(max_position_embeddings or context_length)", m->opts.build.max_seq, m->cfg.max_pos);
    if (m->opts.build.prefill_rows != 0) /* why: build is the decode step's; the prompt's program has its own option */
        return amk__fail(d, AMK_ERR_INVALID_ARG, "build.prefill_rows = %d: amk_llm builds the decode step from build "
                         "(its prefill program's rows are amk_llm_opts.prefill_rows)", m->opts.build.prefill_rows);
    if (m->opts.prefill_rows < -1)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "prefill_rows = %d (-1: none, 0: AMK's choice, or the rows of a "
                         "chunk)", m->opts.prefill_rows);
    if (m->model && m->opts.weights_as_stored && !m->opts.build.weight_dtype_of)
        amk_llama_build_opts_stored(&m->opts.build, m->model);
    {
        amk_llama_step st;
        int dropped = 0;
        /* why for AUTO too: the GPU runs folded tasks in its lean forms only, which the portable
           image (a GPU other than sm_90) lacks */
        int major = 0, minor = 0, sms = 0, portable = 0, dev = 0;
        if (m->opts.backend != AMK_BACKEND_CPU) { /* the device, once: its image's forms and its SMs */
            dev = amk_cuda_device_query(&major, &minor, &sms, NULL) == AMK_OK;
            portable = amk__cuda_portable(dev ? major : -1, minor) == 1;
        }
        amk__llm_resolve_dtypes(&m->opts, m->opts.backend == AMK_BACKEND_CUDA ||
                                              (m->opts.backend == AMK_BACKEND_AUTO && dev && m->opts.device_image));
        /* why: the step runs one block an SM, all co-resident, so a GPU with fewer SMs than the
           step's (an A100's 108, an RTX 4090's 128 against the default 132) gets a step of its own */
        if (dev && sms > 0 && sms < m->opts.build.num_sms) {
            snprintf(m->note, sizeof m->note, "the step on the device's %d SMs, not %d", sms, m->opts.build.num_sms);
            m->opts.build.num_sms = sms;
        }
        r = amk__llama_build_step(&m->cfg, &m->opts.build, 1,
                                  m->opts.backend == AMK_BACKEND_CPU ? -1 : portable ? AMK_IMAGE_FORMS(AMK_IMAGE_PORTABLE)
                                                                                     : AMK_PLAN_FORMS_LEAN,
                                  &st, &dropped, d);
        if (r != AMK_OK) return r;
        if (dropped) {
            const size_t at = strlen(m->note);
            snprintf(m->note + at, sizeof m->note - at, "%sqkv_fold 1: the GPU's %s do not take this folded step "
                     "(context %d, %s weights); built unfolded", at ? "; " : "", portable ? "portable image's forms" : "lean forms",
                     m->opts.build.max_seq, amk_dtype_name(m->opts.build.weight_dtype));
        }
        m->prog = st.program;
        m->weights = st.weights;
        m->n_weights = st.n_weights;
        m->kv_window = st.kv_window;
    }
    m->entry_of = (int *)amk__malloc((size_t)(m->prog->n_buffers > 0 ? m->prog->n_buffers : 1) * sizeof(int));
    if (!m->entry_of) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    for (i = 0; i < m->prog->n_buffers; i++) m->entry_of[i] = -1;
    for (i = 0; i < m->n_weights; i++) m->entry_of[m->weights[i].buffer] = i;
    for (i = 0; i < m->prog->n_buffers; i++) /* why: the loader fills the weights by the plan alone */
        if (m->prog->buffers[i].kind == AMK_KIND_WEIGHT && m->entry_of[i] < 0)
            return amk__fail(d, AMK_ERR_MISMATCH, "the step's weight plan has no entry for '%s'", m->prog->buffers[i].name);
    m->buf_token = amk_program_find_buffer(m->prog, "token");
    m->buf_pos = amk_program_find_buffer(m->prog, "pos");
    m->buf_logits = amk_program_find_buffer(m->prog, "logits");
    m->buf_next = amk_program_find_buffer(m->prog, "next_token");
    m->max_seq = (int)m->prog->buffers[amk_program_find_buffer(m->prog, "k_cache.0")].shape[0];
    m->logits = (float *)amk__calloc((size_t)m->cfg.vocab, sizeof(float));
    m->step_tasks = (int *)amk__malloc((size_t)(m->prog->n_tasks > 0 ? m->prog->n_tasks : 1) * sizeof(int));
    if (!m->logits || !m->step_tasks) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    for (i = 0; i < m->prog->n_tasks; i++) /* the tasks amk_llama_set_pos changes */
        if (m->prog->tasks[i].op == AMK_OP_KV_APPEND || m->prog->tasks[i].op == AMK_OP_ATTENTION_TILE)
            m->step_tasks[m->n_step_tasks++] = i;
    if ((r = amk__llm_backend_open(m, d)) != AMK_OK) return r;
    /* the prefill programs for the backend that runs (their chunk rows are the backend's); where
       the device has no memory for them, the set a quarter of the rows (why: a GPU of 8 GB holds
       an 8B Q4_K_M step with a 4096-token cache, but not always its 2048-row prompt program) */
    if (m->opts.prefill_rows >= 0) {
        int rows = m->opts.prefill_rows > 0 ? m->opts.prefill_rows : m->backend->prefill_rows;
        int subs = AMK_LLM_PREFILL_SUBS;
        amk_result ro = AMK_OK; /* the last open's: a set that did not load */
        for (;;) { /* why one program fewer each time: each holds a quantized layer's copies (8B: 0.44 GB) */
            if ((r = amk__llm_build_prefill(m, rows, subs, d)) != AMK_OK) return r;
            if (!m->pre || (ro = m->backend->open_prefill(m)) != AMK_ERR_OUT_OF_MEMORY) break;
            rows = (rows < m->max_seq ? rows : m->max_seq) / AMK_LLM_PREFILL_SHORT_DIV;
            if (subs > 0) subs--;
            if (rows < AMK_LLM_PREFILL_SHORT_MIN) break;
        }
        if (!m->pre && ro != AMK_OK)
            snprintf(m->note + strlen(m->note), sizeof m->note - strlen(m->note), "; the prompt runs a token at a time");
    }
    return AMK_OK;
}

/* Buffer id's weight plan entry (amk_llama_build_step), or NULL for a buffer that has none. */
AMK__FN const amk_weight_entry *amk__llm_entry(const amk_llm *m, int id) {
    return id >= 0 && id < m->prog->n_buffers && m->entry_of[id] >= 0 ? &m->weights[m->entry_of[id]] : NULL;
}

/* A weight's host copy data (nb bytes, the file's layout) into the layout the step wants, by its
   plan entry e (amk_weight_transform). In place. */
AMK__FN amk_result amk__llm_weight_layout(const amk_buffer *b, const amk_weight_entry *e, void *data, size_t nb,
                                          amk_diag *d) {
    const size_t row_bytes = b->shape[0] > 0 ? nb / (size_t)b->shape[0] : 0;
    int64_t rows = b->shape[0], hd, h, i;
    const int heads = e->heads;
    unsigned char *tmp;
    if (e->transform == AMK_WEIGHT_TRANSPOSED) { /* the file's [shape[1], shape[0]] into [shape[0], shape[1]] */
        const int64_t R = b->shape[1], C = b->shape[0];
        const size_t es = (size_t)amk_dtype_bits(b->dtype) / 8;
        int64_t r, c;
        if (b->rank != 2 || es == 0 || (size_t)(R * C) * es != nb)
            return amk__fail(d, AMK_ERR_UNSUPPORTED, "'%s': cannot transpose a %s weight", b->source,
                             amk_dtype_name(b->dtype));
        tmp = (unsigned char *)amk__malloc(nb);
        if (!tmp) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
        memcpy(tmp, data, nb);
        for (r = 0; r < R; r++)
            for (c = 0; c < C; c++)
                memcpy((unsigned char *)data + ((size_t)c * (size_t)R + (size_t)r) * es,
                       tmp + ((size_t)r * (size_t)C + (size_t)c) * es, es);
        amk__free(tmp);
        return AMK_OK;
    }
    if (e->transform != AMK_WEIGHT_QK_INTERLEAVED) return AMK_OK;
    if (heads < 1 || rows % heads || (rows / heads) % 2)
        return amk__fail(d, AMK_ERR_MISMATCH, "'%s': %lld rows do not split into %d heads of an even size",
                         b->source, (long long)rows, heads);
    hd = rows / heads;
    tmp = (unsigned char *)amk__malloc((size_t)hd * row_bytes);
    if (!tmp) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    for (h = 0; h < heads; h++) {
        unsigned char *head = (unsigned char *)data + (size_t)(h * hd) * row_bytes;
        memcpy(tmp, head, (size_t)hd * row_bytes);
        for (i = 0; i < hd / 2; i++) {
            memcpy(head + (size_t)(2 * i) * row_bytes, tmp + (size_t)i * row_bytes, row_bytes);
            memcpy(head + (size_t)(2 * i + 1) * row_bytes, tmp + (size_t)(i + hd / 2) * row_bytes, row_bytes);
        }
    }
    amk__free(tmp);
    return AMK_OK;
}

/* The step's weight named name as n F32 values in the step's layout (amk__llm_weight_layout): read
   from the model file, or without one (random weights made on the host) from the backend's buffer. */
AMK__FN amk_result amk__llm_weight_f32(amk_llm *m, const char *name, float *dst, int64_t n, amk_diag *d) {
    const int id = amk_program_find_buffer(m->prog, name);
    const amk_weight_entry *e = amk__llm_entry(m, id);
    amk_buffer f32;
    amk_result r;
    if (!e || e->transform == AMK_WEIGHT_QKV_FOLD || amk_buffer_numel(&m->prog->buffers[id]) != n ||
        (uint64_t)n > (uint64_t)(SIZE_MAX / 4))
        return amk__fail(d, AMK_ERR_MISMATCH, "qkv fold: the step has no weight '%s' of %lld values", name, (long long)n);
    f32 = m->prog->buffers[id];
    if (m->model) {
        f32.dtype = AMK_DTYPE_F32;
        r = amk_model_tensor_read(m->model, f32.source, AMK_DTYPE_F32, dst, (size_t)n * 4, d);
        return r == AMK_OK ? amk__llm_weight_layout(&f32, e, dst, (size_t)n * 4, d) : r;
    }
    if (!m->backend->read_f32) /* why never met: a backend without it makes its own random weights */
        return amk__fail(d, AMK_ERR_UNSUPPORTED, "qkv fold: the %s backend cannot read '%s' back", m->backend->name, name);
    return m->backend->read_f32(m, id, dst, n, d);
}

/* r_j[0..F) += a_j * b[0..F) for the four rows r_j: the inner loop of amk__llm_fold_rows. why
   restrict rows and a fixed chunk of 16: GCC -O2 vectorises only a loop that needs no aliasing
   check and whose trip count is a multiple of the vector width; four rows at a time so each row of
   b read serves four sums. SmolLM2's 0.85 G multiply-adds a layer take 0.064 s so. */
AMK__FN void amk__axpy4(float *AMK__RESTRICT r0, float *AMK__RESTRICT r1, float *AMK__RESTRICT r2,
                        float *AMK__RESTRICT r3, const float *AMK__RESTRICT b, float a0, float a1, float a2,
                        float a3, int64_t F) {
    int64_t f;
    int j;
    for (f = 0; f + 16 <= F; f += 16)
        for (j = 0; j < 16; j++) {
            const float v = b[f + j];
            r0[f + j] += a0 * v; r1[f + j] += a1 * v; r2[f + j] += a2 * v; r3[f + j] += a3 * v;
        }
    for (; f < F; f++) {
        const float v = b[f];
        r0[f] += a0 * v; r1[f] += a1 * v; r2[f] += a2 * v; r3[f] += a3 * v;
    }
}

/* Rows [0, I) of W_fold = W_downT @ W_base into out (row n = sum_k W_downT[n, k] W_base[k, :]; wd
   [I, H], base [H, F]), four rows at a time: wd and out hold I rounded up to a multiple of 4 rows
   (wd's extra rows zero). Progress every 256 rows: *done counts them. */
AMK__FN void amk__llm_fold_rows(amk_llm *m, const float *wd, const float *base, float *out, int64_t I, int64_t H,
                                int64_t F, uint64_t *done, uint64_t total) {
    int64_t n, k, f, reported = 0;
    for (n = 0; n < I; n += 4) {
        float *r0 = out + n * F;
        for (f = 0; f < 4 * F; f++) r0[f] = 0.0f;
        for (k = 0; k < H; k++)
            amk__axpy4(r0, r0 + F, r0 + 2 * F, r0 + 3 * F, base + k * F, wd[n * H + k], wd[(n + 1) * H + k],
                       wd[(n + 2) * H + k], wd[(n + 3) * H + k], F);
        if (m->opts.progress && ((n + 4) % 256 == 0 || n + 4 >= I)) {
            const int64_t rows = n + 4 < I ? n + 4 : I;
            *done += (uint64_t)(rows - reported);
            reported = rows;
            m->opts.progress(m->opts.progress_user, "fold", *done, total);
        }
    }
}

/* W_cat.i (buffer id, [I + H, F]) of a folded step (amk_llama_build's qkv_fold), computed in F32
   from the weights it folds, in the step's layouts (amk__llm_weight_f32): W_base[k, f] = nw[k] *
   Wqkv[f, k] (nw: layer i+1's input_layernorm; Wqkv: its q_proj, k_proj and v_proj rows, F of H,
   Q and K interleaved), W_fold = W_downT @ W_base (W_downT: layer i's down_proj as [I, H]); then
   cast to the buffer's dtype and written into the backend's buffer. */
AMK__FN amk_result amk__llm_fold(amk_llm *m, int id, int layer, uint64_t *done, uint64_t total, amk_diag *d) {
    static const char *const qkv_names[3] = {"q_proj", "k_proj", "v_proj"};
    const amk_llama_config *c = &m->cfg;
    const amk_buffer *b = &m->prog->buffers[id];
    const int64_t H = c->hidden, I = c->intermediate, qr = (int64_t)c->n_heads * c->head_dim;
    const int64_t kvr = (int64_t)c->n_kv_heads * c->head_dim, F = qr + 2 * kvr, I4 = (I + 3) / 4 * 4;
    /* [F, H] [H] [I4, H] (rows past I zero) [H, F] [I4 + H, F] (W_cat's rows, then padding) */
    float *wqkv = NULL, *nw = NULL, *wd = NULL, *base = NULL, *cat = NULL;
    void *dst = NULL;
    char name[96];
    int64_t k, f, e;
    size_t nb = (size_t)amk__buffer_nbytes(b);
    amk_result r = AMK_OK, w;
    int j;
    if (b->rank != 2 || b->shape[0] != I + H || b->shape[1] != F || layer + 1 >= c->n_layers)
        return amk__fail(d, AMK_ERR_MISMATCH, "qkv fold: '%s' is not [%lld, %lld] of a layer before the last",
                         b->name, (long long)(I + H), (long long)F);
    wqkv = amk__refvm_floats(F * H);
    nw = amk__refvm_floats(H);
    wd = amk__refvm_floats(I4 * H);
    base = amk__refvm_floats(H * F);
    cat = amk__refvm_floats((I4 + H) * F);
    w = m->backend->write_begin(m, id, &dst, &nb); /* OUT_OF_MEMORY leaves dst NULL: the check below names it */
    if (w != AMK_OK && w != AMK_ERR_OUT_OF_MEMORY) r = amk__fail(d, AMK_ERR_INVALID_ARG, "no storage for weight '%s'", b->name);
    if (r == AMK_OK && (!wqkv || !nw || !wd || !base || !cat || !dst))
        r = amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory folding '%s'", b->name);
    for (j = 0; j < 3 && r == AMK_OK; j++) { /* Q rows at 0, K rows at qr, V rows at qr + kvr */
        snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.weight", layer + 1, qkv_names[j]);
        r = amk__llm_weight_f32(m, name, wqkv + (j ? qr + (j - 1) * kvr : 0) * H, (j ? kvr : qr) * H, d);
    }
    snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", layer + 1);
    if (r == AMK_OK) r = amk__llm_weight_f32(m, name, nw, H, d);
    snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj.weight", layer);
    if (r == AMK_OK) r = amk__llm_weight_f32(m, name, wd, I * H, d);
    if (r == AMK_OK) {
        for (e = I * H; e < I4 * H; e++) wd[e] = 0.0f;
        for (k = 0; k < H; k++)
            for (f = 0; f < F; f++) base[k * F + f] = nw[k] * wqkv[f * H + k];
        amk__llm_fold_rows(m, wd, base, cat, I, H, F, done, total);
        memcpy(cat + I * F, base, (size_t)(H * F) * sizeof(float)); /* W_base: rows I.. of W_cat */
        for (e = 0; e < (I + H) * F; e++) amk__store_f32(dst, b->dtype, e, cat[e]);
    }
    if (w == AMK_OK) {
        w = m->backend->write_end(m, id, dst, nb, r == AMK_OK, d);
        if (r == AMK_OK) r = w;
    }
    amk__free(wqkv); amk__free(nw); amk__free(wd); amk__free(base); amk__free(cat);
    return r;
}

/* v as the f16 a block holds at p (little-endian, as amk__blk_f16 reads it). */
AMK__FN void amk__store_f16le(uint8_t *p, float v) {
    const uint16_t h = amk_f32_to_f16(v);
    p[0] = (uint8_t)(h & 0xFF);
    p[1] = (uint8_t)(h >> 8);
}

/* Random blocks of block format t holding n elements (whole blocks) into dst: random quant bytes,
   then in each block the f16 scale d, and the min where the format has one, set from the block's
   own values so that they have mean 0 (with a min) and mean square var. why from the decoded
   block: a block's values are d * a + min * c, a and c fixed by its quant bytes, so decoding it
   with (d, min) = (1, 0) and (0, 1) gives a and c for every format alike; then min = r * d with r
   centering a + r * c, and d scaling its mean square to var. */
AMK__FN void amk__llm_random_blocks(uint8_t *dst, int t, int64_t n, float var, amk__rng *rng) {
    const struct amk__blk_format *f = &amk__blk_formats[t - AMK_DTYPE_Q8_0];
    float a[256], c[256]; /* why 256: the largest block (the K-quants') */
    int64_t k;
    int j;
    for (k = 0; k < n / f->elems; k++) {
        uint8_t *x = dst + k * f->bytes;
        double sa = 0.0, sc = 0.0, ms = 0.0, r = 0.0, dd;
        for (j = 0; j < f->bytes; j++) x[j] = (uint8_t)amk__rng_u64(rng);
        amk__store_f16le(x + f->d_off, 1.0f);
        if (f->m_off >= 0) amk__store_f16le(x + f->m_off, 0.0f);
        f->decode(x, 1, a);
        for (j = 0; j < f->elems; j++) sa += a[j];
        if (f->m_off >= 0) {
            amk__store_f16le(x + f->d_off, 0.0f);
            amk__store_f16le(x + f->m_off, 1.0f);
            f->decode(x, 1, c);
            for (j = 0; j < f->elems; j++) sc += c[j];
            r = sc != 0.0 ? -sa / sc : 0.0;
        }
        for (j = 0; j < f->elems; j++) {
            const double v = a[j] + (f->m_off >= 0 ? r * c[j] : 0.0);
            ms += v * v;
        }
        ms /= f->elems;
        dd = ms > 0.0 ? sqrt((double)var / ms) : 0.0;
        if (!(fabs(r * dd) < 60000.0)) r = 0.0; /* why: a min past f16's range (c nearly all 0) is left out */
        amk__store_f16le(x + f->d_off, (float)dd);
        if (f->m_off >= 0) amk__store_f16le(x + f->m_off, (float)(r * dd));
    }
}

/* Makes weight id (m's one id space, amk__llm_buffer) by its plan entry e: from the model file,
   random by the backend where it makes them, else random (rng) on the host. */
AMK__FN amk_result amk__llm_load_weight(amk_llm *m, int id, const amk_weight_entry *e, amk__rng *rng, amk_diag *d) {
    const amk_buffer *b = amk__llm_buffer(m, id);
    size_t nb = (size_t)amk__buffer_nbytes(b);
    void *dst;
    amk_result r = AMK_OK, w;
    /* why: uniform in +-sqrt(3)/sqrt(K) has variance 1/K, so each output has unit variance
       (K: HF's in-features, shape[0] of a transposed weight) */
    const float scale = b->rank == 2 ? 1.7320508f / sqrtf((float)b->shape[e->transform == AMK_WEIGHT_TRANSPOSED ? 0 : 1]) : 0.0f;
    /* random weights made by the backend (the GPU's fill makes block formats too: random bytes,
       scales set from scale; amk_cuda_fill_random) */
    if (!m->model && m->backend->random_weight) return m->backend->random_weight(m, id, scale, d);
    if ((w = m->backend->write_begin(m, id, &dst, &nb)) == AMK_ERR_OUT_OF_MEMORY)
        return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory staging '%s'", b->name);
    if (w != AMK_OK) return amk__fail(d, AMK_ERR_INVALID_ARG, "no storage for weight '%s'", b->name);
    if (m->model) {
        r = amk_model_tensor_read(m->model, b->source, b->dtype, dst, nb, d);
        if (r == AMK_OK) r = amk__llm_weight_layout(b, e, dst, nb, d);
    } else {
        int64_t n = amk_buffer_numel(b), j;
        if (amk_dtype_is_block(b->dtype)) amk__llm_random_blocks((uint8_t *)dst, b->dtype, n, scale * scale / 3.0f, rng);
        else
            for (j = 0; j < n; j++) amk__store_f32(dst, b->dtype, j, b->rank == 2 ? amk__rng_sym(rng) * scale : 1.0f);
        r = amk__llm_weight_layout(b, e, dst, nb, d); /* why: the same model as the spec_ops step for one seed */
    }
    w = m->backend->write_end(m, id, dst, nb, r == AMK_OK, d);
    return r == AMK_OK ? w : r;
}

/* Fills every WEIGHT buffer by the step's weight plan, then the prefill program's own weights (the
   layouts the step lacks) by its plan: from the model file, or random (seeded) when m->model is
   NULL. */
AMK__FN amk_result amk__llm_load_weights(amk_llm *m, amk_diag *d) {
    /* W_cat.i of a folded step is derived from the other weights, so it comes after them (not
       with random weights the backend makes, the GPU's: those are made like any other matrix, the
       step's numbers then meaning nothing, as every random weight's; for timing only) */
    const int derive = m->model || !m->backend->random_weight;
    const int n_all = m->n_weights + m->pre_n_weights;
    uint64_t total = 0, done = 0, fold_total = 0, fold_done = 0;
    int k;
    amk__rng rng;
    for (k = 0; k < n_all; k++) { /* entry k: the step's, then the prefill program's own */
        const int pre = k >= m->n_weights;
        const amk_weight_entry *e = pre ? &m->pre_weights[k - m->n_weights] : &m->weights[k];
        if (pre && m->pre_share[e->buffer] >= 0) continue;
        if (derive && e->transform == AMK_WEIGHT_QKV_FOLD) fold_total += (uint64_t)m->cfg.intermediate; /* rows of W_fold */
        else total += (uint64_t)amk__buffer_nbytes(amk__llm_buffer(m, e->buffer + (pre ? m->prog->n_buffers : 0)));
    }
    amk__rng_seed(&rng, m->opts.random_seed);
    for (k = 0; k < n_all; k++) {
        const int pre = k >= m->n_weights;
        const amk_weight_entry *e = pre ? &m->pre_weights[k - m->n_weights] : &m->weights[k];
        const int id = e->buffer + (pre ? m->prog->n_buffers : 0);
        amk_result r;
        if ((pre && m->pre_share[e->buffer] >= 0) || (derive && e->transform == AMK_WEIGHT_QKV_FOLD)) continue;
        if ((r = amk__llm_load_weight(m, id, e, &rng, d)) != AMK_OK) return r;
        done += (uint64_t)amk__buffer_nbytes(amk__llm_buffer(m, id));
        if (m->opts.progress) m->opts.progress(m->opts.progress_user, "weights", done, total);
    }
    for (k = 0; k < m->n_weights && derive; k++) {
        amk_result r;
        if (m->weights[k].transform != AMK_WEIGHT_QKV_FOLD) continue;
        if ((r = amk__llm_fold(m, m->weights[k].buffer, m->weights[k].layer, &fold_done, fold_total, d)) != AMK_OK) return r;
    }
    return AMK_OK;
}

AMK_API amk_result amk_tokenizer_from_model(const amk_model *m, amk_tokenizer **out, amk_diag *d) {
    char tp[1024];
    if (!m || !out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_tokenizer_from_model: NULL argument");
    *out = NULL;
    if (amk_model_gguf(m)) return amk_tokenizer_from_gguf(amk_model_gguf(m), out, d);
    if (snprintf(tp, sizeof tp, "%s/tokenizer.json", amk_model_dir(m)) >= (int)sizeof tp)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "model directory path too long for its tokenizer.json");
    return amk_tokenizer_from_json(tp, out, d);
}

/* The tokenizer of m against its embedding. why only a larger tokenizer is refused: HF models
   often pad the embedding past the tokenizer's vocabulary (to a multiple of 64 or 128, or rows
   for tokens added later), so a smaller tokenizer is legal and its ids all have rows; a larger
   one yields ids the embedding and the LM head lack (the step reads outside the table, the argmax
   never picks them). Its BOS and EOS are ids below its size, so within the rows too. */
AMK__FN amk_result amk__llm_check_tokenizer(const amk_llm *m, amk_diag *d) {
    const int n = amk_tokenizer_n_vocab(m->tok), rows = m->cfg.vocab;
    if (n > rows)
        return amk__fail(d, AMK_ERR_MISMATCH, "the tokenizer has %d tokens, more than the %d rows of the "
                         "embedding of the model in '%s' (ids %d..%d would index outside it)", n, rows,
                         m->model ? amk_model_dir(m->model) : "?", rows, n - 1);
    return AMK_OK;
}

AMK_API amk_result amk_llm_open_model(amk_model *model, amk_tokenizer *tok, const amk_llm_opts *o,
                                      amk_llm **out, amk_diag *d) {
    amk_llm *m;
    amk_result r = AMK_OK;
    if (!out) { /* why free them: the call takes both over, also on failure */
        amk_tokenizer_free(tok);
        amk_model_close(model);
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_open_model: out is NULL");
    }
    *out = NULL;
    if (!model) {
        amk_tokenizer_free(tok);
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_open_model: NULL model");
    }
    m = (amk_llm *)amk__calloc(1, sizeof(amk_llm));
    if (!m) {
        amk_tokenizer_free(tok);
        amk_model_close(model);
        return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (o) m->opts = *o; else amk_llm_opts_default(&m->opts);
    m->model = model;
    m->tok = tok;
    m->cfg = *amk_model_config(m->model);
    if (!m->tok) r = amk_tokenizer_from_model(m->model, &m->tok, d);
    if (r == AMK_OK) r = amk__llm_check_tokenizer(m, d);
    if (r == AMK_OK) r = amk__llm_prepare(m, d);
    if (r == AMK_OK) r = amk__llm_load_weights(m, d);
    if (r != AMK_OK) { amk_llm_close(m); return r; }
    *out = m;
    return AMK_OK;
}

AMK_API amk_result amk_llm_open(const char *path, const amk_llm_opts *o, amk_llm **out, amk_diag *d) {
    amk_model *model = NULL;
    amk_result r;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_open: out is NULL");
    *out = NULL;
    if (!path) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_open: path is NULL");
    r = amk_model_open(path, &model, d);
    return r == AMK_OK ? amk_llm_open_model(model, NULL, o, out, d) : r;
}

AMK_API amk_result amk_llm_open_random(const amk_llama_config *cfg, const amk_llm_opts *o,
                                       amk_llm **out, amk_diag *d) {
    amk_llm *m;
    amk_result r;
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_open_random: out is NULL");
    *out = NULL;
    if (!cfg) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_open_random: cfg is NULL");
    m = (amk_llm *)amk__calloc(1, sizeof(amk_llm));
    if (!m) return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory");
    if (o) m->opts = *o; else amk_llm_opts_default(&m->opts);
    m->cfg = *cfg;
    r = amk__llm_prepare(m, d);
    if (r == AMK_OK) r = amk__llm_load_weights(m, d);
    if (r != AMK_OK) { amk_llm_close(m); return r; }
    *out = m;
    return AMK_OK;
}

/* A step at pos would skip positions the KV cache does not hold (m->next_pos and on). */
AMK__FN amk_result amk__llm_skips(const amk_llm *m, const char *fn, int pos, amk_diag *d) {
    if (m->next_pos == 0)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "%s: position %d skips ahead: the KV cache holds no position "
                         "yet, so the next step is at position 0 (feed positions in order; amk_llm_seek to "
                         "start later)", fn, pos);
    return amk__fail(d, AMK_ERR_INVALID_ARG, "%s: position %d skips ahead: the KV cache holds positions 0..%d, "
                     "so the next step is at position %d at most (feed positions in order; amk_llm_seek to "
                     "start later)", fn, pos, m->next_pos - 1, m->next_pos);
}

AMK_API amk_result amk_llm_step(amk_llm *m, int token, int pos, const float **logits, int *argmax,
                                amk_diag *d) {
    amk_result r;
    if (!m) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_step: m is NULL");
    if (pos < 0 || pos >= m->max_seq)
        return amk__fail(d, AMK_ERR_RUNTIME, "context of %d tokens is longer than the KV cache (%d); use a larger --ctx",
                         pos + 1, m->max_seq);
    if (token < 0 || token >= m->cfg.vocab)
        return amk__fail(d, AMK_ERR_RUNTIME, "token id %d is outside the vocabulary (%d)", token, m->cfg.vocab);
    if (pos > m->next_pos) return amk__llm_skips(m, "amk_llm_step", pos, d);
    r = amk__llama_set_pos(m->prog, pos, m->kv_window, d);
    if (r == AMK_OK) r = m->backend->step(m, token, pos, logits != NULL, argmax, d);
    if (r != AMK_OK) return r;
    m->next_pos = pos + 1; /* why also going back: the rows after pos held another prefix's keys */
    if (logits) *logits = m->logits;
    return AMK_OK;
}

/* 1 when a chunk of R rows (0: no program) takes the next left tokens at position p0: all its rows,
   or its tokens fill pct % of it and its rows fit the cache, padded or, where the padding would
   pass the cache's end, started earlier over at most back tokens before p0 (amk_llm_prefill). */
AMK__FN int amk__llm_chunk_takes(int R, int left, int p0, int max_seq, int pct, int back) {
    return R > 0 && (left >= R || ((int64_t)left * 100 >= (int64_t)R * pct && p0 + R - max_seq <= back));
}

AMK_API amk_result amk_llm_prefill(amk_llm *m, const int *tokens, int n, int pos, const float **logits,
                                   int *argmax, amk_diag *d) {
    int k = 0, i, top = -1;
    amk_result r = AMK_OK;
    if (!m || !tokens) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_prefill: NULL argument");
    if (n < 1) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_prefill: n %d (a prompt has a token at least)", n);
    if (pos < 0 || pos > m->max_seq - n)
        return amk__fail(d, AMK_ERR_RUNTIME, "context of %lld tokens is longer than the KV cache (%d); use a larger --ctx",
                         (long long)pos + n, m->max_seq);
    for (i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->cfg.vocab)
            return amk__fail(d, AMK_ERR_RUNTIME, "prompt token %d: id %d is outside the vocabulary (%d)", i, tokens[i],
                             m->cfg.vocab);
    if (pos > m->next_pos) return amk__llm_skips(m, "amk_llm_prefill", pos, d);
    while (k < n && r == AMK_OK) {
        const int left = n - k, p0 = pos + k;
        /* a chunk of the longest prefill program that takes it: whole, or the last one padded (where
           its rows fit the cache and it has tokens enough to beat the smaller programs' chunks, or
           for the shortest, a step a token) */
        const int T = amk__llm_tiers(m);
        int t = -1, j;
        for (j = 0; j < T && t < 0; j++) {
            const int pct = j == T - 1 ? AMK_LLM_PREFILL_PAD_PCT : j == T - 2 ? AMK_LLM_PREFILL_LONG_PCT
                                                                              : AMK_LLM_PREFILL_TOP_PCT;
            if (amk__llm_chunk_takes(amk__llm_tier(m, j)->rows, left, p0, m->max_seq, pct, k)) t = j;
        }
        if (t >= 0) {
            const amk__llm_chunk *ck = amk__llm_tier(m, t);
            const int R = ck->rows, rows = left < R ? left : R;
            /* back: the rows it starts earlier so that its padding stays in the cache (this call's
               tokens before p0, computed again: their cache rows rewritten with the same math) */
            const int back = p0 + R > m->max_seq ? p0 + R - m->max_seq : 0;
            int32_t *tp = ck->io;
            for (i = 0; i < R; i++) { /* why the padding repeats the last token: any id in the vocabulary does */
                tp[i] = tokens[k - back + (i < back + rows ? i : back + rows - 1)];
                tp[R + i] = p0 - back + i;
            }
            r = m->backend->prefill(m, t, tp, tp + R, back + rows - 1, k + rows == n && logits != NULL, &top, d);
            k += rows;
        } else {
            r = amk_llm_step(m, tokens[k], p0, k + 1 == n ? logits : NULL, &top, d);
            k++;
        }
        if (r == AMK_OK) m->next_pos = pos + k; /* why also going back: as amk_llm_step */
        if (r == AMK_OK && m->opts.progress) m->opts.progress(m->opts.progress_user, "prompt", (uint64_t)k, (uint64_t)n);
    }
    if (r != AMK_OK) return r;
    if (logits) *logits = m->logits;
    if (argmax) *argmax = top;
    return AMK_OK;
}

AMK_API amk_result amk_llm_generate(amk_llm *m, int token, int pos, int n, int *tokens, amk_diag *d) {
    amk_result r = AMK_ERR_UNSUPPORTED;
    int i;
    if (!m || !tokens) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_generate: NULL argument");
    if (n < 1 || n > AMK_CUDA_MAX_CHAIN)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_generate: n %d is outside [1, %d]", n, AMK_CUDA_MAX_CHAIN);
    if (pos < 0 || pos > m->max_seq - n)
        return amk__fail(d, AMK_ERR_RUNTIME, "context of %lld tokens is longer than the KV cache (%d); use a larger --ctx",
                         (long long)pos + n, m->max_seq);
    if (token < 0 || token >= m->cfg.vocab)
        return amk__fail(d, AMK_ERR_RUNTIME, "token id %d is outside the vocabulary (%d)", token, m->cfg.vocab);
    if (pos > m->next_pos) return amk__llm_skips(m, "amk_llm_generate", pos, d);
    /* why a step at a time where the program has per-step params (the spec_ops step): a chained
       launch runs one set of params for every step */
    if (m->backend->generate && n > 1 && m->n_step_tasks == 0) {
        r = m->backend->generate(m, token, pos, n, tokens, d);
        if (r == AMK_OK) m->next_pos = pos + n;
        if (r != AMK_ERR_UNSUPPORTED) return r;
    }
    for (i = 0; i < n; i++)
        if ((r = amk_llm_step(m, i == 0 ? token : tokens[i - 1], pos + i, NULL, &tokens[i], d)) != AMK_OK) return r;
    return AMK_OK;
}

AMK_API amk_result amk_llm_reset(amk_llm *m, amk_diag *d) {
    int i;
    if (!m) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_reset: m is NULL");
    m->next_pos = 0;
    for (i = 0; i < m->prog->n_buffers; i++) {
        amk_result r;
        if (m->prog->buffers[i].kind != AMK_KIND_KV_CACHE) continue;
        if ((r = m->backend->zero(m, i, d)) != AMK_OK) return r;
    }
    return AMK_OK;
}

AMK_API amk_result amk_llm_seek(amk_llm *m, int pos, amk_diag *d) {
    if (!m) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_seek: m is NULL");
    if (pos < 0 || pos > m->max_seq)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_llm_seek: position %d is outside the KV cache's [0, %d]", pos,
                         m->max_seq);
    m->next_pos = pos;
    return AMK_OK;
}
#endif /* AMK_IMPLEMENTATION */

/* MIT License, Copyright (c) 2026 the AMK authors: the text is at the end of amk.h. */

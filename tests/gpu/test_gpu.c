/* tests/gpu/test_gpu.c - the CUDA VM against the reference VM, on a real GPU (`make test-gpu`).

   Every opcode on fresh random inputs in several dtypes, multi-SM DAG programs (tiles under an
   all-join counter, chains across SMs, KV_APPEND then split attention), random lowered programs
   (tests/randprog.h), the watchdog, device run-time errors, timing records, params updates and
   the image loader. Every buffer that is not an input is poisoned (0xFF bytes: NaN for floats)
   in both VMs before a run, so an element the GPU forgot to write, or wrote outside a tile,
   shows. Tolerances are per output dtype (one or two roundings of it), in units of the
   reference's own value plus a small fraction of the buffer's largest magnitude.

   Every test of what the device computes (TRY_IMAGES: the opcodes, the DAG and random programs,
   the watchdog, run-time errors, timing, params updates, chained steps) runs twice, on each image
   of the device image set (amk_cuda.h): the full build, then the general one (without the
   small-model forms), forced through AMK_CUDA_IMAGE around each amk_cuda_create; same inputs,
   same tolerances. Its lines and every failure name the image ("test_copy [general]"). A program
   the general build refuses by design (RMSNORM_MLP FOLD, ATTENTION_O PRENORM: only the full
   build's lean forms take them) is skipped there and counted; the lines "images: ..." at the end
   count the programs and buffers compared on each image. The other tests (device info, the LLM's
   chained decode, the PTX loader, fills, bandwidth, the tensor-core timing) run once, on the
   image the runtime picks.

   Usage: test_gpu [--quick] [--bench] [--bench-gemm] [--bench-attn] [NAME-SUBSTRING ...] (a test
          runs if any substring matches its line's name: "[general]" runs only the comparisons on
          the general image)
     --quick       smaller cases and no large ones (for compute-sanitizer)
     --bench       also print bandwidth/latency measurements (not tests; bench/NOTES.md)
     --bench-gemm  the prefill image's tensor-copy GEMM on the 8B projections (beside
                   bench/gemm_cublas.py's cuBLAS)
     --bench-attn  the prefill image's ATTENTION_PREFILL on the 8B's heads, by task size
                   (AMK_BENCH_ATTN="heads kv_heads head_dim max_seq rows pos rows_a_task": one shape)
   Env: AMK_TEST_SEED (default: from the clock, printed), AMK_TEST_SLOW (timeout multiplier),
        AMK_CUDA_IMAGE=full|general (the comparisons on that image only; the runtime's own
        switch, so the other tests load it too), AMK_TEST_IMAGE (one image or a set to test
        instead of the embedded set; one image: the comparisons run once, on it). */
#define _POSIX_C_SOURCE 200809L
#define AMK_IMPLEMENTATION
#include "../../amk.h"
#include "../amk_test.h"
#include "amk_device_image.h"
#ifdef AMK_TEST_HAVE_RANDPROG
#include "../randprog.h"
#endif
#include <time.h>

static uint64_t g_seed;
static double g_slow = 1.0;
static int g_quick, g_bench, g_bench_gemm, g_bench_attn; /* --quick, --bench, --bench-gemm (the tensor-copy GEMM beside cuBLAS), --bench-attn */
static char **g_only; /* name filters (argv), g_n_only of them */
static int g_n_only;
static amk_cuda *g_keep; /* why: holds the primary context so each test does not rebuild it */
static const void *g_image = amk_device_cubin.bytes; /* AMK_TEST_IMAGE=path.cubin replaces it */
static size_t g_image_size = sizeof amk_device_cubin.bytes - 1;

/* ---- small helpers ---------------------------------------------------------------------------- */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static amk_t_rng trng_for(const char *tag) {
    amk_t_rng r;
    r.s = g_seed;
    while (*tag) r.s = r.s * 131 + (unsigned char)*tag++;
    amk_t_rng_next(&r);
    return r;
}

/* A program on a target of n_sms SMs (threads per block 256 unless changed). */
static amk_program *prog_new(int n_sms) {
    amk_program *p = amk_program_create();
    amk_target t;
    amk_target_builtin("h100", &t);
    t.num_sms = n_sms;
    amk_program_set_target(p, &t);
    p->has_config = 1;
    return p;
}
static int buf(amk_program *p, const char *name, amk_buffer_kind k, amk_dtype t, int rank, int64_t d0,
               int64_t d1, int64_t d2) {
    int64_t shape[3];
    shape[0] = d0; shape[1] = d1; shape[2] = d2;
    return amk_program_add_buffer(p, name, k, t, rank, shape, AMK_SPACE_HBM, NULL);
}
/* A task with one output on SM sm; returns its index. */
static int task(amk_program *p, amk_opcode op, const int *ins, int ni, int out, int counter, int sm) {
    int t = amk_program_add_task(p, op, ins, ni, &out, 1, counter, amk_op_name(op));
    if (t >= 0) p->tasks[t].sm = sm;
    return t;
}
static void seti(amk_program *p, int t, const char *k, int64_t v) { amk_task_set_int(p, t, k, v); }
static void setf(amk_program *p, int t, const char *k, double v) { amk_task_set_real(p, t, k, v); }

/* Random values for a buffer in its dtype: floats in [-scale, scale], integers in [0, scale]
   (I8/I32 signed in [-scale, scale]), I4 any nibble. */
static void fill_random(void *data, const amk_buffer *b, amk_t_rng *r, float scale) {
    int64_t n = amk_buffer_numel(b), i;
    if (amk_dtype_is_block(b->dtype)) { /* random bytes, each block's f16 d (and min) in range */
        const struct amk__blk_format *f = &amk__blk_formats[b->dtype - AMK_DTYPE_Q8_0];
        uint8_t *x = (uint8_t *)data;
        for (i = 0; i < amk_dtype_nbytes(b->dtype, n); i++) x[i] = (uint8_t)amk_t_rng_next(r);
        for (i = 0; i < n / f->elems; i++) {
            uint16_t h = amk_f32_to_f16(scale / 32.0f * (1.0f + amk_t_rng_sym(r)));
            memcpy(x + i * f->bytes + f->d_off, &h, 2); /* why memcpy: f16 fields are little-endian, as this host */
            if (f->m_off >= 0) {
                h = amk_f32_to_f16(-scale / 4.0f * amk_t_rng_sym(r));
                memcpy(x + i * f->bytes + f->m_off, &h, 2);
            }
        }
        return;
    }
    for (i = 0; i < n; i++) {
        float u = amk_t_rng_sym(r);
        switch (b->dtype) {
        case AMK_DTYPE_I32: case AMK_DTYPE_I8: amk__store_f32(data, b->dtype, i, (float)floor(u * scale + 0.5)); break;
        case AMK_DTYPE_U8: amk__store_f32(data, b->dtype, i, (float)floor((u + 1.0f) * 0.5f * scale + 0.5)); break;
        case AMK_DTYPE_I4: amk__store_f32(data, b->dtype, i, (float)floor(u * 8.0f)); break;
        case AMK_DTYPE_BOOL: amk__store_f32(data, b->dtype, i, u > 0.0f ? 1.0f : 0.0f); break;
        default: amk__store_f32(data, b->dtype, i, u * scale); break;
        }
    }
}

static int is_input_kind(int kind) {
    return kind == AMK_KIND_WEIGHT || kind == AMK_KIND_CONST || kind == AMK_KIND_IO_INPUT || kind == AMK_KIND_KV_CACHE;
}

/* ---- the images ------------------------------------------------------------------------------ */

/* The images the comparisons run on (amk_image_kind, g_n_images of them: the set's full and
   general builds, or the one AMK_CUDA_IMAGE names; -1 alone: the runtime's pick, for an image that
   is no set), and g_img, the one the running test forces (-1: the runtime picks). */
static int g_images[2] = {-1, -1}, g_n_images = 1, g_img = -1, g_has_prefill = 0;
/* Per image loaded ([0] full, [1] general): programs loaded beside the reference VM (gcase_begin),
   buffers compared (gcase_compare), those that differed, programs skipped by design. */
static int g_programs[4], g_buffers[4], g_differ[4], g_skipped[4];

static const char *image_name(int kind) {
    return kind == AMK_IMAGE_FULL ? "full" : kind == AMK_IMAGE_GENERAL ? "general" : kind == AMK_IMAGE_PREFILL ? "prefill"
         : kind == AMK_IMAGE_PORTABLE ? "portable" : "picked";
}
/* The programs skipped by design so far, on every image. */
static int skipped_total(void) { return g_skipped[0] + g_skipped[1] + g_skipped[2] + g_skipped[3]; }
static int image_index(int kind) {
    return kind == AMK_IMAGE_GENERAL ? 1 : kind == AMK_IMAGE_PREFILL ? 2 : kind == AMK_IMAGE_PORTABLE ? 3 : 0;
}

/* amk_cuda_create of p (unchecked: the entry without validate) on the image g_img forces: the
   runtime's switch AMK_CUDA_IMAGE set around the call and its previous value restored, and the
   build loaded checked; with g_img -1, as the runtime picks. */
static amk_result create_on_image(const amk_program *p, int unchecked, amk_cuda **out, amk_diag *d) {
    const char *old = getenv("AMK_CUDA_IMAGE");
    char *saved = NULL;
    amk_result r;
    if (g_img < 0)
        return unchecked ? amk__cuda_create_unchecked(p, g_image, g_image_size, out, d) : amk_cuda_create(p, g_image, g_image_size, out, d);
    if (old && !(saved = strdup(old))) { /* why a copy: setenv may free the string getenv gave */
        CHECK_MSG(0, "out of memory saving AMK_CUDA_IMAGE");
        return AMK_ERR_OUT_OF_MEMORY;
    }
    CHECK_EQ_INT(setenv("AMK_CUDA_IMAGE", image_name(g_img), 1), 0);
    r = unchecked ? amk__cuda_create_unchecked(p, g_image, g_image_size, out, d) : amk_cuda_create(p, g_image, g_image_size, out, d);
    CHECK_EQ_INT(saved ? setenv("AMK_CUDA_IMAGE", saved, 1) : unsetenv("AMK_CUDA_IMAGE"), 0);
    free(saved);
    if (r == AMK_OK) {
        amk_cuda_info info;
        amk_cuda_get_info(*out, &info);
        CHECK_MSG(info.image_kind == g_img, "the %s image forced, the %s one loaded", image_name(g_img), image_name(info.image_kind));
        if (g_img == AMK_IMAGE_PREFILL) { /* every tile whose operands suit runs the tensor-copy GEMM */
            int i;
            for (i = 0; i < p->n_tasks; i++) {
                amk_vm_ctx_t x;
                amk_task_context(p, i, &x);
                if (amk_plan_gemm_tma_ops(&x, info.threads))
                    CHECK_MSG((*out)->ins[i].form == AMK_FORM_GEMM_TMA, "task %d: form %u on the prefill image, not GEMM_TMA", i,
                              (unsigned)(*out)->ins[i].form);
            }
        }
    }
    return r;
}

/* 1 when a build refuses p by design: the runtime said so (r UNSUPPORTED, its message holding says)
   and a task of p is one that build does not take (takes, a planner test): the general and
   prefill builds a form only the full build's lean forms take (amk_plan_folded: RMSNORM_MLP FOLD,
   ATTENTION_O PRENORM; "not in the general, prefill or portable build"), the full and general builds a task
   only the prefill build runs (amk_plan_prefill_only: RMSNORM_GEMV's tiles of rows; "runs in the
   prefill and portable builds only"). */
static int refused_by_design(const amk_program *p, amk_result r, const char *message, const char *says,
                             int (*takes)(const amk_vm_ctx_t *)) {
    int i;
    if (r != AMK_ERR_UNSUPPORTED || !strstr(message, says)) return 0;
    for (i = 0; i < p->n_tasks; i++) {
        amk_vm_ctx_t x;
        amk_task_context(p, i, &x);
        if (takes(&x)) return 1;
    }
    return 0;
}
static int general_refuses(const amk_program *p, amk_result r, const char *message) {
    return refused_by_design(p, r, message, "not in the general, prefill or portable build", amk_plan_folded);
}

/* One program on both VMs; the GPU's on image (amk_image_kind: the build loaded, else g_img). */
typedef struct gcase {
    amk_program *p;
    amk_refvm *vm;
    amk_cuda *cu;
    amk_diag d;
    amk_t_rng rng;
    int image;
} gcase;

/* Creates both VMs (the GPU's on g_img's image), fills every input kind (and KV caches:
   prior-step state) with random values of magnitude scale (the same on every image: they come from
   tag), poisons everything else, and uploads it all. 0 on failure (reported), or when the general
   build refuses p by design (a skip, counted, not a failure). */
static int gcase_begin(gcase *g, amk_program *p, const char *tag, float scale) {
    int b;
    amk_result r;
    memset(g, 0, sizeof *g);
    g->p = p;
    g->rng = trng_for(tag);
    g->image = g_img;
    amk_diag_clear(&g->d);
    CHECK_EQ_INT(p->build_error, AMK_OK);
    r = amk_refvm_create(p, &g->vm, &g->d);
    CHECK_MSG(r == AMK_OK, "%s [%s]: refvm_create: %s", tag, image_name(g->image), g->d.message);
    if (r != AMK_OK) return 0;
    r = create_on_image(p, 0, &g->cu, &g->d);
    if (((g_img == AMK_IMAGE_GENERAL || g_img == AMK_IMAGE_PREFILL || g_img == AMK_IMAGE_PORTABLE) &&
         general_refuses(p, r, g->d.message)) ||
        (!AMK_IMAGE_HAS_PREFILL(g_img) &&
         refused_by_design(p, r, g->d.message, "runs in the prefill and portable builds only", amk_plan_prefill_only))) {
        g_skipped[image_index(g_img)]++;
        printf("    %s [%s]: skipped by design: %s\n", tag, image_name(g_img), g->d.message);
        return 0;
    }
    CHECK_MSG(r == AMK_OK, "%s [%s]: cuda_create: %s [%s] %s", tag, image_name(g->image), amk_result_str(r), g->d.cuda_error,
              g->d.message);
    if (r != AMK_OK) return 0;
    {
        amk_cuda_info info;
        amk_cuda_get_info(g->cu, &info);
        g->image = info.image_kind;
        g_programs[image_index(g->image)]++;
    }
    for (b = 0; b < p->n_buffers; b++) {
        size_t nb = 0;
        void *data = amk_refvm_buffer(g->vm, b, &nb);
        if (is_input_kind(p->buffers[b].kind)) fill_random(data, &p->buffers[b], &g->rng, scale);
        else memset(data, 0xFF, nb);
    }
    for (b = 0; b < p->n_buffers; b++) {
        size_t nb = 0;
        void *data = amk_refvm_buffer(g->vm, b, &nb);
        r = amk_cuda_upload(g->cu, b, data, nb, &g->d);
        CHECK_MSG(r == AMK_OK, "%s [%s]: upload %d: %s", tag, image_name(g->image), b, g->d.message);
        if (r != AMK_OK) return 0;
    }
    return 1;
}

/* Re-uploads buffer b from the reference VM's storage (after a test set its values). */
static void gcase_sync(gcase *g, int b) {
    size_t nb = 0;
    void *data = amk_refvm_buffer(g->vm, b, &nb);
    CHECK_EQ_INT(amk_cuda_upload(g->cu, b, data, nb, &g->d), AMK_OK);
}

/* Sets I32 buffer b's first n values (positions) on the reference VM and uploads them. */
static void gcase_set_i32(gcase *g, int b, const int32_t *v, int n) {
    void *data = amk_refvm_buffer(g->vm, b, NULL);
    int i;
    for (i = 0; i < n; i++) amk__store_i64(data, AMK_DTYPE_I32, i, v[i]);
    gcase_sync(g, b);
}

static int gcase_run(gcase *g, const char *tag) {
    amk_result r = amk_refvm_run(g->vm, NULL, &g->d);
    CHECK_MSG(r == AMK_OK, "%s [%s]: refvm_run: %s", tag, image_name(g->image), g->d.message);
    if (r != AMK_OK) return 0;
    r = amk_cuda_run(g->cu, 10000.0 * g_slow, &g->d);
    CHECK_MSG(r == AMK_OK, "%s [%s]: cuda_run: %s: %s [%s]", tag, image_name(g->image), amk_result_str(r), g->d.message,
              g->d.cuda_error);
    return r == AMK_OK;
}

/* Default relative tolerance of an output dtype: about two roundings of it. */
static double dtype_tol(int dt) {
    switch (dt) {
    case AMK_DTYPE_F32: return 2e-5;
    case AMK_DTYPE_F16: return 2e-3;
    case AMK_DTYPE_BF16: return 1.6e-2;
    case AMK_DTYPE_F8E4M3: return 0.13;
    case AMK_DTYPE_F8E5M2: return 0.26;
    default: return 0.0; /* integers: exact */
    }
}

/* GPU buffer b against the reference: |gpu - ref| <= rtol*|ref| + atol_rel*max|ref|, NaN only
   where the reference has NaN (the poison of an element nobody writes). rtol < 0: dtype default. */
static int gcase_compare(gcase *g, int b, double rtol, double atol_rel, const char *tag) {
    const amk_buffer *bb = &g->p->buffers[b];
    size_t nb = 0;
    const void *ref = amk_refvm_buffer(g->vm, b, &nb);
    void *gpu = malloc(nb ? nb : 1);
    int64_t n = amk_buffer_numel(bb), i, bad = 0;
    double maxabs = 0.0, worst = 0.0;
    if (rtol < 0) rtol = dtype_tol(bb->dtype);
    if (atol_rel < 0) atol_rel = dtype_tol(bb->dtype);
    CHECK_EQ_INT(amk_cuda_download(g->cu, b, gpu, nb, &g->d), AMK_OK);
    for (i = 0; i < n; i++) {
        double e = amk__load_f32(ref, bb->dtype, i);
        if (e == e && fabs(e) > maxabs && !isinf(e)) maxabs = fabs(e);
    }
    for (i = 0; i < n; i++) {
        double a = amk__load_f32(gpu, bb->dtype, i), e = amk__load_f32(ref, bb->dtype, i);
        double err = fabs(a - e), tol = rtol * fabs(e) + atol_rel * maxabs;
        int ok = (a != a && e != e) || a == e || (a == a && e == e && err <= tol);
        if (!ok) {
            if (bad < 4) fprintf(stderr, "  %s [%s]: buffer %d '%s' [%lld]: gpu %.9g ref %.9g (tol %.3g)\n", tag,
                                 image_name(g->image), b, bb->name, (long long)i, a, e, tol);
            bad++;
        } else if (e == e && a == a && err / (tol > 0 ? tol : 1) > worst) {
            worst = err / (tol > 0 ? tol : 1);
        }
    }
    free(gpu);
    CHECK_MSG(bad == 0, "%s [%s]: %lld of %lld elements of '%s' differ", tag, image_name(g->image), (long long)bad, (long long)n,
              bb->name);
    g_buffers[image_index(g->image)]++;
    g_differ[image_index(g->image)] += bad != 0;
    return bad == 0;
}

/* Uploads the reference's contents of every input-kind buffer (after a test set some). */
static void gcase_sync_inputs(gcase *g) {
    int b;
    for (b = 0; b < g->p->n_buffers; b++)
        if (is_input_kind(g->p->buffers[b].kind)) gcase_sync(g, b);
}

/* gcase_compare on every buffer the program computes (not an input, or a KV cache). */
static void gcase_compare_outputs(gcase *g, double rtol, double atol_rel, const char *tag) {
    int b;
    for (b = 0; b < g->p->n_buffers; b++)
        if (!is_input_kind(g->p->buffers[b].kind) || g->p->buffers[b].kind == AMK_KIND_KV_CACHE)
            gcase_compare(g, b, rtol, atol_rel, tag);
}

static void gcase_end(gcase *g) {
    amk_cuda_free(g->cu);
    amk_refvm_free(g->vm);
    amk_program_free(g->p);
    memset(g, 0, sizeof *g);
}

/* Runs a program whose every non-input buffer is compared (the single-op tests). */
static void check_program(amk_program *p, const char *tag, float scale, double rtol, double atol_rel) {
    gcase g;
    if (gcase_begin(&g, p, tag, scale) && gcase_run(&g, tag)) gcase_compare_outputs(&g, rtol, atol_rel, tag);
    gcase_end(&g);
}

/* ---- single opcodes ------------------------------------------------------------------------------ */

static void copy_case(amk_dtype src, amk_dtype dst, int64_t n, float scale) {
    amk_program *p = prog_new(1);
    int x = buf(p, "x", AMK_KIND_IO_INPUT, src, 1, n, 0, 0), y = buf(p, "y", AMK_KIND_IO_OUTPUT, dst, 1, n, 0, 0);
    char tag[64];
    task(p, AMK_OP_COPY, &x, 1, y, amk_program_add_counter(p, ""), 0);
    snprintf(tag, sizeof tag, "COPY %s->%s", amk_dtype_name(src), amk_dtype_name(dst));
    check_program(p, tag, scale, 0.0, 0.0); /* a cast is exact: both round to nearest even */
}

/* COPY of a [rows, cols] matrix into out (dst) by n tasks on SMs 0..n-1, task k rows [off[k],
   off[k] + len[k]) (n 0: one task over all of it, no rows), from a block format (dequantized, as a
   prefill chunk's matrices are for its tensor cores) or a float dtype. Rows no task writes keep
   their poison. Exact: both decode a block the same way and round to nearest even. The prefill
   image runs them (amk_plan_prefill_only). */
static void copy_tiles_case(amk_dtype src, amk_dtype dst, int64_t rows, int64_t cols, int n, const int64_t *off,
                            const int64_t *len) {
    amk_program *p = prog_new(n > 0 ? n : 1);
    int x = buf(p, "x", AMK_KIND_WEIGHT, src, 2, rows, cols, 0), y = buf(p, "y", AMK_KIND_IO_OUTPUT, dst, 2, rows, cols, 0);
    int c = amk_program_add_counter(p, ""), k, t;
    char tag[96];
    for (k = 0; k < (n > 0 ? n : 1); k++) {
        t = task(p, AMK_OP_COPY, &x, 1, y, c, k);
        if (n == 0) break;
        seti(p, t, "m_off", off[k]);
        seti(p, t, "M_tile", len[k]);
    }
    snprintf(tag, sizeof tag, "COPY %s [%lld, %lld] %s->%s", n ? "rows" : "whole", (long long)rows, (long long)cols,
             amk_dtype_name(src), amk_dtype_name(dst));
    check_program(p, tag, 3.0f, 0.0, 0.0);
}

/* Three tasks of rows [0, 2), [2, 5), [6, 7) of 7 (row 5 left alone), two blocks a row; whole
   with n 0. */
static void copy_rows_case(amk_dtype src, amk_dtype dst, int n) {
    static const int64_t off[3] = {0, 2, 6}, len[3] = {2, 3, 1};
    copy_tiles_case(src, dst, 7, amk_dtype_is_block(src) ? 2 * amk_dtype_block(src, NULL) : 96, n, off, len);
}

/* Two tasks, rows [0, split) and [split, rows): the first task's bytes take more rounds than the
   prefill image's ring has slots (4 of 32 KB), so slots are refilled; the second starts where its
   bytes are 16-byte aligned or, for Q4_1's 360-byte rows at an odd row, are not (the threads' own
   loads then), and Q4_1's first task ends in a partial unit of lcm(16, its 20 bytes). */
static void copy_ring_case(amk_dtype src, int64_t rows, int64_t cols, int64_t split) {
    const int64_t off[2] = {0, split}, len[2] = {split, rows - split};
    copy_tiles_case(src, AMK_DTYPE_BF16, rows, cols, 2, off, len);
}

static void test_copy_rows(void) {
    static const amk_dtype out[3] = {AMK_DTYPE_BF16, AMK_DTYPE_F16, AMK_DTYPE_F32};
    int t;
    for (t = AMK_DTYPE_Q8_0; t < AMK_DTYPE_COUNT; t++)
        if (amk_dtype_is_block(t)) copy_rows_case((amk_dtype)t, out[t % 3], 3);
    copy_rows_case(AMK_DTYPE_Q4_K, AMK_DTYPE_BF16, 0);
    copy_ring_case(AMK_DTYPE_Q4_K, 128, 4096, 81);
    copy_ring_case(AMK_DTYPE_Q8_0, 128, 4096, 81);
    copy_ring_case(AMK_DTYPE_Q6_K, 128, 4096, 81);
    copy_ring_case(AMK_DTYPE_Q4_1, 1024, 576, 641);
    copy_rows_case(AMK_DTYPE_F32, AMK_DTYPE_BF16, 3);
    copy_rows_case(AMK_DTYPE_BF16, AMK_DTYPE_BF16, 3);
}

static void test_copy(void) {
    copy_case(AMK_DTYPE_F32, AMK_DTYPE_BF16, 1000, 3.0f);
    copy_case(AMK_DTYPE_BF16, AMK_DTYPE_F32, 1000, 3.0f);
    copy_case(AMK_DTYPE_BF16, AMK_DTYPE_BF16, 1001, 3.0f); /* byte path, odd size */
    copy_case(AMK_DTYPE_F32, AMK_DTYPE_F16, 999, 70000.0f); /* overflows to inf */
    copy_case(AMK_DTYPE_F16, AMK_DTYPE_F32, 999, 1000.0f);
    copy_case(AMK_DTYPE_F32, AMK_DTYPE_F8E4M3, 517, 600.0f); /* saturates at 448 */
    copy_case(AMK_DTYPE_F32, AMK_DTYPE_F8E5M2, 517, 70000.0f); /* overflows to inf */
    copy_case(AMK_DTYPE_F32, AMK_DTYPE_F8E4M3, 300, 0.01f); /* subnormals */
    copy_case(AMK_DTYPE_F8E4M3, AMK_DTYPE_F32, 256, 300.0f);
    copy_case(AMK_DTYPE_F8E5M2, AMK_DTYPE_BF16, 256, 3000.0f);
    copy_case(AMK_DTYPE_F16, AMK_DTYPE_I8, 300, 200.0f); /* saturates */
    copy_case(AMK_DTYPE_F32, AMK_DTYPE_I4, 33, 10.0f);   /* odd nibble count: atomics */
    copy_case(AMK_DTYPE_I4, AMK_DTYPE_F32, 33, 1.0f);
    copy_case(AMK_DTYPE_I4, AMK_DTYPE_I4, 101, 1.0f);
    copy_case(AMK_DTYPE_U8, AMK_DTYPE_F16, 100, 255.0f);
    copy_case(AMK_DTYPE_F32, AMK_DTYPE_BOOL, 64, 1.0f);
    copy_case(AMK_DTYPE_I32, AMK_DTYPE_F32, 100, 100000.0f);
    copy_case(AMK_DTYPE_F32, AMK_DTYPE_I32, 100, 3e9f); /* saturates */
    copy_case(AMK_DTYPE_F32, AMK_DTYPE_U8, 100, 300.0f);
}

/* EMBED of n ids into table [V, H]; hidden: the param (a row is the table's H elements whatever it
   says: the spec's reference implementation reads it so) */
static void embed_case(amk_dtype ids_t, amk_dtype tab_t, amk_dtype out_t, int64_t V, int64_t H, int64_t n,
                       int64_t hidden) {
    amk_program *p = prog_new(2);
    int ids = buf(p, "ids", AMK_KIND_IO_INPUT, ids_t, 1, n, 0, 0);
    int tab = buf(p, "table", AMK_KIND_WEIGHT, tab_t, 2, V, H, 0);
    int y = buf(p, "y", AMK_KIND_IO_OUTPUT, out_t, 2, n, H, 0);
    int in[2], t, i;
    gcase g;
    in[0] = ids; in[1] = tab;
    t = task(p, AMK_OP_EMBED, in, 2, y, amk_program_add_counter(p, ""), 1);
    seti(p, t, "hidden", hidden);
    if (gcase_begin(&g, p, "EMBED", 1.0f)) {
        void *idv = amk_refvm_buffer(g.vm, ids, NULL);
        for (i = 0; i < n; i++) amk__store_i64(idv, ids_t, i, (int64_t)(amk_t_rng_next(&g.rng) % (uint64_t)V));
        amk__store_i64(idv, ids_t, n - 1, V - 1); /* the last row too */
        gcase_sync(&g, ids);
        if (gcase_run(&g, "EMBED")) gcase_compare(&g, y, 0.0, 0.0, "EMBED");
    }
    gcase_end(&g);
}

/* EMBED of 7 ids in tasks of rows [0, 2), [2, 5), [6, 7) on three SMs (a prefill chunk's
   embedding; row 5 left alone), from table tab_t; exact as embed_case. The prefill and portable
   images run them (amk_plan_prefill_only). */
static void embed_rows_case(amk_dtype tab_t, amk_dtype out_t, int64_t H) {
    static const int64_t off[3] = {0, 2, 6}, len[3] = {2, 3, 1};
    const int64_t V = 40, n = 7;
    amk_program *p = prog_new(3);
    int ids = buf(p, "ids", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, n, 0, 0);
    int tab = buf(p, "table", AMK_KIND_WEIGHT, tab_t, 2, V, H, 0);
    int y = buf(p, "y", AMK_KIND_IO_OUTPUT, out_t, 2, n, H, 0);
    int in[2], c = amk_program_add_counter(p, ""), k, t, i;
    char tag[64];
    gcase g;
    in[0] = ids; in[1] = tab;
    for (k = 0; k < 3; k++) {
        t = task(p, AMK_OP_EMBED, in, 2, y, c, k);
        seti(p, t, "hidden", H);
        seti(p, t, "m_off", off[k]);
        seti(p, t, "M_tile", len[k]);
    }
    snprintf(tag, sizeof tag, "EMBED rows %s->%s", amk_dtype_name(tab_t), amk_dtype_name(out_t));
    if (gcase_begin(&g, p, tag, 1.0f)) {
        void *idv = amk_refvm_buffer(g.vm, ids, NULL);
        for (i = 0; i < n; i++) amk__store_i64(idv, AMK_DTYPE_I32, i, (int64_t)(amk_t_rng_next(&g.rng) % (uint64_t)V));
        amk__store_i64(idv, AMK_DTYPE_I32, n - 1, V - 1); /* the last row too */
        gcase_sync(&g, ids);
        if (gcase_run(&g, tag)) gcase_compare(&g, y, 0.0, 0.0, tag);
    }
    gcase_end(&g);
}

static void test_embed_rows(void) {
    embed_rows_case(AMK_DTYPE_BF16, AMK_DTYPE_BF16, 2048);
    embed_rows_case(AMK_DTYPE_F32, AMK_DTYPE_BF16, 72);
    embed_rows_case(AMK_DTYPE_Q4_K, AMK_DTYPE_BF16, 512);
    embed_rows_case(AMK_DTYPE_Q6_K, AMK_DTYPE_F16, 512);
}

static void test_embed(void) {
    embed_case(AMK_DTYPE_I32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 37, 72, 5, 72);
    embed_case(AMK_DTYPE_U8, AMK_DTYPE_F32, AMK_DTYPE_BF16, 200, 576, 3, 576);
    /* why: one dtype, rows of whole 16-byte pieces (the decode step's copy), and of not whole */
    embed_case(AMK_DTYPE_I32, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 1000, 2048, 2, 2048);
    embed_case(AMK_DTYPE_I32, AMK_DTYPE_F32, AMK_DTYPE_F32, 50, 20, 3, 20);
    embed_case(AMK_DTYPE_I32, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 50, 36, 3, 36);
    /* the reshape idiom: rows of 72 with hidden 8 (F32 ids: the spec's reference takes them too) */
    embed_case(AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 6, 72, 4, 8);
    /* every GGUF block format: rows of whole blocks decoded bit for bit as the reference's */
    for (int t = AMK_DTYPE_Q8_0; t < AMK_DTYPE_COUNT; t++)
        embed_case(AMK_DTYPE_I32, (amk_dtype)t, t % 2 ? AMK_DTYPE_F32 : AMK_DTYPE_BF16, 40, 512, 3, 512);
}

/* A norm of rows x [rows, H]; the weights (and bias) wrows rows of H: row r uses row r % wrows */
static void norm_case(amk_opcode op, amk_dtype xt, amk_dtype wt, amk_dtype ot, int64_t rows, int64_t H, int bias,
                      int64_t wrows) {
    amk_program *p = prog_new(1);
    int in[3], y, t;
    in[0] = buf(p, "x", AMK_KIND_IO_INPUT, xt, 2, rows, H, 0);
    in[1] = buf(p, "w", AMK_KIND_WEIGHT, wt, 2, wrows, H, 0);
    in[2] = buf(p, "b", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 2, wrows, H, 0);
    y = buf(p, "y", AMK_KIND_IO_OUTPUT, ot, 2, rows, H, 0);
    t = task(p, op, in, bias ? 3 : 2, y, amk_program_add_counter(p, ""), 0);
    seti(p, t, "hidden", H);
    setf(p, t, "eps", 1e-5);
    check_program(p, amk_op_name(op), 2.0f, -1, -1);
}

static void test_rmsnorm(void) {
    norm_case(AMK_OP_RMSNORM, AMK_DTYPE_BF16, AMK_DTYPE_F32, AMK_DTYPE_BF16, 3, 576, 0, 1);
    norm_case(AMK_OP_RMSNORM, AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 1, 4096, 0, 1);
    norm_case(AMK_OP_RMSNORM, AMK_DTYPE_F16, AMK_DTYPE_F16, AMK_DTYPE_F16, 2, 100, 0, 1);
    norm_case(AMK_OP_RMSNORM, AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 6, 64, 0, 3); /* a weight row a row mod 3 */
}

static void test_layernorm(void) {
    norm_case(AMK_OP_LAYERNORM, AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 2, 300, 1, 1);
    norm_case(AMK_OP_LAYERNORM, AMK_DTYPE_BF16, AMK_DTYPE_F32, AMK_DTYPE_F16, 3, 768, 0, 1);
    norm_case(AMK_OP_LAYERNORM, AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 4, 96, 1, 2);
}

/* One GEMV/GEMM tile case: out [M, N] = x [M, K] @ W[n_off:n_off+N_tile].T (GEMM_TILE: rows
   [m_off, m_off+M_tile)); fields left out are 0. quant: 0 none, 6 I8, 7 I4 (wt I4 or U8), with
   scales of dtype st per group columns (and F32 zeros when zeros); bias: an F32 bias [N];
   threads: the block size (0: the default). */
typedef struct gemv_spec {
    amk_opcode op;
    amk_dtype xt, wt, ot, st;
    int64_t M, N, K, n_off, N_tile, group, m_off, M_tile, k_off, K_tile;
    int bias, quant, zeros, threads, xq8;
} gemv_spec;

static void gemv_case(const char *tag, gemv_spec c) {
    amk_program *p = prog_new(3);
    int in[4], ni = 2, y, t;
    in[0] = buf(p, "x", AMK_KIND_IO_INPUT, c.xt, 2, c.M, c.K, 0);
    in[1] = c.wt == AMK_DTYPE_U8 ? buf(p, "W", AMK_KIND_WEIGHT, c.wt, 2, c.N, c.K / 2, 0)
                                 : buf(p, "W", AMK_KIND_WEIGHT, c.wt, 2, c.N, c.K, 0);
    if (c.quant) {
        in[ni++] = buf(p, "scales", AMK_KIND_WEIGHT, c.st, 2, c.N, c.K / c.group, 0);
        if (c.zeros) in[ni++] = buf(p, "zeros", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 2, c.N, c.K / c.group, 0);
    } else if (c.bias) {
        in[ni++] = buf(p, "bias", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, c.N, 0, 0);
    }
    y = buf(p, "y", AMK_KIND_IO_OUTPUT, c.ot, 2, c.M, c.N, 0);
    t = task(p, c.op, in, ni, y, amk_program_add_counter(p, ""), 2);
    seti(p, t, "K", c.K);
    seti(p, t, "n_off", c.n_off);
    seti(p, t, "N_tile", c.N_tile);
    if (c.op == AMK_OP_GEMM_TILE) { seti(p, t, "m_off", c.m_off); seti(p, t, "M_tile", c.M_tile); }
    if (c.quant) { seti(p, t, "qdtype", c.quant); seti(p, t, "group", c.group); }
    if (c.xq8) seti(p, t, "x_q8", 1);
    if (c.K_tile) { seti(p, t, "k_off", c.k_off); seti(p, t, "K_tile", c.K_tile); }
    if (c.threads) p->config.threads_per_block = c.threads;
    check_program(p, tag, 1.0f, -1, -1);
}

static void test_gemv_tile(void) {
    gemv_case("GEMV bf16 tile", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_F32, .wt = AMK_DTYPE_BF16,
              .ot = AMK_DTYPE_F32, .M = 1, .N = 256, .K = 576, .n_off = 128, .N_tile = 64});
    gemv_case("GEMV f16 bias", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_BF16, .wt = AMK_DTYPE_F16,
              .ot = AMK_DTYPE_BF16, .M = 1, .N = 96, .K = 4096, .n_off = 0, .N_tile = 96, .bias = 1});
    gemv_case("GEMV f32 M=5", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_F32, .wt = AMK_DTYPE_F32,
              .ot = AMK_DTYPE_F32, .M = 5, .N = 70, .K = 100, .n_off = 3, .N_tile = 60});
    gemv_case("GEMV bf16 unaligned K", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_F32,
              .wt = AMK_DTYPE_BF16, .ot = AMK_DTYPE_F32, .M = 2, .N = 40, .K = 100, .n_off = 0, .N_tile = 40,
              .bias = 1});
    gemv_case("GEMV f8 weights", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_F16,
              .wt = AMK_DTYPE_F8E4M3, .ot = AMK_DTYPE_F32, .M = 1, .N = 32, .K = 64, .n_off = 0,
              .N_tile = 32});
    gemv_case("GEMV q8 zeros", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_F32, .wt = AMK_DTYPE_I8,
              .ot = AMK_DTYPE_F32, .M = 1, .N = 64, .K = 128, .n_off = 8, .N_tile = 48, .quant = 6,
              .group = 32, .st = AMK_DTYPE_F16, .zeros = 1});
    gemv_case("GEMV q4 odd K", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_BF16, .wt = AMK_DTYPE_I4,
              .ot = AMK_DTYPE_F32, .M = 2, .N = 48, .K = 65, .n_off = 0, .N_tile = 48, .quant = 7, .group = 13,
              .st = AMK_DTYPE_F32});
    gemv_case("GEMV q4 u8-packed", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_F32, .wt = AMK_DTYPE_U8,
              .ot = AMK_DTYPE_BF16, .M = 1, .N = 32, .K = 64, .n_off = 0, .N_tile = 32, .quant = 7,
              .group = 64, .st = AMK_DTYPE_BF16, .zeros = 1});
    gemv_case("GEMV f32 bias", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_BF16, .wt = AMK_DTYPE_F32,
              .ot = AMK_DTYPE_F32, .M = 1, .N = 100, .K = 256, .n_off = 4, .N_tile = 90, .bias = 1});
    /* short rows, a bf16 output and the bias; 150 rows leave the warps unequal counts */
    gemv_case("GEMV bf16 short rows bias", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_F32,
              .wt = AMK_DTYPE_BF16, .ot = AMK_DTYPE_BF16, .M = 1, .N = 200, .K = 576, .n_off = 3,
              .N_tile = 150, .bias = 1});
    gemv_case("GEMV bf16 128 rows bias", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_F32,
              .wt = AMK_DTYPE_BF16, .ot = AMK_DTYPE_F32, .M = 1, .N = 160, .K = 2048, .n_off = 16,
              .N_tile = 128, .bias = 1});
    /* every GGUF block format (the rows path): rows of 2 and 3 superblocks, a tile past row 0,
       the bias on some; a bf16 x */
    for (int t = AMK_DTYPE_Q8_0; t < AMK_DTYPE_COUNT; t++) {
        char tag[64];
        snprintf(tag, sizeof tag, "GEMV %s", amk_dtype_name(t));
        gemv_case(tag, (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = t % 3 ? AMK_DTYPE_F32 : AMK_DTYPE_BF16,
                  .wt = (amk_dtype)t, .ot = AMK_DTYPE_F32, .M = 1, .N = 70, .K = t % 2 ? 512 : 768, .n_off = 5,
                  .N_tile = 61, .bias = t % 2});
    }
    /* a 32-element format with K not a multiple of 128 (a lane's quads past the row's end) */
    gemv_case("GEMV Q4_0 K=96", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_F32, .wt = AMK_DTYPE_Q4_0,
              .ot = AMK_DTYPE_BF16, .M = 2, .N = 33, .K = 96, .n_off = 0, .N_tile = 33});
    if (!g_quick)
        gemv_case("GEMV bf16 large", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_F32,
                  .wt = AMK_DTYPE_BF16, .ot = AMK_DTYPE_F32, .M = 1, .N = 2048, .K = 2048, .n_off = 512,
                  .N_tile = 1024});
}

/* Rows below AMK_MMA_MIN_ROWS (4) or operands the tensor-core path does not take run the rows
   path; the others run wgmma (amk_gemm_mma): K tails past a 64 chunk, column blocks past N_tile,
   several 64-row blocks, every x dtype it splits or takes as is, 4 warpgroups. */
static void test_gemm_tile(void) {
    gemv_case("GEMM rows", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_F32, .wt = AMK_DTYPE_BF16,
              .ot = AMK_DTYPE_F32, .M = 6, .N = 64, .K = 128, .n_off = 16, .N_tile = 32, .m_off = 2,
              .M_tile = 3});
    gemv_case("GEMM f16 bias", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_BF16, .wt = AMK_DTYPE_F16,
              .ot = AMK_DTYPE_F16, .M = 9, .N = 40, .K = 256, .n_off = 0, .N_tile = 40, .bias = 1, .m_off = 4,
              .M_tile = 5});
    gemv_case("GEMM mma f32 x bias", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_F32,
              .wt = AMK_DTYPE_BF16, .ot = AMK_DTYPE_F32, .M = 80, .N = 200, .K = 136, .n_off = 5,
              .N_tile = 190, .bias = 1, .m_off = 3, .M_tile = 70});
    gemv_case("GEMM mma bf16", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_BF16, .wt = AMK_DTYPE_BF16,
              .ot = AMK_DTYPE_BF16, .M = 16, .N = 128, .K = 512, .n_off = 0, .N_tile = 128, .M_tile = 16});
    gemv_case("GEMM mma f16", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_F16, .wt = AMK_DTYPE_F16,
              .ot = AMK_DTYPE_F16, .M = 8, .N = 96, .K = 256, .n_off = 32, .N_tile = 64, .bias = 1,
              .M_tile = 8});
    gemv_case("GEMM mma f16 x", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_F16, .wt = AMK_DTYPE_BF16,
              .ot = AMK_DTYPE_F32, .M = 5, .N = 64, .K = 64, .n_off = 0, .N_tile = 64, .M_tile = 5});
    gemv_case("GEMM mma 512 threads", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_F32,
              .wt = AMK_DTYPE_BF16, .ot = AMK_DTYPE_BF16, .M = 130, .N = 300, .K = 1000, .n_off = 0,
              .N_tile = 300, .bias = 1, .m_off = 1, .M_tile = 129, .threads = 512});
    /* 16-bit x and W at 512 threads: the portable image's mma.sync blocks (amk_gemm_sync) with ragged
       edges (rows past 64, columns past 128, K past 32 in eights), elsewhere the wgmma path */
    gemv_case("GEMM sync bf16 edges", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_BF16, .wt = AMK_DTYPE_BF16,
              .ot = AMK_DTYPE_F32, .M = 70, .N = 200, .K = 136, .n_off = 5, .N_tile = 190, .bias = 1, .m_off = 3,
              .M_tile = 66, .threads = 512});
    gemv_case("GEMM sync f16", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_F16, .wt = AMK_DTYPE_F16,
              .ot = AMK_DTYPE_BF16, .M = 9, .N = 72, .K = 264, .n_off = 8, .N_tile = 64, .M_tile = 9, .threads = 512});
    gemv_case("GEMV mma K=4096", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_F32, .wt = AMK_DTYPE_BF16,
              .ot = AMK_DTYPE_F32, .M = 12, .N = 256, .K = 4096, .n_off = 64, .N_tile = 128});
    gemv_case("GEMM f32 W rows", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_F32, .wt = AMK_DTYPE_F32,
              .ot = AMK_DTYPE_F32, .M = 8, .N = 40, .K = 64, .n_off = 0, .N_tile = 40, .M_tile = 8});
    /* the rows path's tile of rows inside x's: the rows outside it keep their poison */
    gemv_case("GEMM f32 W inner rows", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_F32, .wt = AMK_DTYPE_F32,
              .ot = AMK_DTYPE_F32, .M = 9, .N = 40, .K = 64, .n_off = 0, .N_tile = 40, .m_off = 2, .M_tile = 3});
    /* 16-bit x and W, 512 threads: the prefill image's tensor-copy GEMM (amk_gemm_tma; the others
       run amk_gemm_mma): K tails past a 64 chunk, blocks past M_tile and N_tile, several blocks a
       tile, the bias, every output dtype, f16, the smallest tile */
    gemv_case("GEMM tma bf16 bias", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_BF16, .wt = AMK_DTYPE_BF16,
              .ot = AMK_DTYPE_F32, .M = 300, .N = 600, .K = 1000, .n_off = 7, .N_tile = 580, .bias = 1, .m_off = 5,
              .M_tile = 290, .threads = 512});
    gemv_case("GEMM tma f16 K=4096", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_F16, .wt = AMK_DTYPE_F16,
              .ot = AMK_DTYPE_BF16, .M = 64, .N = 256, .K = 4096, .n_off = 0, .N_tile = 256, .m_off = 0, .M_tile = 64,
              .threads = 512});
    gemv_case("GEMV tma f16 out", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_BF16, .wt = AMK_DTYPE_BF16,
              .ot = AMK_DTYPE_F16, .M = 130, .N = 520, .K = 576, .n_off = 0, .N_tile = 520, .threads = 512});
    gemv_case("GEMM tma tiny", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_BF16, .wt = AMK_DTYPE_BF16,
              .ot = AMK_DTYPE_F32, .M = 4, .N = 8, .K = 8, .n_off = 0, .N_tile = 8, .m_off = 0, .M_tile = 4,
              .threads = 512});
    /* tiles of at most AMK_TMA_WBOX columns: narrow blocks (64 x 64 a warpgroup) */
    gemv_case("GEMM tma narrow bf16 bias", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_BF16, .wt = AMK_DTYPE_BF16,
              .ot = AMK_DTYPE_F32, .M = 300, .N = 300, .K = 1000, .n_off = 7, .N_tile = 128, .bias = 1, .m_off = 5,
              .M_tile = 290, .threads = 512});
    gemv_case("GEMM tma narrow f16 K=4096", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_F16, .wt = AMK_DTYPE_F16,
              .ot = AMK_DTYPE_BF16, .M = 130, .N = 200, .K = 4096, .n_off = 64, .N_tile = 100, .m_off = 0, .M_tile = 130,
              .threads = 512});
    gemv_case("GEMV tma narrow", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_BF16, .wt = AMK_DTYPE_BF16,
              .ot = AMK_DTYPE_BF16, .M = 64, .N = 72, .K = 576, .n_off = 0, .N_tile = 72, .threads = 512});
    /* a K range (K_tile: a split-K tile, the prefill and portable images only): the tensor-copy GEMM's
       maps from k_off (prefill), the mma.sync blocks (portable); a range ending inside a 64 chunk; the
       rows path's vector loop (f32 W) and its scalar one (a range start off 16 bytes) */
    gemv_case("GEMM tma krange bf16", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_BF16, .wt = AMK_DTYPE_BF16,
              .ot = AMK_DTYPE_F32, .M = 130, .N = 200, .K = 4096, .n_off = 8, .N_tile = 128, .m_off = 1, .M_tile = 128,
              .k_off = 1024, .K_tile = 2048, .threads = 512});
    gemv_case("GEMM tma krange ragged f16", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_F16, .wt = AMK_DTYPE_F16,
              .ot = AMK_DTYPE_BF16, .M = 70, .N = 300, .K = 1000, .n_off = 0, .N_tile = 300, .m_off = 0, .M_tile = 70,
              .k_off = 392, .K_tile = 500, .threads = 512});
    gemv_case("GEMM rows krange f32 W", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_F32, .wt = AMK_DTYPE_F32,
              .ot = AMK_DTYPE_F32, .M = 9, .N = 40, .K = 1024, .n_off = 3, .N_tile = 30, .m_off = 2, .M_tile = 6,
              .k_off = 256, .K_tile = 512});
    gemv_case("GEMM rows krange unaligned", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_F32, .wt = AMK_DTYPE_BF16,
              .ot = AMK_DTYPE_F32, .M = 3, .N = 33, .K = 600, .n_off = 0, .N_tile = 33, .m_off = 0, .M_tile = 3,
              .k_off = 100, .K_tile = 301});
    /* block-format W with rows enough for the tensor cores: the rows path takes it */
    gemv_case("GEMM Q4_K rows", (gemv_spec){.op = AMK_OP_GEMM_TILE, .xt = AMK_DTYPE_BF16, .wt = AMK_DTYPE_Q4_K,
              .ot = AMK_DTYPE_F32, .M = 70, .N = 40, .K = 256, .n_off = 2, .N_tile = 30, .bias = 1, .m_off = 3,
              .M_tile = 66});
}

/* An attention case's buffers: in[0..2] = q [nh, hd], k and v caches [max_seq, nkv, hd]; returns
   out: [nh, hd] of ot, or the F32 partial [nh, hd + 2]. */
static int attn_bufs(amk_program *p, amk_dtype qt, amk_dtype kvt, amk_dtype ot, int nh, int nkv, int hd,
                     int max_seq, int partial, int *in) {
    in[0] = buf(p, "q", AMK_KIND_IO_INPUT, qt, 2, nh, hd, 0);
    in[1] = buf(p, "k", AMK_KIND_KV_CACHE, kvt, 3, max_seq, nkv, hd);
    in[2] = buf(p, "v", AMK_KIND_KV_CACHE, kvt, 3, max_seq, nkv, hd);
    return partial ? buf(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, nh, hd + 2, 0)
                   : buf(p, "y", AMK_KIND_IO_OUTPUT, ot, 2, nh, hd, 0);
}

/* The params ATTENTION_TILE and ATTENTION_DECODE share (scale 1/sqrt(hd)). */
static void attn_params(amk_program *p, int t, int nh, int nkv, int hd, int kv_start, int kv_len, int partial) {
    seti(p, t, "head_dim", hd);
    seti(p, t, "n_heads", nh);
    seti(p, t, "n_kv_heads", nkv);
    seti(p, t, "kv_start", kv_start);
    seti(p, t, "kv_len", kv_len);
    setf(p, t, "scale", 1.0 / sqrt((double)hd));
    if (partial) seti(p, t, "flags", AMK_ATTN_FLAG_PARTIAL);
}

static void attn_case(const char *tag, amk_dtype qt, amk_dtype kvt, amk_dtype ot, int nh, int nkv, int hd,
                      int max_seq, int kv_start, int kv_len, int partial) {
    amk_program *p = prog_new(2);
    int in[3], y = attn_bufs(p, qt, kvt, ot, nh, nkv, hd, max_seq, partial, in);
    int t = task(p, AMK_OP_ATTENTION_TILE, in, 3, y, amk_program_add_counter(p, ""), 1);
    attn_params(p, t, nh, nkv, hd, kv_start, kv_len, partial);
    check_program(p, tag, 1.0f, -1, 1e-5);
}

static void test_attention_tile(void) {
    attn_case("ATTN gqa bf16", AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 6, 2, 64, 100, 5, 70, 0);
    attn_case("ATTN gqa partial", AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 6, 2, 64, 100, 5, 70, 1);
    attn_case("ATTN empty", AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 4, 4, 32, 10, 3, 0, 0);
    attn_case("ATTN empty partial", AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 4, 4, 32, 10, 3, 0, 1);
    attn_case("ATTN hd256 f32", AMK_DTYPE_BF16, AMK_DTYPE_F32, AMK_DTYPE_F32, 2, 1, 256, 64, 0, 40, 0);
    attn_case("ATTN hd80 f16", AMK_DTYPE_F32, AMK_DTYPE_F16, AMK_DTYPE_F32, 12, 3, 80, 40, 7, 33, 0);
    attn_case("ATTN one key", AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 9, 3, 64, 8, 7, 1, 1);
    if (!g_quick) attn_case("ATTN long", AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 32, 8, 128, 4096, 0, 4000, 1);
}

/* factor > 0: llama3's scaling (rope_type 0), or rope_type's (1 linear, 2 yarn over 4096 positions). */
static void rope_case(const char *tag, amk_dtype xt, amk_dtype ot, int64_t S, int64_t heads, int64_t hd,
                      const int32_t *pos, double theta, double factor, int rope_type, double rtol) {
    amk_program *p = prog_new(1);
    int in[2], y, t;
    gcase g;
    in[0] = buf(p, "x", AMK_KIND_IO_INPUT, xt, 3, S, heads, hd);
    in[1] = buf(p, "pos", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, S, 0, 0);
    y = buf(p, "y", AMK_KIND_IO_OUTPUT, ot, 3, S, heads, hd);
    t = task(p, AMK_OP_ROPE, in, 2, y, amk_program_add_counter(p, ""), 0);
    seti(p, t, "head_dim", hd);
    setf(p, t, "theta", theta);
    if (factor > 0) {
        setf(p, t, "rope_factor", factor);
        setf(p, t, "rope_low_freq_factor", 1.0);
        setf(p, t, "rope_high_freq_factor", rope_type == 2 ? 32.0 : 4.0);
        seti(p, t, "rope_orig_ctx", rope_type == 2 ? 4096 : 8192);
        if (rope_type) seti(p, t, "rope_type", rope_type);
    }
    if (gcase_begin(&g, p, tag, 2.0f)) {
        gcase_set_i32(&g, in[1], pos, (int)S);
        /* why: |angle| error ~ pos * 1 ulp of inv_freq (libm vs device): scale the tolerance */
        if (gcase_run(&g, tag)) gcase_compare(&g, y, rtol, rtol, tag);
    }
    gcase_end(&g);
}

static void test_rope(void) {
    static const int32_t p1[1] = {37}, p3[3] = {0, 1000, 8191}, p9[1] = {5000};
    rope_case("ROPE f32", AMK_DTYPE_F32, AMK_DTYPE_F32, 1, 4, 64, p1, 10000.0, 0, 0, 2e-5);
    rope_case("ROPE bf16 seq", AMK_DTYPE_BF16, AMK_DTYPE_BF16, 3, 2, 128, p3, 500000.0, 0, 0, 1.6e-2);
    rope_case("ROPE f32 far", AMK_DTYPE_F32, AMK_DTYPE_F32, 3, 2, 128, p3, 500000.0, 0, 0, 1e-3);
    rope_case("ROPE llama3", AMK_DTYPE_F32, AMK_DTYPE_F32, 1, 2, 64, p9, 500000.0, 32.0, 0, 1e-3);
    rope_case("ROPE linear", AMK_DTYPE_F32, AMK_DTYPE_F32, 3, 2, 64, p3, 10000.0, 2.0, 1, 1e-3);
    rope_case("ROPE yarn", AMK_DTYPE_F32, AMK_DTYPE_F32, 3, 2, 128, p3, 1000000.0, 4.0, 2, 1e-3);
}

static void eltwise_case(const char *tag, amk_opcode op, int ni, amk_dtype at, amk_dtype bt, amk_dtype ot,
                         int64_t n, int64_t nb, float scale, double rtol, double atol_rel) {
    amk_program *p = prog_new(1);
    int in[3], y, t;
    in[0] = buf(p, "a", AMK_KIND_IO_INPUT, at, 1, n, 0, 0);
    in[1] = buf(p, "b", AMK_KIND_IO_INPUT, bt, 1, nb, 0, 0);
    in[2] = buf(p, "c", AMK_KIND_IO_INPUT, AMK_DTYPE_F16, 1, n, 0, 0);
    y = buf(p, "y", AMK_KIND_IO_OUTPUT, ot, 1, n, 0, 0);
    t = task(p, op, in, ni, y, amk_program_add_counter(p, ""), 0);
    if (op == AMK_OP_MUL && ni == 1) setf(p, t, "scale", 0.37);
    check_program(p, tag, scale, rtol, atol_rel);
}

/* ADD, SILU_MUL and RMSNORM over rows (a prefill chunk's form): three tasks on three SMs write
   rows [0, 2), [2, 5) and [5, 7) of out [7, 96]. */
static void rows_case(const char *tag, amk_opcode op, amk_dtype dt) {
    amk_program *p = prog_new(3);
    int in[2], y, t, k, c;
    in[0] = buf(p, "a", AMK_KIND_IO_INPUT, dt, 2, 7, 96, 0);
    in[1] = op == AMK_OP_RMSNORM ? buf(p, "w", AMK_KIND_WEIGHT, dt, 1, 96, 0, 0) : buf(p, "b", AMK_KIND_IO_INPUT, dt, 2, 7, 96, 0);
    y = buf(p, "y", AMK_KIND_IO_OUTPUT, dt, 2, 7, 96, 0);
    c = amk_program_add_counter(p, "");
    for (k = 0; k < 3; k++) {
        t = task(p, op, in, 2, y, c, k);
        if (op == AMK_OP_RMSNORM) { setf(p, t, "eps", 1e-5); seti(p, t, "hidden", 96); }
        seti(p, t, "m_off", k == 0 ? 0 : k == 1 ? 2 : 5);
        seti(p, t, "M_tile", k == 1 ? 3 : 2);
    }
    check_program(p, tag, 3.0f, dt == AMK_DTYPE_F32 ? 2e-5 : -1, dt == AMK_DTYPE_F32 ? 1e-6 : -1);
}

/* RMSNORM over rows with an F32 weight and x in out's dtype, as a prefill chunk's norms: tasks of
   1, 10 and 10 rows of out [21, H] on three SMs. */
static void norm_rows_case(const char *tag, amk_dtype dt, int64_t H) {
    amk_program *p = prog_new(3);
    int in[2], y, t, k, c;
    in[0] = buf(p, "x", AMK_KIND_IO_INPUT, dt, 2, 21, H, 0);
    in[1] = buf(p, "w", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, H, 0, 0);
    y = buf(p, "y", AMK_KIND_IO_OUTPUT, dt, 2, 21, H, 0);
    c = amk_program_add_counter(p, "");
    for (k = 0; k < 3; k++) {
        t = task(p, AMK_OP_RMSNORM, in, 2, y, c, k);
        setf(p, t, "eps", 1e-5);
        seti(p, t, "hidden", H);
        seti(p, t, "m_off", k == 0 ? 0 : k == 1 ? 1 : 11);
        seti(p, t, "M_tile", k == 0 ? 1 : 10);
    }
    check_program(p, tag, 3.0f, dt == AMK_DTYPE_F32 ? 2e-5 : -1, dt == AMK_DTYPE_F32 ? 1e-6 : -1);
}

/* ALLREDUCE_SHARD over rows, as a split-K projection's sum (amk_llama_build's short prefill chunks):
   a residual of dtype dt plus np F32 partials into out [R, H] of dt, by three tasks on three SMs
   (rows [0, 1), [1, R - 2), [R - 2, R)); H not a multiple of 8 takes the scalar loop. Exact: the
   sum goes in input order on both. The prefill and portable images run it. */
static void allreduce_rows_case(const char *tag, amk_dtype dt, int np, int64_t R, int64_t H) {
    amk_program *p = prog_new(3);
    int in[8], y, t, k, c;
    in[0] = buf(p, "resid", AMK_KIND_IO_INPUT, dt, 2, R, H, 0);
    for (k = 1; k <= np; k++) in[k] = buf(p, k == 1 ? "p1" : k == 2 ? "p2" : k == 3 ? "p3" : "p4", AMK_KIND_IO_INPUT,
                                          AMK_DTYPE_F32, 2, R, H, 0);
    y = buf(p, "y", AMK_KIND_IO_OUTPUT, dt, 2, R, H, 0);
    c = amk_program_add_counter(p, "");
    for (k = 0; k < 3; k++) {
        t = task(p, AMK_OP_ALLREDUCE_SHARD, in, 1 + np, y, c, k);
        seti(p, t, "m_off", k == 0 ? 0 : k == 1 ? 1 : R - 2);
        seti(p, t, "M_tile", k == 1 ? R - 3 : k == 0 ? 1 : 2);
    }
    check_program(p, tag, 3.0f, 0.0, 0.0);
}

static void test_elementwise(void) {
    allreduce_rows_case("ALLREDUCE rows bf16 4 partials", AMK_DTYPE_BF16, 4, 12, 4096);
    allreduce_rows_case("ALLREDUCE rows f16 2 partials", AMK_DTYPE_F16, 2, 7, 1000);
    allreduce_rows_case("ALLREDUCE rows f32 odd", AMK_DTYPE_F32, 3, 5, 97);
    norm_rows_case("RMSNORM rows bf16, f32 w", AMK_DTYPE_BF16, 4096);
    norm_rows_case("RMSNORM rows f16, f32 w", AMK_DTYPE_F16, 776);
    norm_rows_case("RMSNORM rows f32, f32 w", AMK_DTYPE_F32, 1000);
    rows_case("ADD rows bf16", AMK_OP_ADD, AMK_DTYPE_BF16);
    rows_case("SILU_MUL rows f32", AMK_OP_SILU_MUL, AMK_DTYPE_F32);
    rows_case("ADD rows f16", AMK_OP_ADD, AMK_DTYPE_F16); /* the 16-byte path of the prefill builds, f16 */
    rows_case("SILU_MUL rows f16", AMK_OP_SILU_MUL, AMK_DTYPE_F16);
    rows_case("RMSNORM rows bf16", AMK_OP_RMSNORM, AMK_DTYPE_BF16);
    rows_case("RMSNORM rows f32", AMK_OP_RMSNORM, AMK_DTYPE_F32);
    eltwise_case("SILU_MUL bf16", AMK_OP_SILU_MUL, 2, AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 1536, 1536, 6.0f, -1, -1);
    eltwise_case("SILU_MUL f32", AMK_OP_SILU_MUL, 2, AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 1000, 1000, 10.0f, 2e-5, 1e-6);
    eltwise_case("GELU f32", AMK_OP_GELU, 1, AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 1000, 1, 5.0f, 2e-5, 1e-6);
    eltwise_case("GELU f16", AMK_OP_GELU, 1, AMK_DTYPE_F16, AMK_DTYPE_F32, AMK_DTYPE_F16, 999, 1, 5.0f, -1, -1);
    eltwise_case("ADD f16+bf16", AMK_OP_ADD, 2, AMK_DTYPE_F16, AMK_DTYPE_BF16, AMK_DTYPE_F32, 777, 777, 4.0f, 0.0, 0.0);
    eltwise_case("ADD bf16 out", AMK_OP_ADD, 2, AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_BF16, 1000, 1000, 4.0f, 0.0, 0.0);
    eltwise_case("MUL", AMK_OP_MUL, 2, AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 500, 500, 3.0f, 0.0, 0.0);
    eltwise_case("MUL broadcast", AMK_OP_MUL, 2, AMK_DTYPE_BF16, AMK_DTYPE_F32, AMK_DTYPE_F32, 500, 1, 3.0f, 0.0, 0.0);
    eltwise_case("MUL scale", AMK_OP_MUL, 1, AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F16, 500, 1, 3.0f, 0.0, 0.0);
    eltwise_case("ALLREDUCE 3", AMK_OP_ALLREDUCE_SHARD, 3, AMK_DTYPE_BF16, AMK_DTYPE_F32, AMK_DTYPE_F32, 300, 300, 2.0f, 0.0, 0.0);
    eltwise_case("ALLREDUCE 1", AMK_OP_ALLREDUCE_SHARD, 1, AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_BF16, 300, 1, 2.0f, 0.0, 0.0);
    eltwise_case("BIAS_ADD bf16", AMK_OP_BIAS_ADD, 2, AMK_DTYPE_BF16, AMK_DTYPE_F32, AMK_DTYPE_BF16, 7 * 896, 896, 4.0f, -1, -1);
    eltwise_case("BIAS_ADD f32", AMK_OP_BIAS_ADD, 2, AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 3 * 1000, 1000, 4.0f, 0.0, 0.0);
}

static void dequant_case(const char *tag, amk_dtype qt, int qdtype, int64_t rows, int64_t cols, int64_t group,
                         amk_dtype st, int zeros, amk_dtype ot) {
    amk_program *p = prog_new(1);
    int64_t logical = qt == AMK_DTYPE_U8 ? rows * cols * 2 : rows * cols;
    int in[3], y, t;
    in[0] = buf(p, "q", AMK_KIND_WEIGHT, qt, 2, rows, cols, 0);
    in[1] = buf(p, "scales", AMK_KIND_WEIGHT, st, 1, logical / group, 0, 0);
    in[2] = buf(p, "zeros", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, logical / group, 0, 0);
    y = buf(p, "y", AMK_KIND_IO_OUTPUT, ot, 2, rows, logical / rows, 0);
    t = task(p, AMK_OP_DEQUANT, in, zeros ? 3 : 2, y, amk_program_add_counter(p, ""), 0);
    seti(p, t, "qdtype", qdtype);
    seti(p, t, "group", group);
    check_program(p, tag, 100.0f, 0.0, 0.0);
}

static void test_dequant(void) {
    dequant_case("DEQUANT i8 zeros", AMK_DTYPE_I8, 6, 4, 64, 16, AMK_DTYPE_F16, 1, AMK_DTYPE_F32);
    dequant_case("DEQUANT i4", AMK_DTYPE_I4, 7, 5, 24, 8, AMK_DTYPE_F32, 0, AMK_DTYPE_BF16);
    dequant_case("DEQUANT u8 packed", AMK_DTYPE_U8, 7, 2, 16, 32, AMK_DTYPE_BF16, 1, AMK_DTYPE_F32);
}

static void softmax_case(const char *tag, amk_dtype xt, amk_dtype ot, int rank, int64_t d0, int64_t d1, int64_t d2,
                         int dim, float scale) {
    amk_program *p = prog_new(1);
    int x = buf(p, "x", AMK_KIND_IO_INPUT, xt, rank, d0, d1, d2), y = buf(p, "y", AMK_KIND_IO_OUTPUT, ot, rank, d0, d1, d2);
    int t = task(p, AMK_OP_SOFTMAX, &x, 1, y, amk_program_add_counter(p, ""), 0);
    seti(p, t, "dim", dim);
    check_program(p, tag, scale, -1, 1e-6);
}

static void test_softmax(void) {
    softmax_case("SOFTMAX last", AMK_DTYPE_F32, AMK_DTYPE_F32, 3, 3, 5, 7, -1, 5.0f);
    softmax_case("SOFTMAX mid", AMK_DTYPE_F32, AMK_DTYPE_F32, 3, 3, 5, 7, 1, 5.0f);
    softmax_case("SOFTMAX first", AMK_DTYPE_BF16, AMK_DTYPE_F32, 3, 3, 5, 7, 0, 5.0f);
    softmax_case("SOFTMAX wide", AMK_DTYPE_BF16, AMK_DTYPE_BF16, 2, 2, 5000, 0, -1, 20.0f);
}

static void test_kv_append(void) {
    amk_program *p = prog_new(2);
    int nw = buf(p, "new", AMK_KIND_IO_INPUT, AMK_DTYPE_BF16, 2, 2, 64, 0);
    int cache = buf(p, "cache", AMK_KIND_KV_CACHE, AMK_DTYPE_F32, 3, 10, 2, 64);
    int nw2 = buf(p, "new2", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 3, 48, 0);
    int cache2 = buf(p, "cache2", AMK_KIND_KV_CACHE, AMK_DTYPE_BF16, 3, 7, 3, 48);
    int in[2], t;
    in[0] = nw; in[1] = cache;
    t = task(p, AMK_OP_KV_APPEND, in, 2, cache, amk_program_add_counter(p, ""), 0);
    seti(p, t, "pos", 7);
    in[0] = nw2; in[1] = cache2;
    t = task(p, AMK_OP_KV_APPEND, in, 2, cache2, amk_program_add_counter(p, ""), 1);
    seti(p, t, "pos", 6); /* the last row */
    check_program(p, "KV_APPEND", 2.0f, 0.0, 0.0); /* compares both whole caches: one row changed */
}

/* Four rows of 1000 logits (random below 10 in magnitude): row 0 a tie of 50 at 17 and tie (the
   first index wins), row 1 NaN every third column and 40 at 999 (NaN never wins), row 2 all NaN
   (-> 0), row 3 all -inf (-> the first). argmax_rows_check: the GPU's tokens for them. */
static void argmax_rows(float *l, int tie) {
    int i;
    l[17] = l[tie] = 50.0f;
    for (i = 1000; i < 2000; i += 3) l[i] = NAN;
    l[1000 + 999] = 40.0f;
    for (i = 2000; i < 3000; i++) l[i] = NAN;
    for (i = 3000; i < 4000; i++) l[i] = -INFINITY;
}
static void argmax_rows_check(gcase *g, int y) {
    int32_t tok[4];
    CHECK_EQ_INT(amk_cuda_download(g->cu, y, tok, sizeof tok, NULL), AMK_OK);
    CHECK_EQ_INT(tok[0], 17);
    CHECK_EQ_INT(tok[1], 999); /* the index within the row */
    CHECK_EQ_INT(tok[2], 0);
    CHECK_EQ_INT(tok[3], 0);
}

/* Element 0 of the GPU's index output y is want. */
static void check_first_token(gcase *g, int y, int32_t want) {
    int32_t tok = -1;
    CHECK_EQ_INT(amk_cuda_download(g->cu, y, &tok, sizeof tok, NULL), AMK_OK);
    CHECK_EQ_INT(tok, want);
}

static void test_sample_argmax(void) {
    amk_program *p = prog_new(1);
    int x = buf(p, "logits", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 4, 1000, 0);
    int y = buf(p, "tok", AMK_KIND_IO_OUTPUT, AMK_DTYPE_I32, 1, 4, 0, 0);
    int x2 = buf(p, "logits2", AMK_KIND_IO_INPUT, AMK_DTYPE_BF16, 2, 1, 49152, 0);
    int y2 = buf(p, "tok2", AMK_KIND_IO_OUTPUT, AMK_DTYPE_U8, 1, 1, 0, 0);
    int x3 = buf(p, "logits3", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 1, 65536, 0);
    int y3 = buf(p, "tok3", AMK_KIND_IO_OUTPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
    gcase g;
    task(p, AMK_OP_SAMPLE_ARGMAX, &x, 1, y, amk_program_add_counter(p, ""), 0);
    task(p, AMK_OP_SAMPLE_ARGMAX, &x2, 1, y2, amk_program_add_counter(p, ""), 0);
    task(p, AMK_OP_SAMPLE_ARGMAX, &x3, 1, y3, amk_program_add_counter(p, ""), 0);
    if (gcase_begin(&g, p, "ARGMAX", 10.0f)) {
        float *l = (float *)amk_refvm_buffer(g.vm, x, NULL);
        void *l2 = amk_refvm_buffer(g.vm, x2, NULL);
        argmax_rows(l, 500);
        amk__store_f32(l2, AMK_DTYPE_BF16, 40000, 77.0f); /* tok2 = 40000 saturates to 255 in U8 */
        { /* a tie across one thread's load chains (float4 j, j + NT, ... at any block size up to
             1024): the smallest index wins */
            float *l3 = (float *)amk_refvm_buffer(g.vm, x3, NULL);
            l3[8194] = l3[4097] = l3[2049] = 60.0f;
            l3[1] = NAN;
        }
        gcase_sync_inputs(&g);
        if (gcase_run(&g, "ARGMAX")) {
            gcase_compare_outputs(&g, 0.0, 0.0, "ARGMAX");
            check_first_token(&g, y3, 2049);
            argmax_rows_check(&g, y);
        }
    }
    gcase_end(&g);
}

/* ATTENTION_COMBINE on nh heads of head_dim hd from P inputs of k stacked partial sets each (one
   set empty for head 1, every one empty for head 3), to F32 and BF16, each by `tiles` tasks of
   nh / tiles heads (N_tile; 1: one task, no N_tile). */
static void attention_combine_case(int nh, int hd, int P, int k, int tiles, const char *name) {
    amk_program *p = prog_new(tiles);
    int in[AMK_MAX_INPUTS], y, y2, i, t, j, o, c = amk_program_add_counter(p, "");
    gcase g;
    for (i = 0; i < P; i++) in[i] = buf(p, "partial", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, k * nh, hd + 2, 0);
    y = buf(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, nh, hd, 0);
    y2 = buf(p, "y2", AMK_KIND_IO_OUTPUT, AMK_DTYPE_BF16, 2, nh, hd, 0);
    for (j = 0; j < tiles; j++)
        for (o = 0; o < 2; o++) { /* y, then y2 */
            t = task(p, AMK_OP_ATTENTION_COMBINE, in, P, o ? y2 : y, c, j);
            seti(p, t, "head_dim", hd);
            if (tiles > 1) { seti(p, t, "n_off", j * (nh / tiles)); seti(p, t, "N_tile", nh / tiles); }
        }
    if (gcase_begin(&g, p, name, 1.0f)) {
        for (i = 0; i < P; i++) {
            float *pp = (float *)amk_refvm_buffer(g.vm, in[i], NULL);
            int h;
            for (h = 0; h < k * nh; h++) {
                pp[h * (hd + 2) + hd] = 2.0f * amk_t_rng_sym(&g.rng);         /* m */
                pp[h * (hd + 2) + hd + 1] = 1.5f + amk_t_rng_sym(&g.rng);     /* l > 0 */
            }
            if (i == 1) { pp[1 * (hd + 2) + hd] = -INFINITY; pp[1 * (hd + 2) + hd + 1] = 0.0f; } /* empty */
            for (j = 0; j < k; j++) { /* head 3: every partial empty -> zeros */
                pp[(j * nh + 3) * (hd + 2) + hd] = -INFINITY;
                pp[(j * nh + 3) * (hd + 2) + hd + 1] = 0.0f;
            }
            gcase_sync(&g, in[i]);
        }
        if (gcase_run(&g, name)) {
            gcase_compare(&g, y, 2e-5, 1e-6, name);
            gcase_compare(&g, y2, -1, -1, name);
        }
    }
    gcase_end(&g);
}

/* why these shapes: the pair loads in one round (4 x 64), in several rounds from the most partials
   (Llama-3-8B's 32 x 128 from 8 splits), an odd head_dim (one element a load); stacked sets (8B at
   context 4096: 16 splits, 8 inputs of 2 sets, a task a kv head's 4 heads; 3 sets of 5 inputs) */
static void test_attention_combine(void) {
    attention_combine_case(4, 64, 3, 1, 1, "COMBINE");
    attention_combine_case(32, 128, AMK_MAX_INPUTS, 1, 1, "COMBINE 32x128 8 partials");
    attention_combine_case(5, 7, 2, 1, 1, "COMBINE odd head_dim");
    attention_combine_case(32, 128, AMK_MAX_INPUTS, 2, 8, "COMBINE 8B 16 splits, 8 tiles");
    attention_combine_case(9, 64, 5, 3, 3, "COMBINE 3 sets, 3 tiles");
    attention_combine_case(6, 7, 2, 4, 2, "COMBINE odd head_dim, 4 sets, 2 tiles");
}

/* A layer's split attention as the builder writes it for S splits of `window` rows over a cache of
   max_seq rows at position pos: ATTENTION_DECODE a kv head a split, split j writing set j / nb of
   partial buffer j % nb (nb = min(S, 8) buffers of S / nb sets), then a COMBINE task a kv head
   (N_tile its query heads), each on its own SM; partials and output against the reference VM. */
static void split_attention_case(const char *tag, int nh, int nkv, int hd, int max_seq, int S, int32_t pos) {
    const int nb = S < 8 ? S : 8, sets = S / nb, window = (max_seq + S - 1) / S, grp = nh / nkv;
    amk_program *p = prog_new(8);
    int in[4], parts[8], o, t, j, g, n = 0, catt = amk_program_add_counter(p, "partials");
    int cout = amk_program_add_counter(p, "out");
    gcase gc;
    in[0] = buf(p, "q", AMK_KIND_IO_INPUT, AMK_DTYPE_BF16, 2, nh, hd, 0);
    in[1] = buf(p, "k", AMK_KIND_KV_CACHE, AMK_DTYPE_BF16, 3, max_seq, nkv, hd);
    in[2] = buf(p, "v", AMK_KIND_KV_CACHE, AMK_DTYPE_BF16, 3, max_seq, nkv, hd);
    in[3] = buf(p, "pos", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
    o = buf(p, "out", AMK_KIND_IO_OUTPUT, AMK_DTYPE_BF16, 2, nh, hd, 0);
    for (j = 0; j < nb; j++) parts[j] = buf(p, "partial", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, sets * nh, hd + 2, 0);
    for (j = 0; j < S; j++)
        for (g = 0; g < nkv; g++) {
            const int start = j * window, len = max_seq - start < window ? max_seq - start : window;
            t = task(p, AMK_OP_ATTENTION_DECODE, in, 4, parts[j % nb], catt, n++ % 8);
            attn_params(p, t, nh, nkv, hd, start, len, 1);
            seti(p, t, "n_off", g);
            seti(p, t, "N_tile", 1);
            if (sets > 1) seti(p, t, "part", j / nb);
        }
    for (g = 0; g < nkv; g++) {
        t = task(p, AMK_OP_ATTENTION_COMBINE, parts, nb, o, cout, g % 8);
        seti(p, t, "head_dim", hd);
        seti(p, t, "n_off", g * grp);
        seti(p, t, "N_tile", grp);
        amk_task_add_wait(p, t, catt, n);
    }
    if (gcase_begin(&gc, p, tag, 1.0f)) {
        gcase_set_i32(&gc, in[3], &pos, 1);
        if (gcase_run(&gc, tag)) {
            for (j = 0; j < nb; j++) gcase_compare(&gc, parts[j], 1e-4, 1e-5, tag);
            gcase_compare(&gc, o, -1, 1e-3, tag);
        }
    }
    gcase_end(&gc);
}

/* the 8B's heads at 4096 rows in 16 splits (windows of 256: the tensor cores; pos inside the last
   split, and one in the fifth, so that later splits are empty), 24 splits over 300 rows with the
   CUDA cores' head_dim (72), 4 splits (one set each) */
static void test_split_attention(void) {
    split_attention_case("SPLIT 8B 16 splits", 32, 8, 128, 4096, 16, 4095);
    split_attention_case("SPLIT 8B 16 splits, pos 1100", 32, 8, 128, 4096, 16, 1100);
    split_attention_case("SPLIT 24 splits hd72", 12, 3, 72, 300, 24, 290);
    split_attention_case("SPLIT 4 splits", 9, 3, 64, 500, 4, 333);
}

/* ---- AMK's fused opcodes ------------------------------------------------------------------------- */

/* With ARGMAX: the pairs the device wrote (partials pp [M, 4], tile i's pair i) are exactly the max
   of the logits it stored in its tile (y [M, N], tile 0 columns [0, half)) and the first index. */
static void check_argmax_pairs(gcase *g, int y, int pp, int64_t M, int64_t N, int64_t half, const char *tag) {
    const amk_buffer *yb = &g->p->buffers[y];
    const size_t ny = (size_t)amk__buffer_nbytes(yb);
    void *ys = malloc(ny);
    float *pr = (float *)malloc((size_t)M * 4 * sizeof(float));
    int64_t m, n, bad = 0;
    if (!ys || !pr) { CHECK(0); free(ys); free(pr); return; }
    CHECK_EQ_INT(amk_cuda_download(g->cu, y, ys, ny, &g->d), AMK_OK);
    CHECK_EQ_INT(amk_cuda_download(g->cu, pp, pr, (size_t)M * 4 * sizeof(float), &g->d), AMK_OK);
    for (m = 0; m < M; m++) {
        int i;
        for (i = 0; i < 2; i++) {
            const int64_t n0 = i ? half : 0, n1 = i ? N : half;
            int64_t best = n0;
            for (n = n0 + 1; n < n1; n++)
                if (amk__load_f32(ys, yb->dtype, m * N + n) > amk__load_f32(ys, yb->dtype, m * N + best)) best = n;
            if (pr[m * 4 + 2 * i] != amk__load_f32(ys, yb->dtype, m * N + best) || pr[m * 4 + 2 * i + 1] != (float)best) {
                if (!bad) fprintf(stderr, "  %s: row %lld tile %d: pair (%g, %g), its logits give (%g, %lld)\n", tag,
                                  (long long)m, i, pr[m * 4 + 2 * i], pr[m * 4 + 2 * i + 1],
                                  amk__load_f32(ys, yb->dtype, m * N + best), (long long)best);
                bad++;
            }
        }
    }
    CHECK_MSG(bad == 0, "%s: %lld argmax pairs differ from the stored logits", tag, (long long)bad);
    free(ys);
    free(pr);
}

/* RMSNORM_GEMV (flags: 1 RoPE, 2 KV row, 4 ARGMAX) or RMSNORM_SWIGLU tiles, two tasks on two SMs
   splitting N, against the reference VM; positions set by hand (random ones could leave the cache).
   Blocks of g_fused_threads threads (0: the runtime's default); with g_fused_rows, each half of N in
   tasks of that many rows of x (M_tile), alternating between the SMs. */
static int g_fused_threads;
static int64_t g_fused_rows;
static amk_dtype g_fused_up; /* RMSNORM_SWIGLU's up dtype when not F32 (0): else wt */
static int g_fused_xq8;       /* 1: the tiles take x_q8 (x rounded to 8 bits a unit) */
static amk_dtype g_fused_norm; /* the norm weight's dtype when not F32 (0) */
static void fused_case(const char *tag, amk_opcode op, int flags, amk_dtype xt, amk_dtype wt, amk_dtype ot, int64_t M,
                       int64_t N, int64_t K, int64_t hd, const int32_t *pos, int64_t cache_rows, double rtol) {
    amk_program *p = prog_new(2);
    int in[4], ni = 3, y, pp = -1, t, i, c = amk_program_add_counter(p, "");
    const int pflags = flags & (AMK_GEMV_FLAG_ROPE | AMK_GEMV_FLAG_KV_ROW); /* the flags that take positions */
    const int64_t half = (N / 2) & ~(int64_t)1; /* why: even, so RoPE pairs stay in one tile */
    gcase g;
    in[0] = buf(p, "x", AMK_KIND_IO_INPUT, xt, 2, M, K, 0);
    in[1] = buf(p, "norm_w", AMK_KIND_WEIGHT, g_fused_norm ? g_fused_norm : AMK_DTYPE_F32, 1, K, 0, 0);
    in[2] = buf(p, "W", AMK_KIND_WEIGHT, wt, 2, N, K, 0);
    if (op == AMK_OP_RMSNORM_SWIGLU) in[ni++] = buf(p, "W_up", AMK_KIND_WEIGHT, g_fused_up ? g_fused_up : wt, 2, N, K, 0);
    if (pflags) in[ni++] = buf(p, "pos", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, M, 0, 0);
    y = (flags & AMK_GEMV_FLAG_KV_ROW) ? buf(p, "cache", AMK_KIND_KV_CACHE, ot, 2, cache_rows, N, 0)
                                       : buf(p, "y", AMK_KIND_IO_OUTPUT, ot, 2, M, N, 0);
    if (flags & AMK_GEMV_FLAG_ARGMAX) pp = buf(p, "partials", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, M, 4, 0);
    if (g_fused_threads) p->config.threads_per_block = g_fused_threads;
    for (i = 0; i < 2; i++) {
        int64_t m0;
        for (m0 = 0; m0 < M; m0 += g_fused_rows ? g_fused_rows : M) {
            int outs[2];
            outs[0] = y;
            outs[1] = pp;
            t = amk_program_add_task(p, amk_op_variant(op, (uint32_t)flags), in, ni, outs, pp >= 0 ? 2 : 1, c, amk_op_name(op));
            if (t >= 0) p->tasks[t].sm = t % 2;
            setf(p, t, "eps", 1e-5);
            seti(p, t, "K", K);
            seti(p, t, "n_off", i ? half : 0);
            seti(p, t, "N_tile", i ? N - half : half);
            if (g_fused_rows) {
                seti(p, t, "m_off", m0);
                seti(p, t, "M_tile", M - m0 < g_fused_rows ? M - m0 : g_fused_rows);
            }
            if (pp >= 0) seti(p, t, "part", i);
            if (flags & AMK_GEMV_FLAG_ROPE) { seti(p, t, "head_dim", hd); setf(p, t, "theta", 500000.0); }
            if (g_fused_xq8) seti(p, t, "x_q8", 1);
        }
    }
    if (gcase_begin(&g, p, tag, 1.0f)) {
        if (pflags) gcase_set_i32(&g, in[ni - 1], pos, (int)M);
        if (gcase_run(&g, tag)) {
            gcase_compare(&g, y, rtol, rtol, tag);
            if (pp >= 0) check_argmax_pairs(&g, y, pp, M, N, half, tag);
        }
    }
    gcase_end(&g);
}

/* RMSNORM_GEMV and its RoPE and KV forms in tasks of rows (M_tile), as a prefill chunk's q, k and v
   (the prefill image only; the others refuse them, a skip by design): bf16 or f16 x and W with
   512 threads (the tensor-copy form, where x * norm_w is rounded to x's dtype before the MMA: that
   dtype's tolerance), a row tile past a block of 128 and one inside it, and an F32 x (the general form).
   Then a KV form's tiles whose positions are not pos[0] + m: a run-time error naming one of them on
   the GPU and on the reference VM, the device usable after. */
static void test_fused_gemv_rows(void) {
    static int32_t pc[300];
    int i;
    for (i = 0; i < 300; i++) pc[i] = 7 + i;
    g_fused_threads = 512;
    g_fused_rows = 128;
    fused_case("NORM_GEMV rows rope kv bf16", AMK_OP_RMSNORM_GEMV, 3, AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 300, 256, 512,
               64, pc, 320, -1);
    fused_case("NORM_GEMV rows rope bf16", AMK_OP_RMSNORM_GEMV, 1, AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_F32, 200, 192, 256,
               64, pc, 0, 1.6e-2);
    /* tiles of 256 columns: the tensor-copy form's wide blocks (those above, of 64 and 128, its
       narrow ones) */
    fused_case("NORM_GEMV rows rope kv bf16 wide", AMK_OP_RMSNORM_GEMV, 3, AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 300,
               512, 512, 128, pc, 320, -1);
    /* f16 x and W: the tensor-copy form too, x * norm_w rounded to f16 */
    fused_case("NORM_GEMV rows rope kv f16", AMK_OP_RMSNORM_GEMV, 3, AMK_DTYPE_F16, AMK_DTYPE_F16, AMK_DTYPE_F16, 300, 256, 512,
               64, pc, 320, 4e-3);
    fused_case("NORM_GEMV rows rope f16", AMK_OP_RMSNORM_GEMV, 1, AMK_DTYPE_F16, AMK_DTYPE_F16, AMK_DTYPE_F32, 200, 192, 256,
               64, pc, 0, 4e-3);
    g_fused_rows = 40;
    fused_case("NORM_GEMV rows 40 kv bf16", AMK_OP_RMSNORM_GEMV, 2, AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 130, 128, 256,
               0, pc, 140, -1);
    g_fused_threads = 0;
    g_fused_rows = 2;
    fused_case("NORM_GEMV rows f32 rope kv", AMK_OP_RMSNORM_GEMV, 3, AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 5, 64, 128, 32,
               pc, 12, -1);
    g_fused_rows = 0;
    {
        amk_program *p = prog_new(2);
        int in[4], y, t, m, c = amk_program_add_counter(p, "");
        static const int32_t gap[6] = {3, 4, 5, 9, 10, 11};
        gcase g;
        amk_refvm *vm = NULL;
        amk_diag d;
        p->config.threads_per_block = 512;
        in[0] = buf(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_BF16, 2, 6, 64, 0);
        in[1] = buf(p, "norm_w", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, 64, 0, 0);
        in[2] = buf(p, "W", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, 16, 64, 0);
        in[3] = buf(p, "pos", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 6, 0, 0);
        y = buf(p, "cache", AMK_KIND_KV_CACHE, AMK_DTYPE_BF16, 2, 16, 16, 0);
        for (m = 0; m < 6; m += 3) {
            t = task(p, AMK_OP_RMSNORM_GEMV_KV, in, 4, y, c, m / 3);
            setf(p, t, "eps", 1e-5);
            seti(p, t, "K", 64); seti(p, t, "n_off", 0); seti(p, t, "N_tile", 16);
            seti(p, t, "m_off", m); seti(p, t, "M_tile", 3);
        }
        amk_diag_clear(&d);
        CHECK_EQ_INT(amk_refvm_create(p, &vm, &d), AMK_OK);
        if (vm) {
            memcpy(amk_refvm_buffer(vm, in[3], NULL), gap, sizeof gap);
            CHECK_EQ_INT(amk_refvm_run(vm, NULL, &d), AMK_ERR_RUNTIME);
            CHECK_MSG(strstr(d.message, "pos[0] + 3") != NULL, "reference VM: %s", d.message);
            amk_refvm_free(vm);
        }
        if (gcase_begin(&g, p, "rows positions", 1.0f)) {
            amk_result r;
            CHECK_EQ_INT(amk_cuda_upload(g.cu, in[3], gap, sizeof gap, NULL), AMK_OK);
            r = amk_cuda_run(g.cu, 5000.0 * g_slow, &g.d);
            CHECK_EQ_INT(r, AMK_ERR_RUNTIME);
            CHECK_MSG(g.d.task == 1 && strstr(g.d.message, "not pos[0] + m): 9"), "task %d: %s", g.d.task, g.d.message);
            for (m = 0; m < 6; m++) amk__store_i64(amk_refvm_buffer(g.vm, in[3], NULL), AMK_DTYPE_I32, m, 2 + m);
            gcase_sync(&g, in[3]);
            if (gcase_run(&g, "rows positions, then good")) gcase_compare(&g, y, -1, -1, "rows positions cache");
        }
        gcase_end(&g);
    }
}

static void test_fused_gemv(void) {
    static const int32_t p1[1] = {37}, p3[3] = {0, 1000, 5}, pk[1] = {6};
    int f;
    /* 100 short bf16 rows a task: the two-rows-a-pass path, with odd row counts on some warps */
    fused_case("NORM_GEMV bf16", AMK_OP_RMSNORM_GEMV, 0, AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 1, 200, 576, 0, NULL, 0, -1);
    fused_case("NORM_GEMV f32 M=3", AMK_OP_RMSNORM_GEMV, 0, AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 3, 70, 100, 0, NULL, 0, -1);
    fused_case("NORM_GEMV f16 odd K", AMK_OP_RMSNORM_GEMV, 0, AMK_DTYPE_F32, AMK_DTYPE_F16, AMK_DTYPE_F32, 1, 40, 99, 0, NULL, 0, -1);
    fused_case("NORM_GEMV rope", AMK_OP_RMSNORM_GEMV, 1, AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_F32, 1, 256, 512, 64, p1, 0, 1e-3);
    fused_case("NORM_GEMV rope M=3", AMK_OP_RMSNORM_GEMV, 1, AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 3, 128, 256, 128, p3, 0, 1e-3);
    fused_case("NORM_GEMV rope kv", AMK_OP_RMSNORM_GEMV, 3, AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 1, 192, 576, 64, pk, 9, -1);
    fused_case("NORM_GEMV rope kv K=2048", AMK_OP_RMSNORM_GEMV, 3, AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 1, 256, 2048, 128, pk, 9, -1);
    fused_case("NORM_GEMV kv rows", AMK_OP_RMSNORM_GEMV, 2, AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 3, 64, 128, 0, p3 + 0, 1001, -1);
    /* tiles of at most two rows a warp (one warp fewer with RoPE) and an F32 x: the lean form
       (amk_norm_gemv_lean): RoPE pairs over three heads, K = 768 with 24 rows, an odd tile (a warp
       with one row) */
    fused_case("NORM_GEMV lean rope kv", AMK_OP_RMSNORM_GEMV, 3, AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 1, 48, 576, 16, pk, 9, -1);
    fused_case("NORM_GEMV lean rope K=768", AMK_OP_RMSNORM_GEMV, 1, AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 1, 48, 768, 16, p1, 0, 1e-3);
    fused_case("NORM_GEMV lean odd tile", AMK_OP_RMSNORM_GEMV, 2, AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 1, 13, 320, 0, pk, 9, -1);
    /* more rows than two a warp, no flags (or ARGMAX), an F32 x: the ring form (amk_norm_gemv_ring).
       SmolLM2's LM-head tiles at 512 threads (372 and 374 rows of 576: rounds of 16, the last of 4
       and 6); at 256 threads (rounds of 8) K = 768 into a bf16 output (with ARGMAX the pair is the
       rounded value), K = 72 (only 9 lanes hold x), tiles of 32 and 34 rows (whole rounds, then a
       last round of 2) */
    for (f = 0; f <= (int)AMK_GEMV_FLAG_ARGMAX; f += (int)AMK_GEMV_FLAG_ARGMAX) {
        g_fused_threads = 512;
        fused_case(f ? "NORM_GEMV ring head argmax" : "NORM_GEMV ring head", AMK_OP_RMSNORM_GEMV, f, AMK_DTYPE_F32,
                   AMK_DTYPE_BF16, AMK_DTYPE_F32, 1, 746, 576, 0, NULL, 0, -1);
        g_fused_threads = 0;
        fused_case(f ? "NORM_GEMV ring argmax K=768" : "NORM_GEMV ring K=768", AMK_OP_RMSNORM_GEMV, f, AMK_DTYPE_F32,
                   AMK_DTYPE_BF16, AMK_DTYPE_BF16, 1, 300, 768, 0, NULL, 0, -1);
    }
    fused_case("NORM_GEMV ring K=72", AMK_OP_RMSNORM_GEMV, 0, AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 1, 210, 72, 0, NULL, 0, -1);
    fused_case("NORM_GEMV ring 32+34 rows", AMK_OP_RMSNORM_GEMV, 0, AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 1, 66, 576, 0, NULL, 0, -1);
    /* ARGMAX on the general path: K = 2048; M = 3 with F32 weights */
    fused_case("NORM_GEMV argmax K=2048", AMK_OP_RMSNORM_GEMV, 4, AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 1, 1000, 2048, 0, NULL, 0, -1);
    fused_case("NORM_GEMV argmax f32 M=3", AMK_OP_RMSNORM_GEMV, 4, AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 3, 70, 100, 0, NULL, 0, -1);
    fused_case("NORM_SWIGLU bf16", AMK_OP_RMSNORM_SWIGLU, 0, AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 1, 300, 576, 0, NULL, 0, -1);
    fused_case("NORM_SWIGLU f32 M=2", AMK_OP_RMSNORM_SWIGLU, 0, AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 2, 50, 64, 0, NULL, 0, -1);
    /* block-format weights (the general path): RoPE into the cache, the head's ARGMAX, a gate and
       an up of two formats (a Q4_K_M file's mix) */
    fused_case("NORM_GEMV Q4_0 rope kv", AMK_OP_RMSNORM_GEMV, 3, AMK_DTYPE_F32, AMK_DTYPE_Q4_0, AMK_DTYPE_BF16, 1, 192, 576, 64, pk, 9, -1);
    fused_case("NORM_GEMV Q6_K rope M=3", AMK_OP_RMSNORM_GEMV, 1, AMK_DTYPE_F32, AMK_DTYPE_Q6_K, AMK_DTYPE_F32, 3, 128, 512, 128, p3, 0, 1e-3);
    fused_case("NORM_GEMV Q8_0 argmax", AMK_OP_RMSNORM_GEMV, 4, AMK_DTYPE_F32, AMK_DTYPE_Q8_0, AMK_DTYPE_F32, 1, 700, 576, 0, NULL, 0, -1);
    g_fused_up = AMK_DTYPE_Q6_K;
    fused_case("NORM_SWIGLU Q4_K/Q6_K", AMK_OP_RMSNORM_SWIGLU, 0, AMK_DTYPE_BF16, AMK_DTYPE_Q4_K, AMK_DTYPE_BF16, 1, 90, 512, 0, NULL, 0, -1);
    g_fused_up = AMK_DTYPE_BF16;
    fused_case("NORM_SWIGLU Q5_1/bf16", AMK_OP_RMSNORM_SWIGLU, 0, AMK_DTYPE_F32, AMK_DTYPE_Q5_1, AMK_DTYPE_F32, 1, 64, 576, 0, NULL, 0, -1);
    g_fused_up = (amk_dtype)0;
    if (!g_quick)
        fused_case("NORM_SWIGLU 8B tile", AMK_OP_RMSNORM_SWIGLU, 0, AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 1, 218, 4096, 0, NULL, 0, -1);
}

/* x_q8 tiles (x rounded to 8 bits a 32-element unit) against the reference VM, which rounds x by
   the same rule: with one row of x and K a multiple of 2048, the block ring (amk_op_blk_ring) of
   every format with an integer dot, as GEMV (rows of one, two and three chunks of 64 units, or one
   of 128 where K is a multiple of 4096: amk_plan_blk_ring_m; tiles whose rows leave
   warps unequal counts or none, the bias) and as the fused forms (RoPE into the cache, the head's
   ARGMAX, a gate and an up of two formats); with two rows, or K = 512, the lanes' float path on the
   rounded x. */
static void test_blk_ring(void) {
    static const int32_t pk[1] = {6}, p2[2] = {3, 900};
    static const amk_dtype ints[] = {AMK_DTYPE_Q8_0, AMK_DTYPE_Q4_0, AMK_DTYPE_Q4_1, AMK_DTYPE_Q5_0, AMK_DTYPE_Q5_1,
                                     AMK_DTYPE_Q4_K, AMK_DTYPE_Q5_K, AMK_DTYPE_Q6_K};
    int i;
    for (i = 0; i < (int)(sizeof ints / sizeof ints[0]); i++) {
        char tag[64];
        snprintf(tag, sizeof tag, "GEMV ring %s", amk_dtype_name(ints[i]));
        gemv_case(tag, (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = i % 2 ? AMK_DTYPE_F32 : AMK_DTYPE_BF16, .wt = ints[i],
                  .ot = i % 3 ? AMK_DTYPE_F32 : AMK_DTYPE_BF16, .M = 1, .N = 90, .K = i % 2 ? 4096 : 2048, .n_off = 7,
                  .N_tile = i % 4 == 3 ? 5 : 61, .bias = i % 2, .xq8 = 1});
    }
    gemv_case("GEMV ring Q4_K K=6144", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_F32, .wt = AMK_DTYPE_Q4_K,
              .ot = AMK_DTYPE_F32, .M = 1, .N = 40, .K = 6144, .n_off = 3, .N_tile = 33, .xq8 = 1});
    gemv_case("GEMV x_q8 Q4_K lanes K=512", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_F32, .wt = AMK_DTYPE_Q4_K,
              .ot = AMK_DTYPE_F32, .M = 1, .N = 40, .K = 512, .n_off = 0, .N_tile = 40, .xq8 = 1});
    gemv_case("GEMV x_q8 Q8_0 lanes M=2", (gemv_spec){.op = AMK_OP_GEMV_TILE, .xt = AMK_DTYPE_F32, .wt = AMK_DTYPE_Q8_0,
              .ot = AMK_DTYPE_F32, .M = 2, .N = 40, .K = 2048, .n_off = 0, .N_tile = 40, .xq8 = 1});
    g_fused_xq8 = 1;
    fused_case("NORM_GEMV ring Q4_K rope kv", AMK_OP_RMSNORM_GEMV, 3, AMK_DTYPE_BF16, AMK_DTYPE_Q4_K, AMK_DTYPE_BF16, 1, 256,
               4096, 128, pk, 9, -1);
    fused_case("NORM_GEMV ring Q6_K rope", AMK_OP_RMSNORM_GEMV, 1, AMK_DTYPE_F32, AMK_DTYPE_Q6_K, AMK_DTYPE_F32, 1, 128, 2048,
               64, pk, 0, 1e-3);
    fused_case("NORM_GEMV ring Q5_0 kv", AMK_OP_RMSNORM_GEMV, 2, AMK_DTYPE_F32, AMK_DTYPE_Q5_0, AMK_DTYPE_F32, 1, 64, 2048, 0,
               pk, 9, -1);
    fused_case("NORM_GEMV ring Q8_0 argmax", AMK_OP_RMSNORM_GEMV, 4, AMK_DTYPE_F32, AMK_DTYPE_Q8_0, AMK_DTYPE_F32, 1, 700, 2048,
               0, NULL, 0, -1);
    fused_case("NORM_GEMV ring Q4_0", AMK_OP_RMSNORM_GEMV, 0, AMK_DTYPE_BF16, AMK_DTYPE_Q4_0, AMK_DTYPE_BF16, 1, 300, 4096, 0,
               NULL, 0, -1);
    g_fused_up = AMK_DTYPE_Q6_K;
    fused_case("NORM_SWIGLU ring Q4_K/Q6_K", AMK_OP_RMSNORM_SWIGLU, 0, AMK_DTYPE_BF16, AMK_DTYPE_Q4_K, AMK_DTYPE_BF16, 1, 90,
               4096, 0, NULL, 0, -1);
    g_fused_up = AMK_DTYPE_Q5_K;
    fused_case("NORM_SWIGLU ring Q5_K", AMK_OP_RMSNORM_SWIGLU, 0, AMK_DTYPE_F32, AMK_DTYPE_Q5_K, AMK_DTYPE_F32, 1, 34, 2048, 0,
               NULL, 0, -1);
    g_fused_up = (amk_dtype)0;
    fused_case("NORM_SWIGLU ring Q4_1", AMK_OP_RMSNORM_SWIGLU, 0, AMK_DTYPE_F32, AMK_DTYPE_Q4_1, AMK_DTYPE_F32, 1, 66, 2048, 0,
               NULL, 0, -1);
    /* the ring's staging of x and a norm weight in each 16- and 32-bit float (amk_blk_stage_x8) */
    g_fused_norm = AMK_DTYPE_BF16;
    fused_case("NORM_GEMV ring Q4_K, F16 x, BF16 norm", AMK_OP_RMSNORM_GEMV, 0, AMK_DTYPE_F16, AMK_DTYPE_Q4_K, AMK_DTYPE_F32, 1,
               72, 4096, 0, NULL, 0, -1);
    g_fused_norm = AMK_DTYPE_F16;
    fused_case("NORM_SWIGLU ring Q6_K, BF16 x, F16 norm", AMK_OP_RMSNORM_SWIGLU, 0, AMK_DTYPE_BF16, AMK_DTYPE_Q6_K,
               AMK_DTYPE_BF16, 1, 48, 2048, 0, NULL, 0, -1);
    g_fused_norm = (amk_dtype)0;
    fused_case("NORM_GEMV x_q8 Q4_0 lanes M=2", AMK_OP_RMSNORM_GEMV, 1, AMK_DTYPE_F32, AMK_DTYPE_Q4_0, AMK_DTYPE_F32, 2, 64,
               2048, 64, p2, 0, 1e-3);
    fused_case("NORM_SWIGLU x_q8 Q8_0 lanes K=576", AMK_OP_RMSNORM_SWIGLU, 0, AMK_DTYPE_F32, AMK_DTYPE_Q8_0, AMK_DTYPE_F32, 1,
               40, 576, 0, NULL, 0, -1);
    g_fused_xq8 = 0;
}

/* RMSNORM_MLP: a FILL starts the sum, then tiles of tr rows of gate/up and W_downT (the first with
   the residual) add into one F32 output from different SMs at once (red.global.add), against the reference VM.
   The GPU's order of additions differs, so the bound is relative to the output's largest value. */
static amk_dtype g_mlp_gate_up; /* the gate and up dtype when not F32 (0): else wt */
static amk_dtype g_mlp_down;    /* a block format: W_down [H, N] in it, as stored (0: W_downT [N, H] in wt) */
static void mlp_case(const char *tag, amk_dtype xt, amk_dtype wt, int64_t M, int64_t N, int64_t K, int64_t H,
                     int64_t tr, int threads) {
    const int64_t n_tiles = (N + tr - 1) / tr;
    amk_program *p = prog_new((int)n_tiles + 1);
    int in[6], y, t, k, c_f = amk_program_add_counter(p, "start"), c_m = amk_program_add_counter(p, "mlp");
    gcase g;
    in[0] = buf(p, "h", AMK_KIND_IO_INPUT, xt, 2, M, K, 0);
    in[1] = buf(p, "norm_w", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, K, 0, 0);
    in[2] = buf(p, "W_gate", AMK_KIND_WEIGHT, g_mlp_gate_up ? g_mlp_gate_up : wt, 2, N, K, 0);
    in[3] = buf(p, "W_up", AMK_KIND_WEIGHT, g_mlp_gate_up ? g_mlp_gate_up : wt, 2, N, K, 0);
    in[4] = g_mlp_down ? buf(p, "W_down", AMK_KIND_WEIGHT, g_mlp_down, 2, H, N, 0) : buf(p, "W_downT", AMK_KIND_WEIGHT, wt, 2, N, H, 0);
    in[5] = buf(p, "resid", AMK_KIND_IO_INPUT, xt, 2, M, H, 0);
    y = buf(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, M, H, 0);
    t = task(p, AMK_OP_FILL, NULL, 0, y, c_f, 0);
    setf(p, t, "scale", 0.0);
    for (k = 0; k < n_tiles; k++) {
        t = task(p, AMK_OP_RMSNORM_MLP, in, k == 0 ? 6 : 5, y, c_m, k + 1);
        setf(p, t, "eps", 1e-5);
        seti(p, t, "K", K);
        seti(p, t, "n_off", k * tr);
        seti(p, t, "N_tile", N - k * tr < tr ? N - k * tr : tr);
        amk_task_add_wait(p, t, c_f, 1);
    }
    if (threads) p->config.threads_per_block = threads;
    if (gcase_begin(&g, p, tag, 1.0f) && gcase_run(&g, tag)) gcase_compare(&g, y, 1e-4, 2e-5, tag);
    gcase_end(&g);
}

static void test_fused_mlp(void) {
    /* SmolLM2's tile (12 rows of 1536, H 576: staged), H not a multiple of 8 (not staged; element
       loads and one reduction an output) */
    mlp_case("NORM_MLP bf16 smollm2", AMK_DTYPE_F32, AMK_DTYPE_BF16, 1, 96, 576, 576, 12, 0);
    /* tiles of 12 rows and a last one of 4, K = 256: the lean form */
    mlp_case("NORM_MLP bf16 lean", AMK_DTYPE_F32, AMK_DTYPE_BF16, 1, 52, 256, 576, 12, 0);
    /* an odd K: the launch's shared memory is not a multiple of 16 bytes (the staged rows are) */
    mlp_case("NORM_MLP bf16 odd K", AMK_DTYPE_F32, AMK_DTYPE_BF16, 1, 48, 99, 576, 12, 0);
    /* a block of one warp: thread 1 issues the staging copy (there is no thread 32) */
    mlp_case("NORM_MLP bf16 one warp", AMK_DTYPE_F32, AMK_DTYPE_BF16, 1, 48, 576, 576, 12, 32);
    mlp_case("NORM_MLP f16 odd H", AMK_DTYPE_BF16, AMK_DTYPE_F16, 1, 70, 128, 102, 7, 0);
    mlp_case("NORM_MLP f32 M=2", AMK_DTYPE_F32, AMK_DTYPE_F32, 2, 64, 64, 96, 16, 0);
    /* a gate and up in a block format, W_downT bf16 (the general path) */
    g_mlp_gate_up = AMK_DTYPE_Q5_K;
    mlp_case("NORM_MLP Q5_K gate/up", AMK_DTYPE_F32, AMK_DTYPE_BF16, 1, 96, 512, 576, 12, 0);
    g_mlp_gate_up = (amk_dtype)0;
    /* W_down [H, N] in a block format, as stored (amk_blk_down): SmolLM2's Q4_1 (tiles of one
       32-unit, H 576), the K-quants' 256 (Q4_K, and Q6_K with an odd H: one output a thread), a
       Q8_0 W_down beside bf16 gate and up, and Q4_0 with tiles of two units and x in bf16 */
    g_mlp_down = AMK_DTYPE_Q4_1;
    mlp_case("NORM_MLP Q4_1 down smollm2", AMK_DTYPE_F32, AMK_DTYPE_Q4_1, 1, 192, 576, 576, 32, 0);
    g_mlp_down = AMK_DTYPE_Q4_K;
    mlp_case("NORM_MLP Q4_K down", AMK_DTYPE_F32, AMK_DTYPE_Q4_K, 1, 512, 512, 256, 256, 0);
    g_mlp_gate_up = AMK_DTYPE_Q4_K;
    g_mlp_down = AMK_DTYPE_Q6_K;
    mlp_case("NORM_MLP Q6_K down odd H", AMK_DTYPE_F32, AMK_DTYPE_Q6_K, 1, 512, 256, 101, 256, 0);
    g_mlp_gate_up = AMK_DTYPE_BF16;
    g_mlp_down = AMK_DTYPE_Q8_0;
    mlp_case("NORM_MLP bf16 gate/up Q8_0 down", AMK_DTYPE_F32, AMK_DTYPE_Q8_0, 1, 128, 576, 100, 64, 0);
    g_mlp_gate_up = (amk_dtype)0;
    g_mlp_down = AMK_DTYPE_Q4_0;
    mlp_case("NORM_MLP Q4_0 down bf16 x", AMK_DTYPE_BF16, AMK_DTYPE_Q4_0, 1, 256, 256, 576, 64, 0);
    g_mlp_down = (amk_dtype)0;
    if (!g_quick) /* Llama-3.2-1B's tile: 64 rows of 8192, H 2048 */
        mlp_case("NORM_MLP bf16 1B tile", AMK_DTYPE_F32, AMK_DTYPE_BF16, 1, 256, 2048, 2048, 64, 0);
}

/* RMSNORM_MLP FOLD: FILLs start both sums, then tiles of tr rows (the first with the residual) add
   their share of down_proj into y and their W_cat rows (their tile's and their base rows) into qkv
   (F32 [1, F]) from different SMs, against the reference VM. The lean form only (bf16 weights, F32
   x): the host refuses the others. */
static void mlp_fold_case(const char *tag, int64_t N, int64_t K, int64_t F, int64_t tr, int resid_is_h) {
    const int64_t n_tiles = (N + tr - 1) / tr;
    amk_program *p = prog_new((int)n_tiles + 2);
    int in[7], outs[2], t, k, c_f = amk_program_add_counter(p, "start"), c_m = amk_program_add_counter(p, "mlp");
    gcase g;
    in[0] = buf(p, "h", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 1, K, 0);
    in[1] = buf(p, "norm_w", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, K, 0, 0);
    in[2] = buf(p, "W_gate", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, N, K, 0);
    in[3] = buf(p, "W_up", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, N, K, 0);
    in[4] = buf(p, "W_downT", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, N, K, 0);
    in[5] = buf(p, "W_cat", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, N + K, F, 0);
    /* the builder's resid is h itself, else a buffer of its own */
    in[6] = resid_is_h ? in[0] : buf(p, "resid", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 1, K, 0);
    outs[0] = buf(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, 1, K, 0);
    outs[1] = buf(p, "qkv", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, 1, F, 0);
    for (k = 0; k < 2; k++) {
        t = task(p, AMK_OP_FILL, NULL, 0, outs[k], c_f, (int)n_tiles + k);
        setf(p, t, "scale", 0.0);
    }
    for (k = 0; k < n_tiles; k++) {
        t = amk_program_add_task(p, AMK_OP_RMSNORM_MLP_FOLD, in, k == 0 ? 7 : 6, outs, 2, c_m, "mlp fold");
        if (t >= 0) p->tasks[t].sm = k;
        setf(p, t, "eps", 1e-5);
        seti(p, t, "K", K);
        seti(p, t, "n_off", k * tr);
        seti(p, t, "N_tile", N - k * tr < tr ? N - k * tr : tr);
        amk_task_add_wait(p, t, c_f, 2);
    }
    p->config.threads_per_block = 512; /* the lean form: a warp a row */
    if (gcase_begin(&g, p, tag, 1.0f) && gcase_run(&g, tag)) {
        gcase_compare(&g, outs[0], 1e-4, 2e-5, tag);
        gcase_compare(&g, outs[1], 1e-4, 2e-5, tag);
    }
    gcase_end(&g);
}

static void test_fused_mlp_fold(void) {
    /* SmolLM2's folded tile: 16 rows of 1536 (6 base rows of 576 each), F = 960 */
    mlp_fold_case("NORM_MLP fold smollm2", 1536, 576, 960, 16, 1);
    /* uneven base rows (K / N not whole: 2 or 3 a tile), a last tile of 5, F not a multiple of 4 * 32;
       a resid buffer of its own */
    mlp_fold_case("NORM_MLP fold uneven", 101, 256, 200, 8, 0);
}

/* ATTENTION_DECODE: one task per kv head (on different SMs) into one output, against the
   reference VM; pos cuts the window. */
static void decode_case(const char *tag, amk_dtype qt, amk_dtype kvt, amk_dtype ot, int nh, int nkv, int hd, int max_seq,
                        int kv_start, int kv_len, int32_t pos, int partial, int tile) {
    amk_program *p = prog_new(4);
    int in[4], y, t, g, c = amk_program_add_counter(p, "");
    gcase gc;
    y = attn_bufs(p, qt, kvt, ot, nh, nkv, hd, max_seq, partial, in);
    in[3] = buf(p, "pos", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
    for (g = 0; g < nkv; g += tile) {
        t = task(p, AMK_OP_ATTENTION_DECODE, in, 4, y, c, g % 4);
        attn_params(p, t, nh, nkv, hd, kv_start, kv_len, partial);
        seti(p, t, "n_off", g);
        seti(p, t, "N_tile", tile);
    }
    if (gcase_begin(&gc, p, tag, 1.0f)) {
        gcase_set_i32(&gc, in[3], &pos, 1);
        if (gcase_run(&gc, tag)) gcase_compare(&gc, y, -1, 1e-5, tag);
    }
    gcase_end(&gc);
}

/* An ATTENTION_PREFILL program: q (qt) of M rows over caches (kvt) of max_seq rows into y (ot),
   tasks of rows_a_task query rows and a kv head each, round robin over n_sms SMs; in[4] gets q, k,
   v and pos, *y the output. */
static amk_program *attn_prefill_program(amk_dtype qt, amk_dtype kvt, amk_dtype ot, int nh, int nkv, int hd, int max_seq,
                                         int M, int rows_a_task, int window, int n_sms, int *in, int *y) {
    amk_program *p = prog_new(n_sms);
    int t, g, m, c = amk_program_add_counter(p, ""), k = 0;
    in[0] = buf(p, "q", AMK_KIND_IO_INPUT, qt, 2, M, nh * hd, 0);
    in[1] = buf(p, "k", AMK_KIND_KV_CACHE, kvt, 3, max_seq, nkv, hd);
    in[2] = buf(p, "v", AMK_KIND_KV_CACHE, kvt, 3, max_seq, nkv, hd);
    in[3] = buf(p, "pos", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
    *y = buf(p, "y", AMK_KIND_IO_OUTPUT, ot, 2, M, nh * hd, 0);
    for (m = 0; m < M; m += rows_a_task)
        for (g = 0; g < nkv; g++) {
            t = task(p, AMK_OP_ATTENTION_PREFILL, in, 4, *y, c, k++ % n_sms);
            seti(p, t, "head_dim", hd);
            seti(p, t, "n_heads", nh);
            seti(p, t, "n_kv_heads", nkv);
            setf(p, t, "scale", 1.0 / sqrt((double)hd));
            seti(p, t, "n_off", g);
            seti(p, t, "N_tile", 1);
            seti(p, t, "m_off", m);
            seti(p, t, "M_tile", M - m < rows_a_task ? M - m : rows_a_task);
            if (window) seti(p, t, "sliding_window", window);
        }
    return p;
}

/* ATTENTION_PREFILL: tasks of query rows and kv heads (on different SMs) into one output, against
   the reference VM; rows at positions pos.. */
static void prefill_case(const char *tag, amk_dtype qt, amk_dtype kvt, amk_dtype ot, int nh, int nkv, int hd, int max_seq,
                         int M, int32_t pos, int rows_a_task, int window) {
    int in[4], y, t;
    amk_program *p = attn_prefill_program(qt, kvt, ot, nh, nkv, hd, max_seq, M, rows_a_task, window, 4, in, &y);
    gcase gc;
    if (gcase_begin(&gc, p, tag, 1.0f)) {
        /* the tensor-core form (prefill and portable images, q/K/V all BF16 or all F16) rounds p to
           that dtype before p . V, as flash attention does: each output within a few bf16
           roundings of p of the largest output's magnitude; every other form matches the
           reference to f32 rounding */
        const int mma = AMK_IMAGE_HAS_PREFILL(gc.image) && qt == kvt && (qt == AMK_DTYPE_BF16 || qt == AMK_DTYPE_F16) &&
                        hd % 16 == 0 && hd <= AMK_ATTN_PF_MAX_HD;
        gcase_set_i32(&gc, in[3], &pos, 1);
        if (mma) {
            for (t = 0; t < p->n_tasks; t++)
                CHECK_MSG(gc.cu->ins[t].form == AMK_FORM_ATTN_MMA || gc.cu->ins[t].form == AMK_FORM_ATTN_WG,
                          "%s: task %d in form %u, not ATTN_MMA or ATTN_WG", tag, t, (unsigned)gc.cu->ins[t].form);
        }
        if (gcase_run(&gc, tag)) gcase_compare(&gc, y, mma ? 1.6e-2 : -1, mma ? 8e-3 : 1e-5, tag);
    }
    gcase_end(&gc);
}

static void test_attention_prefill(void) {
    prefill_case("PREFILL gqa bf16", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 32, 8, 128, 300, 40, 100, 16, 0);
    prefill_case("PREFILL from 0 f32", AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 9, 3, 64, 64, 37, 0, 10, 0);
    prefill_case("PREFILL window f16", AMK_DTYPE_F32, AMK_DTYPE_F16, AMK_DTYPE_F32, 12, 4, 80, 90, 30, 50, 7, 16);
    prefill_case("PREFILL mqa cache end", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_F32, 8, 1, 64, 50, 20, 30, 20, 0);
    /* the tensor-core form's shapes (prefill image): a group a warp and several chunks of keys (the
       8B's heads, 64 rows a task); groups straddling rows (3 heads a kv head) from position 0 with a
       window; head_dim 32 */
    prefill_case("PREFILL long bf16", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 32, 8, 128, 700, 130, 500, 64, 0);
    prefill_case("PREFILL window bf16", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_F32, 12, 4, 64, 90, 50, 0, 13, 40);
    prefill_case("PREFILL hd32 bf16", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 6, 2, 32, 400, 70, 300, 35, 0);
    /* f16 q, K and V: the tensor-core form with f16 operands (and p) */
    prefill_case("PREFILL long f16", AMK_DTYPE_F16, AMK_DTYPE_F16, AMK_DTYPE_F16, 32, 8, 128, 700, 130, 500, 64, 0);
    prefill_case("PREFILL window f16 mma", AMK_DTYPE_F16, AMK_DTYPE_F16, AMK_DTYPE_F32, 12, 4, 64, 90, 50, 0, 13, 40);
    /* the warpgroup form's passes (AMK_ATTN_PF_WG; with it off, as by default, the mma.sync form
       takes them): two groups of 64 vectors straddling rows (3 heads a kv head) and two key splits;
       seven groups in two passes of four and three, f16 out; 130 vectors of one head each (MHA) in
       three groups from position 0 */
    prefill_case("PREFILL wg grp3 bf16", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 9, 3, 64, 300, 100, 150, 40, 0);
    prefill_case("PREFILL wg passes f16", AMK_DTYPE_F16, AMK_DTYPE_F16, AMK_DTYPE_F16, 32, 8, 128, 1100, 200, 800, 100, 0);
    prefill_case("PREFILL wg mha bf16", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_F32, 4, 4, 64, 200, 130, 0, 130, 0);
}

static void test_attention_decode(void) {
    decode_case("DECODE gqa bf16", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 32, 8, 128, 200, 0, 200, 128, 0, 1);
    decode_case("DECODE partial", AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 9, 3, 64, 100, 17, 17, 20, 1, 1);
    decode_case("DECODE pos before", AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 9, 3, 64, 100, 50, 50, 20, 1, 1);
    decode_case("DECODE one key", AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 4, 4, 32, 10, 3, 7, 3, 0, 1);
    decode_case("DECODE hd80 f16", AMK_DTYPE_F32, AMK_DTYPE_F16, AMK_DTYPE_F32, 12, 3, 80, 40, 7, 33, 39, 0, 1);
    decode_case("DECODE mqa 32 heads", AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 32, 1, 64, 300, 0, 300, 299, 1, 1);
    /* rows of 40 bytes are not whole 16-byte pieces: staged through amk_load as F32 */
    decode_case("DECODE hd20 bf16 unaligned", AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 6, 2, 20, 90, 0, 90, 70, 0, 1);
    decode_case("DECODE 2 kv heads a task", AMK_DTYPE_F32, AMK_DTYPE_BF16, AMK_DTYPE_F32, 12, 4, 64, 80, 0, 80, 60, 1, 2);
    decode_case("DECODE hd256 bf16", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_F32, 8, 2, 256, 300, 0, 300, 250, 0, 2);
    /* several chunks of rows (a chunk holds at most 512) and 6 heads a kv head (two passes) */
    decode_case("DECODE chunks f32", AMK_DTYPE_F32, AMK_DTYPE_F32, AMK_DTYPE_F32, 12, 2, 64, 1500, 100, 1400, 1300, 1, 1);
    /* bf16 q, K and V with head_dim a multiple of 16: the tensor-core path (amk_attn_decode_mma) */
    decode_case("DECODE mma 1B shape", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_BF16, 32, 8, 64, 129, 0, 129, 128, 0, 1);
    decode_case("DECODE mma pos cuts", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_F32, 9, 3, 64, 100, 0, 100, 40, 0, 1);
    decode_case("DECODE mma partial", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_F32, 9, 3, 64, 300, 150, 75, 200, 1, 1);
    decode_case("DECODE mma pos before", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_F32, 8, 2, 64, 100, 50, 50, 20, 1, 1);
    decode_case("DECODE mma one key", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_F32, 4, 4, 32, 10, 3, 7, 3, 0, 1);
    decode_case("DECODE mma 20 heads a kv head", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_F32, 40, 2, 32, 70, 0, 70, 69, 0, 2);
    decode_case("DECODE mma chunks", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_F32, 12, 2, 64, 1500, 100, 1400, 1300, 1, 1);
    /* head_dim 72 is not a multiple of 16: the same dtypes fall back to the CUDA-core path */
    decode_case("DECODE bf16 hd72 -> CUDA cores", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_F32, 6, 2, 72, 60, 0, 60, 59, 0, 1);
    decode_case("DECODE mma hd80", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_F32, 6, 2, 80, 60, 0, 60, 59, 0, 1);
    if (!g_quick) decode_case("DECODE long", AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_F32, 32, 8, 128, 4097, 0, 4097, 4000, 1, 1);
}

/* ATTENTION_O: a FILL starts the sum, then tasks over tile kv heads at a time, each adding tr of
   its heads' rows of W_oT (the first with the residual) into one F32 output from different SMs,
   against the reference VM; pos cuts the window. */
static void attn_o_case(const char *tag, amk_dtype qt, amk_dtype wt, int nh, int nkv, int hd, int max_seq, int32_t pos,
                        int H, int tr, int tile, int threads) {
    const int per = nh / nkv * hd * tile; /* W_oT rows a task's kv heads own */
    amk_program *p = prog_new(16);
    int in[6], y, t, g, n = 0, c_f = amk_program_add_counter(p, "start"), c_a = amk_program_add_counter(p, "attention_o");
    int64_t off;
    gcase gc;
    in[0] = buf(p, "q", AMK_KIND_IO_INPUT, qt, 2, nh, hd, 0);
    in[1] = buf(p, "k", AMK_KIND_KV_CACHE, qt, 3, max_seq, nkv, hd);
    in[2] = buf(p, "v", AMK_KIND_KV_CACHE, qt, 3, max_seq, nkv, hd);
    y = buf(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, 1, H, 0);
    in[3] = buf(p, "pos", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
    in[4] = buf(p, "W_oT", AMK_KIND_WEIGHT, wt, 2, nh * hd, H, 0);
    in[5] = buf(p, "resid", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 1, H, 0);
    t = task(p, AMK_OP_FILL, NULL, 0, y, c_f, 0);
    setf(p, t, "scale", 0.0);
    for (g = 0; g < nkv; g += tile)
        for (off = (int64_t)g / tile * per; off < (int64_t)(g / tile + 1) * per; off += tr, n++) {
            t = task(p, AMK_OP_ATTENTION_O, in, n == 0 ? 6 : 5, y, c_a, 1 + n % 15);
            attn_params(p, t, nh, nkv, hd, 0, max_seq, 0);
            seti(p, t, "n_off", g);
            seti(p, t, "N_tile", tile);
            seti(p, t, "m_off", (int)off);
            seti(p, t, "M_tile", (int)((g / tile + 1) * per - off < tr ? (g / tile + 1) * per - off : tr));
            amk_task_add_wait(p, t, c_f, 1);
        }
    if (threads) p->config.threads_per_block = threads;
    if (gcase_begin(&gc, p, tag, 1.0f)) {
        gcase_set_i32(&gc, in[3], &pos, 1);
        if (gcase_run(&gc, tag)) gcase_compare(&gc, y, 1e-4, 2e-5, tag);
    }
    gcase_end(&gc);
}

static void test_attention_o(void) {
    /* SmolLM2's layer: bf16 (tensor cores), 5 rows of W_oT a task (staged), the last of a head 2 */
    attn_o_case("ATTN_O bf16 smollm2", AMK_DTYPE_BF16, AMK_DTYPE_BF16, 9, 3, 64, 129, 128, 576, 5, 1, 0);
    attn_o_case("ATTN_O bf16 pos cuts", AMK_DTYPE_BF16, AMK_DTYPE_BF16, 9, 3, 64, 129, 17, 576, 24, 1, 0);
    /* at most 16 rows of W_oT a task, in one or two query heads: the lean form (amk_attn_o_lean),
       with the position cutting the window, and with the window empty past it; tasks of 16 rows
       across two heads of 24 dimensions, at 512 threads (SmolLM2's tasks with the SM sets) */
    attn_o_case("ATTN_O bf16 lean pos cuts", AMK_DTYPE_BF16, AMK_DTYPE_BF16, 9, 3, 64, 129, 17, 576, 7, 1, 0);
    attn_o_case("ATTN_O f32 lean 2 heads", AMK_DTYPE_F32, AMK_DTYPE_F32, 12, 4, 32, 200, 199, 96, 6, 1, 0);
    attn_o_case("ATTN_O bf16 lean 16 rows", AMK_DTYPE_BF16, AMK_DTYPE_BF16, 6, 2, 24, 130, 120, 576, 16, 1, 512);
    /* a block of one warp: thread 1 issues the staging copy */
    attn_o_case("ATTN_O bf16 one warp", AMK_DTYPE_BF16, AMK_DTYPE_BF16, 9, 3, 64, 40, 39, 576, 12, 1, 32);
    /* f32 q and caches (the CUDA-core attention) with bf16 rows of W_oT (staged) */
    attn_o_case("ATTN_O f32 staged rows", AMK_DTYPE_F32, AMK_DTYPE_BF16, 9, 3, 64, 100, 60, 576, 5, 1, 0);
    /* f32 (CUDA cores), H not a multiple of 8 (not staged), two kv heads a task */
    attn_o_case("ATTN_O f32 odd H", AMK_DTYPE_F32, AMK_DTYPE_F16, 8, 4, 32, 50, 30, 102, 20, 2, 0);
    /* Llama-3.2-1B's: 16 rows of 2048 (64 KB: read from global memory) */
    attn_o_case("ATTN_O bf16 1B rows", AMK_DTYPE_BF16, AMK_DTYPE_BF16, 32, 8, 64, 129, 128, 2048, 16, 1, 0);
}

/* ATTENTION_O PRENORM: tasks as attn_o_case's over a layer's raw q, k and v (qkv, F32: what folded
   MLP tiles add) and x (its rms scales them), RoPE at pos; the first task of each kv head writes
   the caches' row pos, every task uses its own k and v there. Against the reference VM: y and both
   caches. The caches' row pos starts random, and in the bf16 cases the tasks' tensor copies of
   their rows go out before the wait, before any writer's store: a task that used the copied row
   pos would show. */
static void attn_pre_case(const char *tag, amk_dtype kvt, int nh, int nkv, int hd, int max_seq, int32_t pos, int H, int tr,
                          int threads, int resid_is_x) {
    const int per = nh / nkv * hd, F = (nh + 2 * nkv) * hd;
    amk_program *p = prog_new(16);
    int in[7], outs[3], y, t, g, n = 0, c_f = amk_program_add_counter(p, "start"), c_a = amk_program_add_counter(p, "attention_o");
    int64_t off;
    gcase gc;
    in[0] = buf(p, "qkv", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 1, F, 0);
    in[1] = buf(p, "k", AMK_KIND_KV_CACHE, kvt, 3, max_seq, nkv, hd);
    in[2] = buf(p, "v", AMK_KIND_KV_CACHE, kvt, 3, max_seq, nkv, hd);
    y = buf(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, 1, H, 0);
    in[3] = buf(p, "pos", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
    in[4] = buf(p, "W_oT", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, nh * hd, H, 0);
    in[5] = buf(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 1, H, 0);
    /* the builder's resid is x itself, else a buffer of its own */
    in[6] = resid_is_x ? in[5] : buf(p, "resid", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 1, H, 0);
    outs[0] = y; outs[1] = in[1]; outs[2] = in[2];
    t = task(p, AMK_OP_FILL, NULL, 0, y, c_f, 0);
    setf(p, t, "scale", 0.0);
    for (g = 0; g < nkv; g++)
        for (off = (int64_t)g * per; off < (int64_t)(g + 1) * per; off += tr, n++) {
            t = amk_program_add_task(p, AMK_OP_ATTENTION_O_PRENORM, in, n == 0 ? 7 : 6, outs, off == (int64_t)g * per ? 3 : 1, c_a,
                                     "attention_o prenorm");
            if (t >= 0) p->tasks[t].sm = 1 + n % 15;
            attn_params(p, t, nh, nkv, hd, 0, max_seq, 0);
            setf(p, t, "eps", 1e-5);
            setf(p, t, "theta", 100000.0);
            seti(p, t, "n_off", g);
            seti(p, t, "N_tile", 1);
            seti(p, t, "m_off", (int)off);
            seti(p, t, "M_tile", (int)((g + 1) * per - off < tr ? (g + 1) * per - off : tr));
            amk_task_add_wait(p, t, c_f, 1);
        }
    if (threads) p->config.threads_per_block = threads;
    if (gcase_begin(&gc, p, tag, 1.0f)) {
        gcase_set_i32(&gc, in[3], &pos, 1);
        if (gcase_run(&gc, tag)) {
            gcase_compare(&gc, y, 1e-4, 2e-5, tag);
            gcase_compare(&gc, in[1], -1, -1, tag);
            gcase_compare(&gc, in[2], -1, -1, tag);
        }
    }
    gcase_end(&gc);
}

static void test_attention_o_prenorm(void) {
    /* SmolLM2's folded layer: bf16 caches (tensor copies where the runtime encodes them), 16 rows of
       W_oT a task, the position at the window's end, in its middle, and 0 */
    attn_pre_case("ATTN_O prenorm bf16 smollm2", AMK_DTYPE_BF16, 9, 3, 64, 128, 127, 576, 16, 512, 1);
    attn_pre_case("ATTN_O prenorm bf16 pos mid", AMK_DTYPE_BF16, 9, 3, 64, 128, 40, 576, 16, 512, 1);
    attn_pre_case("ATTN_O prenorm bf16 pos 0", AMK_DTYPE_BF16, 9, 3, 64, 128, 0, 576, 16, 512, 1);
    /* F32 caches (cp.async rows below the position), head_dim 32, tasks over two heads, a resid
       buffer of its own */
    attn_pre_case("ATTN_O prenorm f32", AMK_DTYPE_F32, 12, 4, 32, 100, 60, 96, 6, 0, 0);
}

static void test_nop(void) {
    amk_program *p = prog_new(4);
    int c0 = amk_program_add_counter(p, "");
    int c1 = amk_program_add_counter(p, "");
    int x = buf(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 1, 8, 0, 0), y = buf(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 1, 8, 0, 0);
    int t = amk_program_add_task(p, AMK_OP_NOP, NULL, 0, NULL, 0, c0, "nop");
    p->tasks[t].sm = 3;
    t = task(p, AMK_OP_COPY, &x, 1, y, c1, 0);
    amk_task_add_wait(p, t, c0, 1); /* a NOP still signals */
    check_program(p, "NOP", 1.0f, 0.0, 0.0);
}

/* ---- multi-SM programs ------------------------------------------------------------------------- */

/* As if e - 1 launches had completed since the counters were zeroed (the epoch scheme,
   amk_program_t.epoch): each counter at (e - 1) times its producer count, mod 2^32; the next
   launch runs epoch e. */
static void set_epoch(gcase *g, uint32_t e) {
    amk_cuda *c = g->cu;
    uint32_t *ctr = (uint32_t *)calloc((size_t)(g->p->n_counters ? g->p->n_counters : 1), 4);
    int t;
    if (!ctr) { CHECK(0); return; }
    for (t = 0; t < g->p->n_tasks; t++) ctr[g->p->tasks[t].out_counter] += e - 1u;
    CHECK_EQ_INT(amk__cuda_enter(c, &g->d), AMK_OK);
    CHECK_EQ_INT(c->api.MemcpyHtoD(c->prog.counters, ctr, (size_t)g->p->n_counters * 4), AMK__CUDA_SUCCESS);
    amk__cuda_leave(c);
    c->epoch = e - 1u;
    c->counters_dirty = 0;
    free(ctr);
}

/* 16 GEMV tiles on 16 SMs under one all-join counter, an RMSNORM on a 17th SM waiting for all of
   them, then 4 tiles reading the norm. Run several times: the outputs must not move. */
static void test_dag_tiles_join(void) {
    const int tiles = 16, K = 512, N = 1024, N2 = 256;
    amk_program *p = prog_new(tiles + 1);
    int x = buf(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 1, K, 0);
    int W = buf(p, "W", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, N, K, 0);
    int w2 = buf(p, "w2", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, N, 0, 0);
    int W3 = buf(p, "W3", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, N2, N, 0);
    int y = buf(p, "y", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 1, N, 0);
    int z = buf(p, "z", AMK_KIND_ACTIVATION, AMK_DTYPE_BF16, 2, 1, N, 0);
    int o = buf(p, "out", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, 1, N2, 0);
    int c0 = amk_program_add_counter(p, "tiles"), c1 = amk_program_add_counter(p, "norm");
    int c2 = amk_program_add_counter(p, "out"), in[2], i, t, run;
    gcase g;
    for (i = 0; i < tiles; i++) {
        in[0] = x; in[1] = W;
        t = task(p, AMK_OP_GEMV_TILE, in, 2, y, c0, i);
        seti(p, t, "K", K); seti(p, t, "n_off", i * (N / tiles)); seti(p, t, "N_tile", N / tiles);
    }
    in[0] = y; in[1] = w2;
    t = task(p, AMK_OP_RMSNORM, in, 2, z, c1, tiles);
    seti(p, t, "hidden", N); setf(p, t, "eps", 1e-6);
    amk_task_add_wait(p, t, c0, tiles);
    for (i = 0; i < 4; i++) {
        in[0] = z; in[1] = W3;
        t = task(p, AMK_OP_GEMV_TILE, in, 2, o, c2, 3 + 4 * i);
        seti(p, t, "K", N); seti(p, t, "n_off", i * (N2 / 4)); seti(p, t, "N_tile", N2 / 4);
        amk_task_add_wait(p, t, c1, 1);
    }
    if (gcase_begin(&g, p, "DAG tiles", 1.0f) && gcase_run(&g, "DAG tiles")) {
        float first[256], again[256];
        amk_cuda_info info;
        amk_cuda_get_info(g.cu, &info); /* the launch asks for what its tasks stage (K = 1024 floats) */
        CHECK_MSG(info.smem_bytes == 4 * N, "dynamic shared memory %lld, want %d", (long long)info.smem_bytes, 4 * N);
        gcase_compare(&g, y, -1, -1, "DAG tiles y");
        gcase_compare(&g, z, -1, -1, "DAG tiles z");
        gcase_compare(&g, o, 2e-3, 2e-3, "DAG tiles out"); /* z is bf16: a flipped rounding moves out */
        CHECK_EQ_INT(amk_cuda_download(g.cu, o, first, sizeof first, NULL), AMK_OK);
        for (run = 0; run < (g_quick ? 2 : 20); run++) {
            /* epochs 2, 3, ...; then 2^28 and on: the 16 tiles' counter passes 2^32 (its target wraps
               to 0 while it still holds 2^32 - 16: only a signed comparison waits), and the epoch
               cap (2^30: the counters zeroed again) */
            if (run == 10) set_epoch(&g, 1u << 28);
            if (run == 15) set_epoch(&g, (1u << 30) - 1u);
            CHECK_EQ_INT(amk_cuda_run(g.cu, 10000.0 * g_slow, &g.d), AMK_OK);
            CHECK_EQ_INT(amk_cuda_download(g.cu, o, again, sizeof again, NULL), AMK_OK);
            CHECK_MSG(memcmp(first, again, sizeof first) == 0, "run %d moved the output: a race", run);
        }
        CHECK_MSG(g.cu->epoch < 10u, "epoch %u after the cap", g.cu->epoch);
    }
    gcase_end(&g);
}

/* A chain of ADDs hopping across SMs: acc_i = acc_{i-1} + w_i on SM (5 i) mod n_sms, each waiting
   for the one before. Bit-exact: any stale read shows. */
static void test_dag_chain(void) {
    const int n = g_quick ? 16 : 96, n_sms = 32, H = 1000;
    amk_program *p = prog_new(n_sms);
    int prev = buf(p, "acc0", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 1, H, 0, 0), i, last = -1, prev_c = -1;
    gcase g;
    for (i = 0; i < n; i++) {
        char name[32];
        int in[2], t, c = amk_program_add_counter(p, "");
        snprintf(name, sizeof name, "w%d", i);
        in[0] = prev;
        in[1] = buf(p, name, AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 1, H, 0, 0);
        snprintf(name, sizeof name, "acc%d", i + 1);
        last = buf(p, name, i == n - 1 ? AMK_KIND_IO_OUTPUT : AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 1, H, 0, 0);
        t = task(p, AMK_OP_ADD, in, 2, last, c, (5 * i) % n_sms);
        if (prev_c >= 0) amk_task_add_wait(p, t, prev_c, 1);
        prev = last;
        prev_c = c;
    }
    if (gcase_begin(&g, p, "DAG chain", 1.0f) && gcase_run(&g, "DAG chain")) gcase_compare(&g, last, 0.0, 0.0, "DAG chain");
    gcase_end(&g);
}

/* The Llama head's argmax: ARGMAX_PARTIAL over uneven column ranges on several SMs (one
   counter), ARGMAX_COMBINE after them. The pairs and the tokens equal the reference VM's: a tie
   across two parts (the first index wins), NaN never wins, an all-NaN row gives 0 (its pairs
   NaN, -1), and 128256 bf16 logits (Llama-3's vocabulary) in 7 parts. */
static void test_argmax_pairs(void) {
    static const int cut[6] = {0, 1, 250, 499, 500, 1000};
    const int64_t V = 128256;
    amk_program *p = prog_new(8);
    int x = buf(p, "logits", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 4, 1000, 0);
    int pr = buf(p, "partials", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, 4, 10, 0);
    int y = buf(p, "tok", AMK_KIND_IO_OUTPUT, AMK_DTYPE_I32, 1, 4, 0, 0);
    int xb = buf(p, "logits_bf16", AMK_KIND_IO_INPUT, AMK_DTYPE_BF16, 2, 1, V, 0);
    int prb = buf(p, "partials_bf16", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, 1, 14, 0);
    int yb = buf(p, "tok_bf16", AMK_KIND_IO_OUTPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
    int c = amk_program_add_counter(p, ""), cb = amk_program_add_counter(p, ""), k, t;
    gcase g;
    for (k = 0; k < 5; k++) {
        t = task(p, AMK_OP_ARGMAX_PARTIAL, &x, 1, pr, c, k % 8);
        seti(p, t, "n_off", cut[k]); seti(p, t, "N_tile", cut[k + 1] - cut[k]); seti(p, t, "part", k);
    }
    t = task(p, AMK_OP_ARGMAX_COMBINE, &pr, 1, y, amk_program_add_counter(p, ""), 5);
    amk_task_add_wait(p, t, c, 5);
    for (k = 0; k < 7; k++) {
        const int64_t a = V * k / 7 + (k == 3), b = V * (k + 1) / 7 + (k == 2); /* uneven: 1 moved */
        t = task(p, AMK_OP_ARGMAX_PARTIAL, &xb, 1, prb, cb, (k + 3) % 8);
        seti(p, t, "n_off", a); seti(p, t, "N_tile", b - a); seti(p, t, "part", k);
    }
    t = task(p, AMK_OP_ARGMAX_COMBINE, &prb, 1, yb, amk_program_add_counter(p, ""), 7);
    amk_task_add_wait(p, t, cb, 7);
    if (gcase_begin(&g, p, "ARGMAX pairs", 10.0f)) {
        float *l = (float *)amk_refvm_buffer(g.vm, x, NULL);
        void *lb = amk_refvm_buffer(g.vm, xb, NULL);
        argmax_rows(l, 600); /* row 0's tie across parts 1 and 4; row 1's part 0 all NaN */
        amk__store_f32(lb, AMK_DTYPE_BF16, 100000, 77.0f);
        amk__store_f32(lb, AMK_DTYPE_BF16, 127000, 77.0f);
        gcase_sync_inputs(&g);
        if (gcase_run(&g, "ARGMAX pairs")) {
            gcase_compare_outputs(&g, 0.0, 0.0, "ARGMAX pairs"); /* the partials, the tokens */
            argmax_rows_check(&g, y);
            check_first_token(&g, yb, 100000);
        }
    }
    gcase_end(&g);
}

/* KV_APPEND of k and v on two SMs (one shared counter), attention split over three windows on
   three SMs (partials), ATTENTION_COMBINE on a sixth; then the next position through
   amk_cuda_update_params, with the caches carried over on both VMs. */
static void test_dag_kv_attention(void) {
    const int nh = 6, nkv = 2, hd = 64, max_seq = 64;
    int pos = 47, step;
    amk_program *p = prog_new(6);
    int kn = buf(p, "k_new", AMK_KIND_IO_INPUT, AMK_DTYPE_BF16, 2, nkv, hd, 0);
    int vn = buf(p, "v_new", AMK_KIND_IO_INPUT, AMK_DTYPE_BF16, 2, nkv, hd, 0);
    int kc = buf(p, "k_cache", AMK_KIND_KV_CACHE, AMK_DTYPE_BF16, 3, max_seq, nkv, hd);
    int vc = buf(p, "v_cache", AMK_KIND_KV_CACHE, AMK_DTYPE_BF16, 3, max_seq, nkv, hd);
    int q = buf(p, "q", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, nh, hd, 0);
    int o = buf(p, "out", AMK_KIND_IO_OUTPUT, AMK_DTYPE_BF16, 2, nh, hd, 0);
    int ckv = amk_program_add_counter(p, "kv"), catt = amk_program_add_counter(p, "partials");
    int cout = amk_program_add_counter(p, "out");
    int part[3], in[3], tk, tv, ta[3], tc, w;
    gcase g;
    in[0] = kn; in[1] = kc;
    tk = task(p, AMK_OP_KV_APPEND, in, 2, kc, ckv, 0);
    in[0] = vn; in[1] = vc;
    tv = task(p, AMK_OP_KV_APPEND, in, 2, vc, ckv, 1);
    for (w = 0; w < 3; w++) {
        part[w] = buf(p, "partial", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, nh, hd + 2, 0);
        in[0] = q; in[1] = kc; in[2] = vc;
        ta[w] = task(p, AMK_OP_ATTENTION_TILE, in, 3, part[w], catt, 2 + w);
        seti(p, ta[w], "head_dim", hd); seti(p, ta[w], "n_heads", nh); seti(p, ta[w], "n_kv_heads", nkv);
        setf(p, ta[w], "scale", 0.125); seti(p, ta[w], "flags", AMK_ATTN_FLAG_PARTIAL);
        amk_task_add_wait(p, ta[w], ckv, 2);
    }
    tc = task(p, AMK_OP_ATTENTION_COMBINE, part, 3, o, cout, 5);
    seti(p, tc, "head_dim", hd);
    amk_task_add_wait(p, tc, catt, 3);
    for (step = 0; step < 2; step++, pos++) {
        seti(p, tk, "pos", pos);
        seti(p, tv, "pos", pos);
        seti(p, ta[0], "kv_start", 0);  seti(p, ta[0], "kv_len", 20);
        seti(p, ta[1], "kv_start", 20); seti(p, ta[1], "kv_len", 20);
        seti(p, ta[2], "kv_start", 40); seti(p, ta[2], "kv_len", pos + 1 - 40);
        if (step == 0) {
            if (!gcase_begin(&g, p, "DAG kv", 1.0f)) break;
        } else {
            CHECK_EQ_INT(amk_cuda_update_params(g.cu, p, &g.d), AMK_OK);
        }
        if (!gcase_run(&g, "DAG kv")) break;
        gcase_compare(&g, o, -1, 1e-3, "DAG kv out");
        gcase_compare(&g, kc, 0.0, 0.0, "DAG kv k cache");
        gcase_compare(&g, vc, 0.0, 0.0, "DAG kv v cache");
        for (w = 0; w < 3; w++) gcase_compare(&g, part[w], 1e-5, 1e-5, "DAG kv partial");
    }
    gcase_end(&g);
}

#ifdef AMK_TEST_HAVE_RANDPROG
/* The loosest dtype tolerance among the buffers computed on the way to buffer b: b itself and,
   recursively, the inputs of b's producers that a task writes (inputs nobody writes are the same
   bytes on both sides); memo[] holds the answers, -1 unknown. why: a value rounded to F16 or BF16
   on the way differs by a step of that dtype downstream whenever the GPU's fp32 sum and the
   CPU's (summed in another order) fall on two sides of a rounding boundary (seen: an F32 output
   4e-4 off behind an F16 ADD, bench/RESULTS.md run 34). */
static double path_tol(const amk_program *p, int b, double *memo) {
    int i, j, k;
    if (memo[b] >= 0.0) return memo[b];
    memo[b] = 0.0; /* why first: a cycle through a KV cache ends here */
    for (i = 0; i < p->n_tasks; i++)
        for (j = 0; j < p->tasks[i].n_outputs; j++)
            if (p->tasks[i].outputs[j] == b) {
                if (dtype_tol(p->buffers[b].dtype) > memo[b]) memo[b] = dtype_tol(p->buffers[b].dtype);
                for (k = 0; k < p->tasks[i].n_inputs; k++) {
                    const double t = path_tol(p, p->tasks[i].inputs[k], memo);
                    if (t > memo[b]) memo[b] = t;
                }
            }
    return memo[b];
}

/* Random valid programs (tests/randprog.h), lowered onto n_sms SMs. */
static void test_dag_random(void) {
    const int n_seeds = g_quick ? 3 : 24;
    int s;
    for (s = 0; s < n_seeds; s++) {
        randprog_opts o;
        amk_program *p;
        amk_config cfg;
        amk_target t;
        amk_diag d;
        gcase g;
        char tag[64];
        int b, n_sms = (s % 3 == 0) ? 132 : 4 + s % 13;
        uint64_t seed = g_seed + (uint64_t)s * 7919u;
        o.n_tasks = 20 + s * 4;
        o.kv = -1;
        o.onchip = s % 2;
        o.ops = RANDPROG_OPS_GPU; /* the fused ops, but for the forms the VM takes only in its lean tiles */
        p = randprog_make(seed, &o);
        snprintf(tag, sizeof tag, "random seed %llu sms %d", (unsigned long long)seed, n_sms);
        amk_config_default(&cfg);
        amk_target_builtin("h100", &t);
        t.num_sms = n_sms;
        amk_diag_clear(&d);
        if (amk_program_lower(p, &cfg, &t, &d) != AMK_OK) {
            CHECK_MSG(0, "%s: lower: %s", tag, d.message);
            amk_program_free(p);
            continue;
        }
        if (!gcase_begin(&g, p, tag, 1.0f)) { gcase_end(&g); continue; }
        CHECK(randprog_fill(g.vm, p, seed));
        gcase_sync_inputs(&g);
        if (gcase_run(&g, tag)) {
            double *memo = (double *)malloc((size_t)p->n_buffers * sizeof *memo);
            CHECK(memo != NULL);
            for (b = 0; memo && b < p->n_buffers; b++) memo[b] = -1.0;
            for (b = 0; memo && b < p->n_buffers; b++)
                if (p->buffers[b].kind == AMK_KIND_IO_OUTPUT || p->buffers[b].kind == AMK_KIND_KV_CACHE) {
                    const double t = 4 * fmax(path_tol(p, b, memo), dtype_tol(p->buffers[b].dtype));
                    gcase_compare(&g, b, t, t, tag);
                }
            free(memo);
        }
        gcase_end(&g);
    }
}
#endif

/* ---- the runtime: watchdog, errors, timing, params, images ---------------------------------------- */

/* SM 0 copies x to y; SM 1 waits on a counter nobody signals (validate would refuse this: the test
   goes through the unchecked entry). The launch must end in AMK_ERR_TIMEOUT naming SM 1, quickly,
   with SM 0's work done; the same object must time out again; a valid program must then run. On
   each image: the abort path is in each build's VM loop. */
static void test_watchdog(void) {
    amk_program *p = prog_new(2);
    int x = buf(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 1, 64, 0, 0);
    int y = buf(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 1, 64, 0, 0);
    int z = buf(p, "z", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 1, 64, 0, 0);
    int c0 = amk_program_add_counter(p, "copied"), never = amk_program_add_counter(p, "never");
    int c2 = amk_program_add_counter(p, "stuck");
    int t0, t1, i, round;
    float xs[64], ys[64];
    amk_cuda *cu = NULL;
    amk_diag d;
    t0 = task(p, AMK_OP_COPY, &x, 1, y, c0, 0);
    t1 = task(p, AMK_OP_COPY, &x, 1, z, c2, 1);
    amk_task_add_wait(p, t1, never, 1);
    AMK__UNUSED(t0);
    amk_diag_clear(&d);
    CHECK_EQ_INT(create_on_image(p, 0, &cu, &d), AMK_ERR_REJECTED);
    CHECK(cu == NULL);
    CHECK_EQ_INT(create_on_image(p, 1, &cu, &d), AMK_OK);
    if (!cu) { amk_program_free(p); return; }
    for (i = 0; i < 64; i++) xs[i] = (float)i * 0.5f;
    CHECK_EQ_INT(amk_cuda_upload(cu, x, xs, sizeof xs, &d), AMK_OK);
    for (round = 0; round < 2; round++) {
        double t = now_ms(), dt;
        amk_result r;
        amk_diag_clear(&d);
        r = amk_cuda_run(cu, 200.0 * g_slow, &d);
        dt = now_ms() - t;
        CHECK_EQ_INT(r, AMK_ERR_TIMEOUT);
        CHECK_MSG(dt < 200.0 * g_slow + 1500.0, "the aborted launch took %.0f ms", dt);
        CHECK_EQ_INT(d.task, t1);
        CHECK_EQ_INT(d.counter, never);
        CHECK_MSG(strstr(d.message, "SM 1 at task 1") != NULL, "message: %s", d.message);
        CHECK_MSG(strstr(d.message, "1 of 2 SMs") != NULL, "message: %s", d.message);
        memset(ys, 0, sizeof ys);
        CHECK_EQ_INT(amk_cuda_download(cu, y, ys, sizeof ys, &d), AMK_OK);
        CHECK(memcmp(xs, ys, sizeof xs) == 0); /* SM 0 finished its part */
    }
    amk_cuda_free(cu);
    amk_program_free(p);
    /* the context survives: a valid program runs and is right */
    copy_case(AMK_DTYPE_F32, AMK_DTYPE_BF16, 100, 2.0f);
}

/* A token id out of range: AMK_ERR_RUNTIME naming the task; the next run with good ids works. */
/* The lean tiles (amk_norm_gemv_lean) with a position past the cache, then a negative one: each run
   fails with a run-time error naming a tile, leaves the device usable, and a good position then
   agrees with the reference VM (the tiles' named barriers and staging copies end cleanly on the
   error path). On the general image the same tasks take the general form. */
static void test_lean_errors(void) {
    amk_program *p = prog_new(2);
    int in[4], y, t, i, c = amk_program_add_counter(p, "");
    const int32_t bad_pos[2] = {9, -2}, good = 4;
    gcase g;
    in[0] = buf(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 1, 64, 0);
    in[1] = buf(p, "norm_w", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, 64, 0, 0);
    in[2] = buf(p, "W", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, 16, 64, 0);
    in[3] = buf(p, "pos", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
    y = buf(p, "cache", AMK_KIND_KV_CACHE, AMK_DTYPE_BF16, 2, 9, 16, 0);
    for (i = 0; i < 2; i++) {
        t = task(p, AMK_OP_RMSNORM_GEMV_ROPE_KV, in, 4, y, c, i);
        setf(p, t, "eps", 1e-5);
        seti(p, t, "K", 64);
        seti(p, t, "n_off", 8 * i);
        seti(p, t, "N_tile", 8);
        seti(p, t, "head_dim", 16);
        setf(p, t, "theta", 10000.0);
    }
    if (gcase_begin(&g, p, "lean errors", 1.0f)) {
        for (i = 0; i < 2; i++) {
            amk_result r;
            CHECK_EQ_INT(amk_cuda_upload(g.cu, in[3], &bad_pos[i], 4, NULL), AMK_OK);
            r = amk_cuda_run(g.cu, 5000.0 * g_slow, &g.d);
            CHECK_EQ_INT(r, AMK_ERR_RUNTIME);
            CHECK_MSG(g.d.task == 0 || g.d.task == 1, "task %d: %s", g.d.task, g.d.message);
        }
        amk__store_i64(amk_refvm_buffer(g.vm, in[3], NULL), AMK_DTYPE_I32, 0, good);
        gcase_sync(&g, in[3]);
        if (gcase_run(&g, "lean errors, then good")) gcase_compare(&g, y, -1, -1, "lean errors cache");
    }
    gcase_end(&g);
}

static void test_device_errors(void) {
    amk_program *p = prog_new(2);
    int ids = buf(p, "ids", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 2, 0, 0);
    int tab = buf(p, "table", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 2, 10, 8, 0);
    int y = buf(p, "y", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 2, 8, 0);
    int z = buf(p, "z", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, 2, 8, 0);
    int pos = buf(p, "pos", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
    int c0 = amk_program_add_counter(p, ""), c1 = amk_program_add_counter(p, "");
    int in[2], t, t2;
    int32_t bad[2] = {3, 10}, good[2] = {3, 9}, neg = -5, zero = 0;
    gcase g;
    in[0] = ids; in[1] = tab;
    t = task(p, AMK_OP_EMBED, in, 2, y, c0, 0);
    seti(p, t, "hidden", 8);
    in[0] = y; in[1] = pos;
    t2 = task(p, AMK_OP_ROPE, in, 2, z, c1, 1);
    seti(p, t2, "head_dim", 8);
    setf(p, t2, "theta", 10000.0);
    amk_task_add_wait(p, t2, c0, 1);
    if (gcase_begin(&g, p, "device errors", 1.0f)) {
        amk_result r;
        CHECK_EQ_INT(amk_cuda_upload(g.cu, pos, &zero, 4, NULL), AMK_OK);
        CHECK_EQ_INT(amk_cuda_upload(g.cu, ids, bad, sizeof bad, NULL), AMK_OK);
        r = amk_cuda_run(g.cu, 5000.0 * g_slow, &g.d);
        CHECK_EQ_INT(r, AMK_ERR_RUNTIME);
        CHECK_EQ_INT(g.d.task, t);
        CHECK_MSG(strstr(g.d.message, "token id") && strstr(g.d.message, "10"), "message: %s", g.d.message);
        CHECK_EQ_INT(amk_cuda_upload(g.cu, ids, good, sizeof good, NULL), AMK_OK);
        CHECK_EQ_INT(amk_cuda_upload(g.cu, pos, &neg, 4, NULL), AMK_OK);
        r = amk_cuda_run(g.cu, 5000.0 * g_slow, &g.d);
        CHECK_EQ_INT(r, AMK_ERR_RUNTIME);
        CHECK_EQ_INT(g.d.task, t2);
        CHECK_MSG(strstr(g.d.message, "position") && strstr(g.d.message, "-5"), "message: %s", g.d.message);
        memcpy(amk_refvm_buffer(g.vm, ids, NULL), good, sizeof good);
        memcpy(amk_refvm_buffer(g.vm, pos, NULL), &zero, 4);
        gcase_sync(&g, ids);
        gcase_sync(&g, pos);
        if (gcase_run(&g, "device errors, then good")) gcase_compare(&g, z, 0.0, 0.0, "device errors z");
    }
    gcase_end(&g);
}

/* A chain of n dependent MUL tasks a[i+1] = a[i] * w ([1, H] F32), task i on SM (stride*i) % n_sms;
   returns the last buffer (the IO_OUTPUT). */
static int mul_chain(amk_program *p, int n, int n_sms, int stride, int H) {
    int prev = buf(p, "a0", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 1, H, 0, 0), w = buf(p, "w", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 1, H, 0, 0);
    int i, prev_c = -1;
    for (i = 0; i < n; i++) {
        int in[2], t, c = amk_program_add_counter(p, ""), out;
        char name[16];
        snprintf(name, sizeof name, "a%d", i + 1);
        out = buf(p, name, i == n - 1 ? AMK_KIND_IO_OUTPUT : AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 1, H, 0, 0);
        in[0] = prev; in[1] = w;
        t = task(p, AMK_OP_MUL, in, 2, out, c, (stride * i) % n_sms);
        if (prev_c >= 0) amk_task_add_wait(p, t, prev_c, 1);
        prev = out;
        prev_c = c;
    }
    return prev;
}

/* Timing: every task recorded on its SM, and each consumer starts after its producer ended. */
static void test_timing(void) {
    const int n = 24, n_sms = 8, H = 256;
    amk_program *p = prog_new(n_sms);
    int prev = mul_chain(p, n, n_sms, 3, H), i, n_rec = 0;
    amk_cuda_timing_record rec[24];
    amk_cuda_info info;
    gcase g;
    if (gcase_begin(&g, p, "timing", 1.0f)) {
        CHECK_EQ_INT(amk_cuda_timing(g.cu, rec, n, &n_rec, &g.d), AMK_ERR_INVALID_ARG); /* not on yet */
        amk_cuda_set_timing(g.cu, 1);
        if (gcase_run(&g, "timing")) {
            amk_cuda_get_info(g.cu, &info);
            CHECK_EQ_INT(amk_cuda_timing(g.cu, rec, n, &n_rec, &g.d), AMK_OK);
            CHECK_EQ_INT(n_rec, n);
            for (i = 0; i < n_rec; i++) {
                CHECK(rec[i].done);
                CHECK_EQ_INT(rec[i].task, i);
                CHECK_EQ_INT(rec[i].op, AMK_OP_MUL);
                CHECK_EQ_INT(rec[i].sm, (3 * i) % n_sms);
                CHECK(rec[i].hw_sm >= 0 && rec[i].hw_sm < info.device_sms);
                CHECK(rec[i].end_us >= rec[i].start_us && rec[i].wait_us >= 0.0);
                /* the shipped image records no marks (AMK_VM_MARKS 0); nonzero here would mean the
                   host reads them from the wrong place of the timing area */
                for (int k = 0; k < AMK_VM_MARKS_N; k++) CHECK(rec[i].mark_us[k] == 0.0);
                if (i > 0) CHECK_MSG(rec[i].start_us >= rec[i - 1].end_us, "task %d started %.3f us before task %d ended",
                                     i, rec[i - 1].end_us - rec[i].start_us, i - 1);
            }
            gcase_compare(&g, prev, 0.0, 0.0, "timing out");
        }
    }
    gcase_end(&g);
}

/* update_params must refuse another program and out-of-range params (the device trusts them). */
static void test_update_params_checks(void) {
    amk_program *p = prog_new(1), *q;
    int nw = buf(p, "new", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 1, 16, 0, 0);
    int cache = buf(p, "cache", AMK_KIND_KV_CACHE, AMK_DTYPE_F32, 2, 4, 16, 0);
    int in[2], t;
    gcase g;
    in[0] = nw; in[1] = cache;
    t = task(p, AMK_OP_KV_APPEND, in, 2, cache, amk_program_add_counter(p, ""), 0);
    seti(p, t, "pos", 1);
    if (gcase_begin(&g, p, "update_params", 1.0f)) {
        q = amk_program_clone(p);
        seti(q, t, "pos", 4); /* one past the cache */
        CHECK_EQ_INT(amk_cuda_update_params(g.cu, q, &g.d), AMK_ERR_REJECTED);
        CHECK_STR(g.d.check, "PARAM_VALUE");
        q->tasks[0].op = AMK_OP_COPY;
        CHECK_EQ_INT(amk_cuda_update_params(g.cu, q, &g.d), AMK_ERR_MISMATCH);
        amk_program_free(q);
        seti(p, t, "pos", 3);
        CHECK_EQ_INT(amk_cuda_update_params(g.cu, p, &g.d), AMK_OK);
        if (gcase_run(&g, "update_params")) gcase_compare(&g, cache, 0.0, 0.0, "update_params");
    }
    gcase_end(&g);
}

static void test_upload_checks(void) {
    amk_program *p = prog_new(1);
    int x = buf(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_BF16, 1, 5, 0, 0), y = buf(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_I4, 1, 5, 0, 0);
    unsigned char tmp[64];
    gcase g;
    task(p, AMK_OP_COPY, &x, 1, y, amk_program_add_counter(p, ""), 0);
    if (gcase_begin(&g, p, "upload checks", 1.0f)) {
        CHECK_EQ_INT(amk_cuda_upload(g.cu, x, tmp, 9, &g.d), AMK_ERR_MISMATCH);
        CHECK_EQ_INT(g.d.buffer, x);
        CHECK_EQ_INT(amk_cuda_upload(g.cu, 7, tmp, 10, &g.d), AMK_ERR_INVALID_ARG);
        CHECK_EQ_INT(amk_cuda_upload(g.cu, -1, tmp, 10, &g.d), AMK_ERR_INVALID_ARG);
        CHECK_EQ_INT(amk_cuda_download(g.cu, y, tmp, 3, &g.d), AMK_OK); /* 5 nibbles = 3 bytes */
        CHECK_EQ_INT(amk_cuda_download(g.cu, y, tmp, 4, &g.d), AMK_ERR_MISMATCH);
    }
    gcase_end(&g);
}

/* amk_cuda_run_io: the inputs go in, the run happens, the outputs come back, as with separate
   upload/run/download calls; a bad argument is refused before anything is copied or run. */
static void test_run_io(void) {
    amk_program *p = prog_new(2);
    int x = buf(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 1, 300, 0, 0), y = buf(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 1, 300, 0, 0);
    int z = buf(p, "z", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 1, 300, 0, 0);
    float xs[300], ys[300], zs[300], tmp[300];
    gcase g;
    int i;
    task(p, AMK_OP_COPY, &x, 1, y, amk_program_add_counter(p, ""), 0);
    task(p, AMK_OP_COPY, &x, 1, z, amk_program_add_counter(p, ""), 1);
    if (gcase_begin(&g, p, "run_io", 1.0f)) {
        amk_cuda_in in[1];
        amk_cuda_out out[2];
        int k;
        for (k = 0; k < 3; k++) { /* the staging is reused and grows: 1, then 2 outputs */
            for (i = 0; i < 300; i++) { xs[i] = (float)(i * (k + 1)) / 7.0f; ys[i] = zs[i] = -1.0f; }
            in[0].buffer_id = x; in[0].host = xs; in[0].nbytes = sizeof xs;
            out[0].buffer_id = y; out[0].host = ys; out[0].nbytes = sizeof ys;
            out[1].buffer_id = z; out[1].host = zs; out[1].nbytes = sizeof zs;
            CHECK_EQ_INT(amk_cuda_run_io(g.cu, in, 1, out, k == 0 ? 1 : 2, 10000.0 * g_slow, &g.d), AMK_OK);
            for (i = 0; i < 300; i++) {
                CHECK_MSG(ys[i] == xs[i], "round %d y[%d] %g, wanted %g", k, i, ys[i], xs[i]);
                CHECK_MSG(zs[i] == (k == 0 ? -1.0f : xs[i]), "round %d z[%d] %g", k, i, zs[i]);
            }
            CHECK_EQ_INT(amk_cuda_download(g.cu, z, tmp, sizeof tmp, &g.d), AMK_OK);
            CHECK(memcmp(tmp, xs, sizeof tmp) == 0); /* the device ran, whatever was copied out */
        }
        in[0].nbytes = 4; /* refused: nothing copied, nothing run */
        for (i = 0; i < 300; i++) ys[i] = -2.0f;
        CHECK_EQ_INT(amk_cuda_run_io(g.cu, in, 1, out, 1, 1000.0, &g.d), AMK_ERR_MISMATCH);
        CHECK_EQ_INT(g.d.buffer, x);
        CHECK(ys[0] == -2.0f);
        in[0].nbytes = sizeof xs;
        out[0].buffer_id = 99;
        CHECK_EQ_INT(amk_cuda_run_io(g.cu, in, 1, out, 1, 1000.0, &g.d), AMK_ERR_INVALID_ARG);
        CHECK_EQ_INT(amk_cuda_run_io(g.cu, NULL, 1, out, 0, 1000.0, &g.d), AMK_ERR_INVALID_ARG);
        CHECK_EQ_INT(amk_cuda_run_io(g.cu, in, -1, out, 0, 1000.0, &g.d), AMK_ERR_INVALID_ARG);
        CHECK_EQ_INT(amk_cuda_run_io(g.cu, NULL, 0, NULL, 0, 10000.0 * g_slow, &g.d), AMK_OK); /* a plain run */
    }
    gcase_end(&g);
}

/* Chained steps (amk_cuda_set_chain, amk_cuda_run_chain) on a two-SM program whose next token is
   its position (SM 0: COPY pos -> next) and which embeds its token (SM 1: EMBED of an 8-row
   table): the tokens come back as pos0, pos0 + 1, ... (each step saw its own position, and the
   feed ran between steps), the embedding is the last step's token's row, the inputs end at the
   last step's token and position, and time_runs restarts each launch from the chain's start. A
   chain that feeds token 8 fails in the step after with the EMBED's run-time error, and the
   context goes on working. Bad chains are refused. On each image: each build has its own
   chained-steps kernel. */
static void test_chain(void) {
    amk_program *p = prog_new(2);
    int tok = buf(p, "token", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
    int pos = buf(p, "pos", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
    int next = buf(p, "next", AMK_KIND_IO_OUTPUT, AMK_DTYPE_I32, 1, 1, 0, 0);
    int tab = buf(p, "table", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 2, 8, 4, 0);
    int emb = buf(p, "emb", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, 1, 4, 0);
    int ein[2], t, i;
    float table[32], e[4];
    int32_t toks[8], v;
    double med = 0.0;
    amk_cuda *cu = NULL;
    amk_cuda_chain ch;
    amk_diag d;
    ein[0] = tok;
    ein[1] = tab;
    task(p, AMK_OP_COPY, &pos, 1, next, amk_program_add_counter(p, "next"), 0);
    t = task(p, AMK_OP_EMBED, ein, 2, emb, amk_program_add_counter(p, "emb"), 1);
    seti(p, t, "hidden", 4);
    amk_diag_clear(&d);
    CHECK_EQ_INT(create_on_image(p, 0, &cu, &d), AMK_OK);
    if (!cu) { fprintf(stderr, "create: %s\n", d.message); amk_program_free(p); return; }
    for (i = 0; i < 32; i++) table[i] = (float)i;
    CHECK_EQ_INT(amk_cuda_upload(cu, tab, table, sizeof table, &d), AMK_OK);
    ch.token_buf = tok; ch.pos_buf = pos; ch.next_buf = next; ch.n_steps = 3;
    CHECK_EQ_INT(amk_cuda_run_chain(cu, 0, 5, toks, 0.0, &d), AMK_ERR_INVALID_ARG); /* no chain yet */
    CHECK_EQ_INT(amk_cuda_set_chain(cu, &ch, &d), AMK_OK);
    CHECK_EQ_INT(amk_cuda_time_runs(cu, 0, 1, &med, NULL, &d), AMK_ERR_INVALID_ARG); /* no start yet */
    CHECK_EQ_INT(amk_cuda_run_chain(cu, 0, INT32_MAX - 1, toks, 0.0, &d), AMK_ERR_INVALID_ARG);
    for (i = 0; i < 2; i++) { /* twice: the second starts on the join count the first left */
        memset(toks, 0xFF, sizeof toks);
        CHECK_EQ_INT(amk_cuda_run_chain(cu, 0, 5, toks, 10000.0 * g_slow, &d), AMK_OK);
        CHECK_MSG(toks[0] == 5 && toks[1] == 6 && toks[2] == 7, "round %d: tokens %d %d %d: %s", i, toks[0], toks[1], toks[2],
                  d.message);
        CHECK_EQ_INT(amk_cuda_download(cu, emb, e, sizeof e, &d), AMK_OK);
        CHECK_MSG(e[0] == 24.0f && e[3] == 27.0f, "embedding row of the last token (6): %g .. %g", e[0], e[3]);
        CHECK_EQ_INT(amk_cuda_download(cu, pos, &v, 4, &d), AMK_OK);
        CHECK_EQ_INT(v, 7);
        CHECK_EQ_INT(amk_cuda_download(cu, tok, &v, 4, &d), AMK_OK);
        CHECK_EQ_INT(v, 6);
    }
    CHECK_EQ_INT(amk_cuda_time_runs(cu, 1, 3, &med, NULL, &d), AMK_OK); /* each launch from (0, 5) */
    CHECK(med > 0.0);
    CHECK_EQ_INT(amk_cuda_download(cu, pos, &v, 4, &d), AMK_OK);
    CHECK_EQ_INT(v, 7);
    ch.n_steps = 6; /* tokens 5, 6, 7, 8: step 4 embeds 8, past the table */
    CHECK_EQ_INT(amk_cuda_set_chain(cu, &ch, &d), AMK_OK);
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_cuda_run_chain(cu, 0, 5, toks, 10000.0 * g_slow, &d), AMK_ERR_RUNTIME);
    CHECK_MSG(strstr(d.message, "token id out of range: 8") != NULL, "message: %s", d.message);
    ch.n_steps = 3;
    CHECK_EQ_INT(amk_cuda_set_chain(cu, &ch, &d), AMK_OK);
    CHECK_EQ_INT(amk_cuda_run_chain(cu, 0, 1, toks, 10000.0 * g_slow, &d), AMK_OK); /* the context still works */
    CHECK_MSG(toks[0] == 1 && toks[1] == 2 && toks[2] == 3, "after the error: tokens %d %d %d", toks[0], toks[1], toks[2]);
    CHECK_EQ_INT(amk_cuda_run(cu, 10000.0 * g_slow, &d), AMK_OK); /* a plain launch: one step */
    CHECK_EQ_INT(amk_cuda_download(cu, next, &v, 4, &d), AMK_OK);
    CHECK_EQ_INT(v, 3); /* the position the chain left */
    /* refused: a wrong kind, dtype or size, a buffer twice, no writer of next, steps out of range */
    ch.token_buf = emb;
    CHECK_EQ_INT(amk_cuda_set_chain(cu, &ch, &d), AMK_ERR_INVALID_ARG);
    ch.token_buf = tok; ch.next_buf = tab;
    CHECK_EQ_INT(amk_cuda_set_chain(cu, &ch, &d), AMK_ERR_INVALID_ARG);
    ch.next_buf = pos;
    CHECK_EQ_INT(amk_cuda_set_chain(cu, &ch, &d), AMK_ERR_INVALID_ARG);
    ch.next_buf = 99;
    CHECK_EQ_INT(amk_cuda_set_chain(cu, &ch, &d), AMK_ERR_INVALID_ARG);
    ch.next_buf = next; ch.n_steps = 0;
    CHECK_EQ_INT(amk_cuda_set_chain(cu, &ch, &d), AMK_ERR_INVALID_ARG);
    ch.n_steps = AMK_CUDA_MAX_CHAIN + 1;
    CHECK_EQ_INT(amk_cuda_set_chain(cu, &ch, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_set_chain(cu, NULL, &d), AMK_OK); /* off */
    CHECK_EQ_INT(amk_cuda_run_chain(cu, 0, 1, toks, 0.0, &d), AMK_ERR_INVALID_ARG);
    amk_cuda_free(cu);
    amk_program_free(p);
}

/* amk_llm_generate on SmolLM2's shape with random bf16 weights (the small-model forms, two SM
   sets, KV rows written by the Q/K/V tiles): 24 greedy tokens as chains of 16 and 8 equal 24
   single steps from the same start.
   AMK_TEST_LLM_CHAIN=single:N or chain:N runs only N single steps or one chain of N steps, and
   compares nothing. why: under compute-sanitizer a step takes ~10 s (AMK_TEST_SLOW lengthens the
   timeout), and a report must name the kernel it comes from (scripts/gpu_run.sh phase b). */
static int prefill_blk_of(void *user, const char *tensor, int64_t rows, int64_t cols) {
    (void)tensor; (void)rows; (void)cols;
    return *(const int *)user;
}

/* The prefill program (amk_llama_build's prefill_rows) of a small Llama on the GPU against the
   reference VM, random weights and caches (rows below the chunk: earlier chunks): a chunk of 12
   prompt rows at positions 5..16, every cache and the last row's logits; dt its weights and
   activations, blk (-1: none) a block format for every matrix and the embedding (with 16-bit
   activations the chunk dequantizes its matrices into 16-bit copies for its tensor-core tiles,
   COPY; with F32 ones the row tiles read the blocks). With a block format the random values are
   scaled down: a K-quant's 6-bit sub-block scales make random blocks' weights ~60x a Q4_0's, the
   attention's scores then saturate, and the tensor-copy norm's bf16 rounding of x * norm_w (the
   reference VM does not round) flips which key wins in a row (seeds 1 and 4 at 0.5, run 410).
   wide: hidden 1024 (16 heads) and intermediate 2048, whose O and down the builder splits by K
   (amk__lb_k_splits: GEMM_TILEs of K ranges and ALLREDUCE_SHARDs of rows; checked present). */
static void prefill_program_case(const char *tag, int dt, int blk, int wide) {
    amk_llama_config c;
    amk_llama_build_opts o;
    amk_program *p = NULL;
    amk_diag d;
    gcase g;
    int32_t tok[12], pos[12], last = 11;
    int i, b;
    memset(&c, 0, sizeof c);
    snprintf(c.arch, sizeof c.arch, "llama");
    c.n_layers = 2; c.hidden = wide ? 1024 : 256; c.intermediate = wide ? 2048 : 512; c.n_heads = wide ? 16 : 4;
    c.n_kv_heads = 2; c.head_dim = 64; c.vocab = 300; c.max_pos = 64; c.rms_eps = 1e-5f; c.rope_theta = 10000.0f;
    c.tie_embeddings = 1;
    amk_llama_build_opts_default(&o);
    o.weight_dtype = o.act_dtype = dt;
    o.max_seq = 32;
    o.prefill_rows = 12;
    if (blk >= 0) {
        o.weight_dtype_of = prefill_blk_of;
        o.weight_dtype_user = &blk;
    }
    amk_diag_clear(&d);
    CHECK_MSG(amk_llama_build_lowered(&c, &o, &p, &d) == AMK_OK, "%s: %s", tag, d.message);
    if (!p) return;
    if (wide) {
        int n_range = 0, n_sum = 0;
        for (i = 0; i < p->n_tasks; i++) {
            n_range += amk_task_param(&p->tasks[i], "K_tile") != NULL;
            n_sum += p->tasks[i].op == AMK_OP_ALLREDUCE_SHARD;
        }
        CHECK_MSG(n_range > 0 && n_sum > 0, "%s: %d K-range tiles, %d sums", tag, n_range, n_sum);
    }
    for (i = 0; i < 12; i++) { tok[i] = (i * 37 + 11) % c.vocab; pos[i] = 5 + i; }
    if (gcase_begin(&g, p, tag, blk >= 0 ? 0.02f : 0.5f)) {
        for (b = 0; b < p->n_buffers; b++) {
            const char *n = p->buffers[b].name ? p->buffers[b].name : "";
            if (strcmp(n, "token") == 0) gcase_set_i32(&g, b, tok, 12);
            if (strcmp(n, "pos") == 0) gcase_set_i32(&g, b, pos, 12);
            if (strcmp(n, "last") == 0) gcase_set_i32(&g, b, &last, 1);
        }
        if (gcase_run(&g, tag))
            for (b = 0; b < p->n_buffers; b++) {
                const char *n = p->buffers[b].name ? p->buffers[b].name : "";
                /* why a 16-bit tolerance a layer deep: the prefill image rounds x * norm_w to bf16
                   before its tensor-core products (the reference VM does not), so the differences
                   grow through the layers: a layer's caches take its depth + 1 times BF16's
                   tolerance, the logits n_layers + 1 times (one seed in ~300 crossed the flat
                   tolerance: bench/NOTES.md sessions "rows" and "portable") */
                const int depth = strcmp(n, "logits") == 0 ? c.n_layers : atoi(strchr(n, '.') ? strchr(n, '.') + 1 : "0");
                if (strcmp(n, "logits") == 0 || strncmp(n, "k_cache.", 8) == 0 || strncmp(n, "v_cache.", 8) == 0)
                    gcase_compare(&g, b, dt == AMK_DTYPE_F32 ? 1e-4 : dtype_tol(AMK_DTYPE_BF16) * (depth + 1),
                                  dt == AMK_DTYPE_F32 ? 1e-4 : 2e-2 * (depth + 1), tag);
            }
    }
    gcase_end(&g);
}

static void test_prefill_program(void) {
    prefill_program_case("PREFILL program f32", AMK_DTYPE_F32, -1, 0);
    prefill_program_case("PREFILL program bf16", AMK_DTYPE_BF16, -1, 0);
    prefill_program_case("PREFILL program q4_k", AMK_DTYPE_BF16, AMK_DTYPE_Q4_K, 0);
    prefill_program_case("PREFILL program q8_0", AMK_DTYPE_F32, AMK_DTYPE_Q8_0, 0);
    /* F16 activations: the tensor-copy Q/K/V and the tensor-core attention in f16 (BF16's
       tolerance, a bound f16's finer rounding meets) */
    prefill_program_case("PREFILL program f16", AMK_DTYPE_F16, -1, 0);
    prefill_program_case("PREFILL program q4_k f16", AMK_DTYPE_F16, AMK_DTYPE_Q4_K, 0);
    /* O and down by K ranges (a short chunk on many SMs) */
    prefill_program_case("PREFILL program split-K bf16", AMK_DTYPE_BF16, -1, 1);
    prefill_program_case("PREFILL program split-K q4_k", AMK_DTYPE_BF16, AMK_DTYPE_Q4_K, 1);
}

static void test_llm_chain(void) {
    amk_llama_config cfg;
    amk_llm_opts o;
    amk_llm *m = NULL;
    amk_diag d;
    int a[24], b[24], i, same = 0, part_n = 0;
    const char *part = getenv("AMK_TEST_LLM_CHAIN");
    amk_diag_clear(&d);
    if (part) {
        part_n = atoi(strchr(part, ':') ? strchr(part, ':') + 1 : "");
        CHECK_MSG((strncmp(part, "single:", 7) == 0 || strncmp(part, "chain:", 6) == 0) && part_n >= 1 && part_n <= 24,
                  "AMK_TEST_LLM_CHAIN='%s': single:N or chain:N, N in 1..24", part);
        if (part_n < 1 || part_n > 24) return;
    }
    CHECK_EQ_INT(amk_llama_config_preset("smollm2-135m", &cfg), AMK_OK);
    amk_llm_opts_default(&o);
    o.backend = AMK_BACKEND_CUDA;
    o.device_image = g_image;
    o.device_image_size = g_image_size;
    o.build.weight_dtype = AMK_DTYPE_BF16;
    o.build.act_dtype = AMK_DTYPE_BF16;
    o.build.max_seq = 64;
    o.timeout_ms = 10000.0 * g_slow;
    CHECK_EQ_INT(amk_llm_open_random(&cfg, &o, &m, &d), AMK_OK);
    if (!m) { fprintf(stderr, "open: %s\n", d.message); return; }
    { /* why: without the chain kernel amk_llm_generate runs a step a launch, and this would pass */
        amk_cuda_info info;
        amk_cuda_get_info(amk_llm_cuda(m), &info);
        CHECK_MSG(info.can_chain, "the image set has no chained-steps kernel for the %s build",
                  AMK_IMAGE_KIND_NAME(info.image_kind));
    }
    CHECK_EQ_INT(amk_llm_seek(m, 3, &d), AMK_OK); /* why: from position 3 on, rows 0..2 zero */
    if (part) {
        if (part[0] == 's') {
            for (i = 0; i < part_n; i++)
                if (amk_llm_step(m, i ? a[i - 1] : 7, 3 + i, NULL, &a[i], &d) != AMK_OK) break;
            CHECK_MSG(i == part_n, "single step %d of %d: %s", i, part_n, d.message);
        } else
            CHECK_EQ_INT(amk_llm_generate(m, 7, 3, part_n, b, &d), AMK_OK);
        amk_llm_close(m);
        return;
    }
    for (i = 0; i < 24; i++) CHECK_EQ_INT(amk_llm_step(m, i ? a[i - 1] : 7, 3 + i, NULL, &a[i], &d), AMK_OK);
    CHECK_EQ_INT(amk_llm_reset(m, &d), AMK_OK);
    CHECK_EQ_INT(amk_llm_seek(m, 3, &d), AMK_OK);
    CHECK_EQ_INT(amk_llm_generate(m, 7, 3, 16, b, &d), AMK_OK);
    CHECK_EQ_INT(amk_llm_generate(m, b[15], 19, 8, b + 16, &d), AMK_OK);
    for (i = 0; i < 24; i++) same += a[i] == b[i];
    CHECK_MSG(same == 24, "%d of 24 tokens equal (the first: %d single, %d chained): %s", same, a[0], b[0], d.message);
    CHECK_EQ_INT(amk_llm_generate(m, 7, 60, 5, b, &d), AMK_ERR_RUNTIME); /* past the cache: refused */
    amk_llm_close(m);
}

/* The PTX image goes through the driver's JIT; a broken one reports ptxas's log. */
static void test_images(void) {
    static const char bad_ptx[] = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry amk_vm_main() { bogus.instruction; }\n";
    amk_program *p = prog_new(1);
    int x = buf(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 1, 300, 0, 0), y = buf(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F16, 1, 300, 0, 0);
    amk_cuda *cu = NULL;
    amk_diag d;
    amk_cuda_info info;
    double t0;
    float xs[300], ys[300];
    uint16_t hs[300];
    int i;
    task(p, AMK_OP_COPY, &x, 1, y, amk_program_add_counter(p, ""), 0);
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_cuda_create(p, bad_ptx, sizeof bad_ptx - 1, &cu, &d), AMK_ERR_CUDA);
    CHECK(cu == NULL);
    CHECK_MSG(d.jit_log[0] != 0, "no JIT log; message: %s", d.message);
    CHECK_MSG(strstr(d.cuda_error, "CUDA_ERROR_") != NULL, "cuda_error: %s", d.cuda_error);
    if (!g_quick) {
        amk_diag_clear(&d);
        t0 = now_ms();
        /* the embedded PTX without its NUL: the loader must terminate it */
        CHECK_EQ_INT(amk_cuda_create(p, amk_device_ptx.bytes, amk_device_ptx_size, &cu, &d), AMK_OK);
        printf("  PTX JIT load: %.0f ms\n", now_ms() - t0);
        if (cu) {
            for (i = 0; i < 300; i++) xs[i] = (float)i / 7.0f;
            CHECK_EQ_INT(amk_cuda_upload(cu, x, xs, sizeof xs, &d), AMK_OK);
            CHECK_EQ_INT(amk_cuda_run(cu, 10000.0 * g_slow, &d), AMK_OK);
            CHECK_EQ_INT(amk_cuda_download(cu, y, hs, sizeof hs, &d), AMK_OK);
            for (i = 0; i < 300; i++) ys[i] = amk_f16_to_f32(hs[i]);
            for (i = 0; i < 300; i++) CHECK(ys[i] == amk_f16_to_f32(amk_f32_to_f16(xs[i])));
            amk_cuda_get_info(cu, &info);
            CHECK(info.cc_major == 9);
            amk_cuda_free(cu);
        }
    }
    amk_program_free(p);
}

static void test_info(void) {
    amk_cuda_info info;
    amk_cuda_get_info(g_keep, &info);
    CHECK(info.device_name[0] != 0);
    CHECK_EQ_INT(info.cc_major, 9);
    CHECK(info.device_sms >= 100);
    CHECK_EQ_INT(info.threads, 256);
    CHECK(info.regs_per_thread > 0 && info.regs_per_thread <= 128);
    CHECK_EQ_INT(info.smem_bytes, 16); /* a NOP stages nothing: the least the launch asks for */
    printf("  device: %s, cc %d.%d, %d SMs, driver %d; VM: %d regs/thread, %lld B dynamic smem\n",
           info.device_name, info.cc_major, info.cc_minor, info.device_sms, info.driver_version,
           info.regs_per_thread, (long long)info.smem_bytes);
}

/* ---- service kernels: fills, bandwidth, timed runs ---------------------------------------------- */

/* The element dtypes (codes 0 .. AMK_DTYPE_Q8_0 - 1); the block formats: test_fill_blocks. */
static const amk_dtype all_dtypes[AMK_DTYPE_Q8_0] = {
    AMK_DTYPE_F32, AMK_DTYPE_F16, AMK_DTYPE_BF16, AMK_DTYPE_F8E4M3, AMK_DTYPE_F8E5M2,
    AMK_DTYPE_I32, AMK_DTYPE_I8, AMK_DTYPE_I4, AMK_DTYPE_U8, AMK_DTYPE_BOOL};

/* A program of one NOP and, per element dtype, a weight of n elements (buffer id = dtype code; a
   U8 placeholder at each block format's code), then a second BF16 weight "twin" (id
   AMK_DTYPE_COUNT) and a U8 "guard" [64] (id AMK_DTYPE_COUNT + 1). */
static amk_cuda *fill_setup(amk_program **pp, int64_t n) {
    amk_program *p = prog_new(1);
    amk_cuda *cu = NULL;
    amk_diag d;
    int k;
    for (k = 0; k < AMK_DTYPE_COUNT; k++) {
        const amk_dtype t = k < AMK_DTYPE_Q8_0 ? all_dtypes[k] : AMK_DTYPE_U8;
        buf(p, k < AMK_DTYPE_Q8_0 ? amk_dtype_name(t) : "placeholder", AMK_KIND_WEIGHT, t, 1, n, 0, 0);
    }
    buf(p, "twin", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 1, n, 0, 0);
    buf(p, "guard", AMK_KIND_WEIGHT, AMK_DTYPE_U8, 1, 64, 0, 0);
    k = amk_program_add_task(p, AMK_OP_NOP, NULL, 0, NULL, 0, amk_program_add_counter(p, ""), "nop");
    p->tasks[k].sm = 0;
    amk_diag_clear(&d);
    CHECK_MSG(amk_cuda_create(p, g_image, g_image_size, &cu, &d) == AMK_OK, "fill program: %s", d.message);
    *pp = p;
    return cu;
}

/* The fill's float stream before the dtype's rounding: amk_fill_random_bits' host twin. */
static float fill_ref(uint64_t seed, int buffer_id, int64_t i, float scale) {
    uint64_t x = amk__cuda_fill_seed(seed, buffer_id) + (uint64_t)i * 0x9E3779B97F4A7C15ull;
    uint64_t h = amk__splitmix64(&x);
    return ((float)(uint32_t)(h >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * scale;
}

static void test_fill_random(void) {
    const int64_t n = g_quick ? 4099 : 100003; /* why: odd, so the last 16-byte chunk is partial */
    amk_program *p = NULL;
    amk_cuda *cu = fill_setup(&p, n);
    unsigned char guard[64], back[64];
    amk_diag d;
    int k;
    amk_diag_clear(&d);
    if (!cu) { amk_program_free(p); return; }
    memset(guard, 0xA5, sizeof guard);
    CHECK_EQ_INT(amk_cuda_upload(cu, AMK_DTYPE_COUNT + 1, guard, sizeof guard, &d), AMK_OK);
    for (k = 0; k < AMK_DTYPE_Q8_0; k++) {
        const amk_dtype dt = all_dtypes[k];
        const int is_float = amk_dtype_is_float(dt);
        const float scale = is_float ? 0.5f : dt == AMK_DTYPE_I32 ? 1000.0f : dt == AMK_DTYPE_I8 ? 100.5f
                          : dt == AMK_DTYPE_U8 ? 200.0f : dt == AMK_DTYPE_I4 ? 99.0f : 2.0f;
        /* integer ranges: [0, (int)scale) capped at the dtype (I4 holds 0..7 as q) */
        const int count = dt == AMK_DTYPE_I32 ? 1000 : dt == AMK_DTYPE_I8 ? 100 : dt == AMK_DTYPE_U8 ? 200 : dt == AMK_DTYPE_I4 ? 8 : 2;
        const size_t nb = (size_t)amk_dtype_nbytes(dt, n);
        unsigned char *a = (unsigned char *)malloc(nb), *b = (unsigned char *)malloc(nb);
        int64_t i, bad = 0, differ = 0, seen[256];
        double lo = 1e30, hi = -1e30, sum = 0.0;
        memset(seen, 0, sizeof seen);
        CHECK_EQ_INT(amk_cuda_fill_random(cu, dt, 42, scale, &d), AMK_OK);
        CHECK_EQ_INT(amk_cuda_download(cu, dt, a, nb, &d), AMK_OK);
        for (i = 0; i < n; i++) {
            const double v = amk__load_f32(a, dt, i);
            if (is_float) {
                if (!(v >= -scale && v < scale)) bad++;
            } else if (!(v >= 0 && v < count && v == floor(v))) {
                bad++;
            } else if (v < 256) {
                seen[(int)v]++;
            }
            if (v < lo) lo = v;
            if (v > hi) hi = v;
            sum += v;
        }
        CHECK_MSG(bad == 0, "fill_random %s: %lld of %lld values outside the range", amk_dtype_name(dt), (long long)bad, (long long)n);
        if (is_float) {
            CHECK_MSG(lo < -0.8 * scale && hi > 0.8 * scale && fabs(sum / (double)n) < 0.05 * scale,
                      "fill_random %s: min %g max %g mean %g", amk_dtype_name(dt), lo, hi, sum / (double)n);
        } else {
            /* every value drawn where n is many times count (I32: only the ends of the range) */
            int v, missing = 0;
            for (v = 0; v < count && count <= 256; v++) missing += seen[v] == 0;
            CHECK_MSG(missing == 0 && hi >= 0.98 * (count - 1) && lo <= 0.02 * count,
                      "fill_random %s: %d of %d values never drawn, min %g max %g", amk_dtype_name(dt), missing, count, lo, hi);
        }
        if (dt == AMK_DTYPE_I4) CHECK_EQ_INT(a[n / 2] >> 4, 0); /* the nibble past an odd count */
        /* bit-exact against the host twin where the dtype's rounding is plain: f32, bf16 (truncation) */
        for (i = 0, bad = 0; i < n && (dt == AMK_DTYPE_F32 || dt == AMK_DTYPE_BF16); i++) {
            float e = fill_ref(42, dt, i, scale);
            uint32_t eb;
            memcpy(&eb, &e, 4);
            if (dt == AMK_DTYPE_F32 ? memcmp(a + 4 * i, &eb, 4) != 0 : ((const uint16_t *)a)[i] != (uint16_t)(eb >> 16)) bad++;
        }
        CHECK_MSG(bad == 0, "fill_random %s: %lld values differ from the host twin", amk_dtype_name(dt), (long long)bad);
        /* same seed, same bytes; another seed, other values */
        CHECK_EQ_INT(amk_cuda_fill_random(cu, dt, 42, scale, &d), AMK_OK);
        CHECK_EQ_INT(amk_cuda_download(cu, dt, b, nb, &d), AMK_OK);
        CHECK_MSG(memcmp(a, b, nb) == 0, "fill_random %s: the same seed gave other values", amk_dtype_name(dt));
        CHECK_EQ_INT(amk_cuda_fill_random(cu, dt, 43, scale, &d), AMK_OK);
        CHECK_EQ_INT(amk_cuda_download(cu, dt, b, nb, &d), AMK_OK);
        for (i = 0; i < n; i++) differ += amk__load_f32(a, dt, i) != amk__load_f32(b, dt, i);
        CHECK_MSG(differ > n / 4, "fill_random %s: seeds 42 and 43 differ in only %lld of %lld", amk_dtype_name(dt),
                  (long long)differ, (long long)n);
        if (dt == AMK_DTYPE_BF16) { /* another buffer, the same seed: another stream */
            CHECK_EQ_INT(amk_cuda_fill_random(cu, AMK_DTYPE_COUNT, 42, scale, &d), AMK_OK);
            CHECK_EQ_INT(amk_cuda_download(cu, AMK_DTYPE_COUNT, b, nb, &d), AMK_OK);
            for (i = 0, differ = 0; i < n; i++) differ += ((const uint16_t *)a)[i] != ((const uint16_t *)b)[i];
            CHECK_MSG(differ > n / 2, "fill_random: buffers %d and %d share a stream (%lld differ)", dt, AMK_DTYPE_COUNT, (long long)differ);
        }
        free(a);
        free(b);
    }
    CHECK_EQ_INT(amk_cuda_download(cu, AMK_DTYPE_COUNT + 1, back, sizeof back, &d), AMK_OK);
    CHECK_MSG(memcmp(guard, back, sizeof guard) == 0, "a fill wrote into the next buffer");
    /* refused: a scale the dtype cannot use, a bad buffer id */
    CHECK_EQ_INT(amk_cuda_fill_random(cu, AMK_DTYPE_I8, 1, 0.5f, &d), AMK_ERR_INVALID_ARG);
    CHECK_MSG(strstr(d.message, "scale >= 1") != NULL, "message: %s", d.message);
    CHECK_EQ_INT(amk_cuda_fill_random(cu, AMK_DTYPE_F32, 1, -1.0f, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_fill_random(cu, AMK_DTYPE_F32, 1, (float)NAN, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_fill_random(cu, AMK_DTYPE_F16, 1, (float)INFINITY, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_fill_random(cu, -1, 1, 1.0f, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_fill_random(cu, AMK_DTYPE_COUNT + 2, 1, 1.0f, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_fill_value(cu, AMK_DTYPE_COUNT + 2, 1.0f, &d), AMK_ERR_INVALID_ARG);
    amk_cuda_free(cu);
    amk_program_free(p);
}

/* fill_random of the block formats (amk bench --quant's random weights): every block decodes (on
   the host, amk__blk_load) to finite values within twice the scale (the formats' ranges: Q8_0
   +-scale, the K-formats' scales and mins up to [-scale, 2 scale]), spread over the range, and the
   same seed gives the same bytes. */
static void test_fill_blocks(void) {
    const int64_t rows = 4, cols = 1024, n = rows * cols;
    const float scale = 0.5f;
    amk_program *p = prog_new(1);
    amk_cuda *cu = NULL;
    amk_diag d;
    int t, k;
    amk_diag_clear(&d);
    for (t = AMK_DTYPE_Q8_0; t < AMK_DTYPE_COUNT; t++) buf(p, amk_dtype_name((amk_dtype)t), AMK_KIND_WEIGHT, (amk_dtype)t, 2, rows, cols, 0);
    k = amk_program_add_task(p, AMK_OP_NOP, NULL, 0, NULL, 0, amk_program_add_counter(p, ""), "nop");
    p->tasks[k].sm = 0;
    CHECK_MSG(amk_cuda_create(p, g_image, g_image_size, &cu, &d) == AMK_OK, "block fill program: %s", d.message);
    for (t = AMK_DTYPE_Q8_0; cu && t < AMK_DTYPE_COUNT; t++) {
        const int id = t - AMK_DTYPE_Q8_0;
        const size_t nb = (size_t)amk_dtype_nbytes((amk_dtype)t, n);
        unsigned char *a = (unsigned char *)malloc(nb), *b = (unsigned char *)malloc(nb);
        float *v = (float *)malloc((size_t)n * sizeof(float));
        int64_t i, bad = 0;
        double lo = 1e30, hi = -1e30;
        if (!a || !b || !v) { free(a); free(b); free(v); CHECK_MSG(0, "out of memory"); break; }
        CHECK_EQ_INT(amk_cuda_fill_random(cu, id, 7, scale, &d), AMK_OK);
        CHECK_EQ_INT(amk_cuda_download(cu, id, a, nb, &d), AMK_OK);
        amk__blk_load(a, t, 0, n, v);
        for (i = 0; i < n; i++) {
            if (!(fabsf(v[i]) <= 2.05f * scale)) bad++; /* also NaN */
            if (v[i] < lo) lo = v[i];
            if (v[i] > hi) hi = v[i];
        }
        CHECK_MSG(bad == 0, "fill_random %s: %lld of %lld decoded values not finite or past 2 x scale", amk_dtype_name((amk_dtype)t),
                  (long long)bad, (long long)n);
        CHECK_MSG(lo < -0.4 * scale && hi > 0.4 * scale, "fill_random %s: decoded range [%g, %g]", amk_dtype_name((amk_dtype)t), lo, hi);
        CHECK_EQ_INT(amk_cuda_fill_random(cu, id, 7, scale, &d), AMK_OK);
        CHECK_EQ_INT(amk_cuda_download(cu, id, b, nb, &d), AMK_OK);
        CHECK_MSG(memcmp(a, b, nb) == 0, "fill_random %s: the same seed gave other bytes", amk_dtype_name((amk_dtype)t));
        free(a);
        free(b);
        free(v);
    }
    amk_cuda_free(cu);
    amk_program_free(p);
}

/* fill_value gives the bytes the host's encoding (amk__store_f32) gives, in every dtype. */
static void test_fill_value(void) {
    static const float values[4] = {1.0f, -2.5f, 0.3f, 1000.0f};
    const int64_t n = 1001;
    amk_program *p = NULL;
    amk_cuda *cu = fill_setup(&p, n);
    amk_diag d;
    int k, v;
    amk_diag_clear(&d);
    if (!cu) { amk_program_free(p); return; }
    for (k = 0; k < AMK_DTYPE_Q8_0; k++) {
        const amk_dtype dt = all_dtypes[k];
        const size_t nb = (size_t)amk_dtype_nbytes(dt, n);
        unsigned char *got = (unsigned char *)malloc(nb), *want = (unsigned char *)malloc(nb);
        for (v = 0; v < 4; v++) {
            int64_t i;
            memset(want, 0, nb);
            for (i = 0; i < n; i++) amk__store_f32(want, dt, i, values[v]);
            CHECK_EQ_INT(amk_cuda_fill_value(cu, dt, values[v], &d), AMK_OK);
            CHECK_EQ_INT(amk_cuda_download(cu, dt, got, nb, &d), AMK_OK);
            CHECK_MSG(memcmp(got, want, nb) == 0, "fill_value %g in %s differs from the host encoding (first byte %02x, want %02x)",
                      (double)values[v], amk_dtype_name(dt), got[0], want[0]);
        }
        free(got);
        free(want);
    }
    amk_cuda_free(cu);
    amk_program_free(p);
}

static void test_read_bandwidth(void) {
    double g = 0.0, cg = 0.0, g2 = 0.0;
    amk_diag d;
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_cuda_read_bandwidth(g_keep, 0, 5, &g, &cg, &d), AMK_OK); /* 0: raised to 4x L2 */
    CHECK_MSG(g > 100.0 && g < 50000.0, "read bandwidth %.1f GB/s", g);
    CHECK_MSG(cg > 100.0 && cg < 50000.0, "copy bandwidth %.1f GB/s", cg);
    if (!g_quick) {
        CHECK_EQ_INT(amk_cuda_read_bandwidth(g_keep, (size_t)1 << 30, 3, &g2, NULL, &d), AMK_OK);
        CHECK_MSG(g2 > 100.0 && g2 < 50000.0, "read bandwidth over 1 GiB %.1f GB/s", g2);
    }
    CHECK_EQ_INT(amk_cuda_read_bandwidth(g_keep, 0, 0, &g2, NULL, &d), AMK_ERR_INVALID_ARG);
    CHECK(g2 == 0.0);
    CHECK_EQ_INT(amk_cuda_read_bandwidth(g_keep, 0, 3, NULL, NULL, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_read_bandwidth(g_keep, SIZE_MAX, 3, &g2, NULL, &d), AMK_ERR_INVALID_ARG);
    printf("  bandwidth (4x L2 scratch, median of 5): read %.0f GB/s, copy %.0f GB/s (read + write)\n", g, cg);
}

/* amk_cuda_tensor_peak on the prefill image (TRY_PREFILL): its kernel measures a rate in a
   plausible range; a bad iteration count, and the full image (no kernel), are refused by name. */
static void test_tensor_peak(void) {
    amk_program *p = prog_new(1);
    amk_cuda *cu = NULL;
    const int img = g_img;
    double t = 0.0, t2 = -1.0;
    amk_diag d;
    amk_diag_clear(&d);
    mul_chain(p, 1, 1, 1, 256);
    if (create_on_image(p, 0, &cu, &d) == AMK_OK) {
        CHECK_EQ_INT(amk_cuda_tensor_peak(cu, 3, &t, &d), AMK_OK);
        CHECK_MSG(t > 50.0 && t < 5000.0, "tensor-core peak %.1f TFLOP/s", t);
        CHECK_EQ_INT(amk_cuda_tensor_peak(cu, 0, &t2, &d), AMK_ERR_INVALID_ARG);
        CHECK(t2 == 0.0);
        amk_cuda_free(cu);
        cu = NULL;
        printf("  tensor-core peak (bf16 m64n128k16 on every SM, median of 3): %.0f TFLOP/s\n", t);
    } else {
        CHECK_MSG(0, "the prefill image: %s", d.message);
    }
    g_img = AMK_IMAGE_FULL;
    if (create_on_image(p, 0, &cu, &d) == AMK_OK) {
        CHECK_EQ_INT(amk_cuda_tensor_peak(cu, 3, &t2, &d), AMK_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(d.message, "amk_tc_peak") != NULL, "message: %s", d.message);
        amk_cuda_free(cu);
    }
    g_img = img;
    amk_program_free(p);
}

/* time_runs: n positive per-launch times around the median, the program really ran (its output
   matches the reference), and timing records still come from the last launch. */
static void test_time_runs(void) {
    const int n = 8, n_sms = 4, H = 1024, runs = 9;
    amk_program *p = prog_new(n_sms);
    int prev = mul_chain(p, n, n_sms, 1, H), i, n_rec = 0;
    double med = 0.0, times[9], lo = 1e30, hi = 0.0;
    amk_cuda_timing_record rec[8];
    gcase g;
    if (gcase_begin(&g, p, "time_runs", 1.0f)) {
        for (i = 0; i < runs; i++) times[i] = -1.0;
        amk_cuda_set_timing(g.cu, 1);
        CHECK_EQ_INT(amk_cuda_time_runs(g.cu, 2, runs, &med, times, &g.d), AMK_OK);
        for (i = 0; i < runs; i++) {
            CHECK_MSG(times[i] > 0.0 && times[i] < 1e6, "run %d took %g us", i, times[i]);
            if (times[i] < lo) lo = times[i];
            if (times[i] > hi) hi = times[i];
        }
        CHECK_MSG(med >= lo && med <= hi && med > 0.0, "median %g outside [%g, %g]", med, lo, hi);
        printf("  time_runs: %d dependent MULs over %d SMs: median %.1f us (min %.1f, max %.1f)\n", n, n_sms, med, lo, hi);
        CHECK_EQ_INT(amk_cuda_timing(g.cu, rec, n, &n_rec, &g.d), AMK_OK);
        CHECK_EQ_INT(n_rec, n);
        for (i = 0; i < n_rec; i++) CHECK(rec[i].done);
        CHECK_EQ_INT(amk_refvm_run(g.vm, NULL, &g.d), AMK_OK);
        gcase_compare(&g, prev, 0.0, 0.0, "time_runs out");
        amk_cuda_set_timing(g.cu, 0);
        CHECK_EQ_INT(amk_cuda_time_runs(g.cu, 0, 2, &med, NULL, &g.d), AMK_OK); /* no per-run array */
        CHECK(med > 0.0);
        CHECK_EQ_INT(amk_cuda_time_runs(g.cu, 0, 0, &med, NULL, &g.d), AMK_ERR_INVALID_ARG);
        CHECK_EQ_INT(amk_cuda_time_runs(g.cu, -1, 3, &med, NULL, &g.d), AMK_ERR_INVALID_ARG);
        CHECK_EQ_INT(amk_cuda_time_runs(g.cu, 0, 3, NULL, NULL, &g.d), AMK_ERR_INVALID_ARG);
    }
    gcase_end(&g);
}

/* ---- benchmarks (--bench): numbers for bench/NOTES.md, not tests ---------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One run, then the span of its timeline (first op start to last op end), in us. */
static double run_span_us(amk_cuda *cu, amk_cuda_timing_record *rec, int cap) {
    amk_diag d;
    double lo = 1e30, hi = 0;
    int k, n_rec = 0;
    amk_diag_clear(&d);
    amk_cuda_run(cu, 10000.0, &d);
    amk_cuda_timing(cu, rec, cap, &n_rec, &d);
    for (k = 0; k < n_rec; k++) {
        if (rec[k].start_us < lo) lo = rec[k].start_us;
        if (rec[k].end_us > hi) hi = rec[k].end_us;
    }
    return hi - lo;
}

#define MEDIAN_RUNS_MAX 64

/* The median span (run_span_us) of `runs` (<= MEDIAN_RUNS_MAX) timed runs; timing stays on. */
static double median_span_us(amk_cuda *cu, amk_cuda_timing_record *rec, int cap, int runs) {
    double span[MEDIAN_RUNS_MAX];
    int i;
    amk_cuda_set_timing(cu, 1);
    for (i = 0; i < runs; i++) span[i] = run_span_us(cu, rec, cap);
    qsort(span, (size_t)runs, sizeof(double), cmp_double);
    return span[runs / 2];
}

/* The median wall time (us) of amk_cuda_run over `runs` (<= MEDIAN_RUNS_MAX) runs, after 5
   warm-up runs. */
static double median_wall_us(amk_cuda *cu, int runs) {
    double wall[MEDIAN_RUNS_MAX];
    amk_diag d;
    int i;
    for (i = 0; i < 5; i++) amk_cuda_run(cu, 10000.0, &d);
    for (i = 0; i < runs; i++) {
        double t0 = now_ms();
        amk_cuda_run(cu, 10000.0, &d);
        wall[i] = (now_ms() - t0) * 1e3;
    }
    qsort(wall, (size_t)runs, sizeof(double), cmp_double);
    return wall[runs / 2];
}

/* n bf16 weights: 4096 random values of magnitude below scale, repeated (a benchmark's bytes). */
static void fill_bf16_pattern(uint16_t *w, int64_t n, float scale, amk_t_rng *r) {
    int64_t i;
    for (i = 0; i < 4096 && i < n; i++) w[i] = amk_f32_to_bf16(amk_t_rng_sym(r) * scale);
    for (i = 4096; i < n; i += 4096) memcpy(w + i, w, (size_t)(n - i < 4096 ? n - i : 4096) * 2);
}

/* Median span (us) of one tile of M rows of x (f32) against 256 rows of a bf16 [256, 2048] W on
   one SM, over 5 timed runs; -1 if the program does not load. */
static double gemm_tile_us(int64_t M) {
    amk_program *p = prog_new(1);
    int in[2], y, t;
    amk_cuda *cu = NULL;
    amk_cuda_timing_record rec[1];
    amk_diag d;
    double us;
    in[0] = buf(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, M, 2048, 0);
    in[1] = buf(p, "W", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, 256, 2048, 0);
    y = buf(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, M, 256, 0);
    t = task(p, AMK_OP_GEMM_TILE, in, 2, y, amk_program_add_counter(p, ""), 0);
    seti(p, t, "K", 2048); seti(p, t, "n_off", 0); seti(p, t, "N_tile", 256);
    seti(p, t, "m_off", 0); seti(p, t, "M_tile", M);
    amk_diag_clear(&d);
    if (amk_cuda_create(p, g_image, g_image_size, &cu, &d) != AMK_OK) {
        CHECK_MSG(0, "gemm tile M=%lld: create: %s", (long long)M, d.message);
        amk_program_free(p);
        return -1.0;
    }
    amk_cuda_run(cu, 10000.0, &d); /* warm-up */
    us = median_span_us(cu, rec, 1, 5);
    amk_cuda_free(cu);
    amk_program_free(p);
    return us;
}

/* The tensor-core path runs: 64 rows cost a few times one row (W read once), where the rows path
   would cost ~64 times (W streamed once a row; the GEMM results are test_gemm_tile's). */
static void test_gemm_mma_runs(void) {
    double t1, t64;
    if (amk_cuda_picks_portable() == 1) { /* why: the portable image's mma.sync path takes 16-bit x only (test_gemm_tile's cases) */
        printf("  GEMM tile: the portable image runs an F32 x on the rows path; not timed\n");
        return;
    }
    t1 = gemm_tile_us(1);
    t64 = gemm_tile_us(64);
    printf("  GEMM tile 256x2048 bf16 on one SM: M=1 %.1f us, M=64 %.1f us\n", t1, t64);
    CHECK_MSG(t1 > 0 && t64 > 0 && t64 < 16.0 * t1, "M=64 took %.1f us, M=1 %.1f: not the tensor-core path", t64, t1);
}

/* A program's median wall time a launch and median op span over runs launches (tasks: its task
   count, for the timing records), in us. */
static void bench_times(amk_cuda *cu, int tasks, int runs, double *wall, double *span) {
    amk_cuda_timing_record *rec = (amk_cuda_timing_record *)calloc((size_t)tasks, sizeof *rec);
    *wall = median_wall_us(cu, runs);
    *span = rec ? median_span_us(cu, rec, tasks, runs) : 0.0;
    free(rec);
}

/* One GEMV (M = 1) or GEMM (M rows of x of dtype xt: the tensor-core path from 4) over tiles on
   every SM: weight bytes over kernel span and over wall time per run, and the MMA rate. */
static void bench_gemm(int64_t M, amk_dtype xt, int64_t N, int64_t K, int tiles, int threads) {
    amk_program *p = prog_new(tiles);
    int x = buf(p, "x", AMK_KIND_IO_INPUT, xt, 2, M, K, 0), W = buf(p, "W", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, N, K, 0);
    int y = buf(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, M, N, 0), c = amk_program_add_counter(p, "");
    int i, in[2];
    amk_cuda *cu = NULL;
    amk_diag d;
    double wall, span, bytes = (double)N * (double)K * 2.0;
    uint16_t *w;
    amk_t_rng r = trng_for("bench");
    p->config.threads_per_block = threads;
    in[0] = x; in[1] = W;
    for (i = 0; i < tiles; i++) {
        int t = task(p, AMK_OP_GEMV_TILE, in, 2, y, c, i);
        int64_t a = N * i / tiles, b = N * (i + 1) / tiles;
        seti(p, t, "K", K); seti(p, t, "n_off", a); seti(p, t, "N_tile", b - a);
    }
    amk_diag_clear(&d);
    if (amk_cuda_create(p, g_image, g_image_size, &cu, &d) != AMK_OK) {
        printf("  bench gemm: create failed: %s\n", d.message);
        amk_program_free(p);
        return;
    }
    w = (uint16_t *)malloc((size_t)(N * K) * 2);
    fill_bf16_pattern(w, N * K, 0.05f, &r);
    amk_cuda_upload(cu, W, w, (size_t)(N * K) * 2, &d);
    free(w);
    bench_times(cu, tiles, 30, &wall, &span);
    printf("  bench %s M=%lld x %s, W bf16 %lldx%lld (%.1f MB) %d tiles x %d threads: op span median %.1f us "
           "(%.0f GB/s of W, %.1f TFLOP/s), run() wall median %.1f us (%.0f GB/s)\n", M == 1 ? "gemv" : "gemm",
           (long long)M, amk_dtype_name(xt), (long long)N, (long long)K, bytes / 1e6, tiles, threads, span,
           bytes / span * 1e-3, 2.0 * (double)M * (double)N * (double)K / span * 1e-6, wall, bytes / wall * 1e-3);
    amk_cuda_free(cu);
    amk_program_free(p);
}

/* The tensor-copy GEMM (amk_gemm_tma) over M x N x K in bf16: a GEMM_TILE task a block of
   AMK_TMA_BM x AMK_TMA_BN outputs, spread over the SMs in turn; TFLOP/s over the median wall time
   of a launch and over its op span. The rate cuBLAS reaches on the same shapes comes from
   bench/gemm_cublas.py (run beside it: scripts/gpu_gemm.sh). */
/* A bench's runtime of p (*cu, *info) on the image the runtime picks: the count of its tasks in
   form, or -1 (said, and p freed) when it does not load. */
static int bench_create(amk_program *p, const char *what, uint32_t form, amk_cuda **cu, amk_cuda_info *info) {
    amk_diag d;
    int i, n = 0;
    amk_diag_clear(&d);
    if (amk_cuda_create(p, g_image, g_image_size, cu, &d) != AMK_OK) {
        printf("  bench %s: create failed: %s\n", what, d.message);
        amk_program_free(p);
        return -1;
    }
    amk_cuda_get_info(*cu, info);
    for (i = 0; i < p->n_tasks; i++) /* (ATTN_MMA: either tensor-core form of ATTENTION_PREFILL) */
        n += (*cu)->ins[i].form == form || (form == AMK_FORM_ATTN_MMA && (*cu)->ins[i].form == AMK_FORM_ATTN_WG);
    return n;
}
static void bench_gemm_tma(int64_t M, int64_t N, int64_t K) {
    const int64_t nm = (M + AMK_TMA_BM - 1) / AMK_TMA_BM, nn = (N + AMK_TMA_BN - 1) / AMK_TMA_BN;
    amk_program *p = prog_new(132);
    int x = buf(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_BF16, 2, M, K, 0), W = buf(p, "W", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, N, K, 0);
    int y = buf(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_BF16, 2, M, N, 0), c = amk_program_add_counter(p, "");
    int in[2], tma = 0, n_tasks = (int)(nm * nn);
    int64_t i;
    amk_cuda *cu = NULL;
    amk_cuda_info info;
    amk_diag d;
    double wall, span, flop = 2.0 * (double)M * (double)N * (double)K;
    uint16_t *w;
    amk_t_rng r = trng_for("bench tma");
    p->config.threads_per_block = 512;
    in[0] = x; in[1] = W;
    for (i = 0; i < nm * nn; i++) {
        const int64_t m0 = i / nn * AMK_TMA_BM, n0 = i % nn * AMK_TMA_BN;
        int t = task(p, AMK_OP_GEMM_TILE, in, 2, y, c, (int)(i % 132));
        seti(p, t, "K", K); seti(p, t, "m_off", m0); seti(p, t, "M_tile", M - m0 < AMK_TMA_BM ? M - m0 : AMK_TMA_BM);
        seti(p, t, "n_off", n0); seti(p, t, "N_tile", N - n0 < AMK_TMA_BN ? N - n0 : AMK_TMA_BN);
    }
    if ((tma = bench_create(p, "gemm tma", AMK_FORM_GEMM_TMA, &cu, &info)) < 0) return;
    w = (uint16_t *)malloc((size_t)((N > M ? N : M) * K) * 2);
    fill_bf16_pattern(w, N * K, 0.05f, &r);
    amk_cuda_upload(cu, W, w, (size_t)(N * K) * 2, &d);
    fill_bf16_pattern(w, M * K, 1.0f, &r);
    amk_cuda_upload(cu, x, w, (size_t)(M * K) * 2, &d);
    free(w);
    bench_times(cu, n_tasks, 20, &wall, &span);
    printf("  bench gemm tma M=%lld N=%lld K=%lld bf16: %d blocks (%d in the tensor-copy form, the %s image), "
           "wall median %.1f us (%.1f TFLOP/s), op span median %.1f us (%.1f TFLOP/s)\n", (long long)M, (long long)N,
           (long long)K, n_tasks, tma, AMK_IMAGE_KIND_NAME(info.image_kind), wall, flop / wall * 1e-6, span, flop / span * 1e-6);
    amk_cuda_free(cu);
    amk_program_free(p);
}
/* ATTENTION_PREFILL alone: M query rows at positions pos.. over a cache of max_seq rows, tasks of
   rows_a_task rows and a kv head spread over the SMs (the builder's tiles), BF16; the causal
   attention's FLOPs (4 hd per query head and key) over the op span. */
static void bench_attn_prefill(int nh, int nkv, int hd, int max_seq, int M, int32_t pos, int rows_a_task) {
    int in[4], y, m, mma = 0;
    amk_program *p = attn_prefill_program(AMK_DTYPE_BF16, AMK_DTYPE_BF16, AMK_DTYPE_BF16, nh, nkv, hd, max_seq, M,
                                          rows_a_task, 0, 132, in, &y);
    amk_cuda *cu = NULL;
    amk_cuda_info info;
    amk_diag d;
    double wall, span, flop = 0.0;
    uint16_t *w;
    amk_t_rng r = trng_for("bench attn");
    p->config.threads_per_block = 512;
    for (m = 0; m < M; m++) flop += 4.0 * hd * nh * (double)(pos + m + 1);
    if ((mma = bench_create(p, "attention prefill", AMK_FORM_ATTN_MMA, &cu, &info)) < 0) return;
    w = (uint16_t *)malloc((size_t)max_seq * nh * hd * 2 + (size_t)M * nh * hd * 2);
    fill_bf16_pattern(w, (int64_t)max_seq * nkv * hd, 1.0f, &r);
    amk_cuda_upload(cu, in[1], w, (size_t)max_seq * nkv * hd * 2, &d);
    amk_cuda_upload(cu, in[2], w, (size_t)max_seq * nkv * hd * 2, &d);
    fill_bf16_pattern(w, (int64_t)M * nh * hd, 1.0f, &r);
    amk_cuda_upload(cu, in[0], w, (size_t)M * nh * hd * 2, &d);
    amk_cuda_upload(cu, in[3], &pos, 4, &d);
    free(w);
    bench_times(cu, p->n_tasks, 20, &wall, &span);
    printf("  bench attention prefill heads %d/%d hd %d, %d rows at %d, %d rows a task: %d tasks (%d tensor-core, the %s "
           "image), wall median %.1f us, op span median %.1f us (%.1f TFLOP/s)\n", nh, nkv, hd, M, (int)pos, rows_a_task,
           p->n_tasks, mma, AMK_IMAGE_KIND_NAME(info.image_kind), wall, span, flop / span * 1e-6);
    amk_cuda_free(cu);
    amk_program_free(p);
}
/* Llama-3-8B's projections (N, K) at M = 512 and 2048: q and o, k and v, gate and up, down. */
static const int64_t BENCH_TMA_NK[][2] = {{4096, 4096}, {1024, 4096}, {14336, 4096}, {4096, 14336}};

/* The GEMV/GEMM lines of --bench, in order. */
typedef struct bench_gemm_row { int64_t M; amk_dtype xt; int64_t N, K; int tiles, threads; } bench_gemm_row;
static const bench_gemm_row BENCH_GEMMS[] = {
    {1, AMK_DTYPE_F32, 33792, 4096, 132, 256},
    {1, AMK_DTYPE_F32, 33792, 4096, 132, 512},
    {1, AMK_DTYPE_F32, 14336, 4096, 132, 256}, /* why: 117 MB, above the 50 MB L2 */
    /* why: what one SM's GEMV loop streams, apart from HBM: W resident in L2 (16.8 MB, re-read
       run after run), on every SM and on 16; and from HBM on 16 SMs (HBM mostly idle) */
    {1, AMK_DTYPE_F32, 14336, 4096, 132, 512},
    {1, AMK_DTYPE_F32, 2048, 4096, 132, 512},
    {1, AMK_DTYPE_F32, 2048, 4096, 16, 512},
    {1, AMK_DTYPE_F32, 14336, 4096, 16, 512},
    {1, AMK_DTYPE_F32, 8192, 2048, 132, 512},
    {1, AMK_DTYPE_F32, 2048, 8192, 132, 512},
    {1, AMK_DTYPE_F32, 49152, 576, 132, 512}, /* SmolLM2's head: rows of 1152 bytes */
    {1, AMK_DTYPE_F32, 3072, 576, 132, 512},
    {3, AMK_DTYPE_F32, 14336, 4096, 132, 256}, /* the rows path: W streamed once a row */
    {4, AMK_DTYPE_F32, 14336, 4096, 132, 256}, /* the tensor cores from here */
    {16, AMK_DTYPE_F32, 14336, 4096, 132, 256},
    {64, AMK_DTYPE_F32, 14336, 4096, 132, 256},
    {64, AMK_DTYPE_BF16, 14336, 4096, 132, 256},
    {64, AMK_DTYPE_BF16, 14336, 4096, 132, 512},
    {256, AMK_DTYPE_BF16, 14336, 4096, 132, 512},
    {512, AMK_DTYPE_BF16, 14336, 4096, 132, 512},
};

/* L dependent GEMV layers x_{l+1} = x_l @ W_l.T (each [N, N] bf16), every layer split in one tile
   per SM under one all-join counter that the next layer waits on: a decode-like stream where the
   dependency bubbles between layers count. */
static void bench_layers(int L, int64_t N, int threads) {
    const int tiles = 132;
    amk_program *p = prog_new(tiles);
    int l, i, prev, prev_c = -1, *W = (int *)calloc((size_t)L, sizeof(int));
    amk_cuda *cu = NULL;
    amk_diag d;
    double span, wall, ev = 0.0, bytes = (double)L * (double)N * (double)N * 2.0;
    uint16_t *w = (uint16_t *)malloc((size_t)(N * N) * 2);
    amk_cuda_timing_record *rec;
    amk_t_rng r = trng_for("layers");
    p->config.threads_per_block = threads;
    prev = buf(p, "x0", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, 1, N, 0);
    for (l = 0; l < L; l++) {
        int out = buf(p, "x", l == L - 1 ? AMK_KIND_IO_OUTPUT : AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, 1, N, 0);
        int c = amk_program_add_counter(p, "layer"), in[2];
        W[l] = buf(p, "W", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, N, N, 0);
        in[0] = prev; in[1] = W[l];
        for (i = 0; i < tiles; i++) {
            int t = task(p, AMK_OP_GEMV_TILE, in, 2, out, c, i);
            int64_t a = N * i / tiles, b = N * (i + 1) / tiles;
            seti(p, t, "K", N); seti(p, t, "n_off", a); seti(p, t, "N_tile", b - a);
            if (prev_c >= 0) amk_task_add_wait(p, t, prev_c, tiles);
        }
        prev = out;
        prev_c = c;
    }
    amk_diag_clear(&d);
    rec = (amk_cuda_timing_record *)calloc((size_t)L * (size_t)tiles, sizeof *rec);
    if (amk_cuda_create(p, g_image, g_image_size, &cu, &d) != AMK_OK) {
        printf("  bench layers: create failed: %s\n", d.message);
    } else {
        fill_bf16_pattern(w, N * N, 0.02f, &r);
        for (l = 0; l < L; l++) amk_cuda_upload(cu, W[l], w, (size_t)(N * N) * 2, &d);
        wall = median_wall_us(cu, 20);
        amk_cuda_time_runs(cu, 3, 30, &ev, NULL, &d);
        span = median_span_us(cu, rec, L * tiles, 20);
        printf("  bench layers: %d x bf16 %lldx%lld (%.0f MB), %d tiles/layer x %d threads: span median %.1f us "
               "(%.0f GB/s), run() wall median %.1f us (%.0f GB/s), time_runs median %.1f us (%.0f GB/s)\n", L,
               (long long)N, (long long)N, bytes / 1e6, tiles, threads, span, bytes / span * 1e-3,
               wall, bytes / wall * 1e-3, ev, bytes / ev * 1e-3);
        amk_cuda_free(cu);
    }
    free(w);
    free(rec);
    free(W);
    amk_program_free(p);
}

/* A chain of NOPs hopping across SMs: the cost of one dependent signal, SM to SM. */
static void bench_chain(int n, int n_sms) {
    amk_program *p = prog_new(n_sms);
    int i, prev = -1, n_rec = 0, runs = 20;
    amk_cuda *cu = NULL;
    amk_diag d;
    double per[20];
    amk_cuda_timing_record *rec = (amk_cuda_timing_record *)calloc((size_t)n, sizeof *rec);
    for (i = 0; i < n; i++) {
        int c = amk_program_add_counter(p, ""), t = amk_program_add_task(p, AMK_OP_NOP, NULL, 0, NULL, 0, c, "hop");
        p->tasks[t].sm = (i * 7) % n_sms;
        if (prev >= 0) amk_task_add_wait(p, t, prev, 1);
        prev = c;
    }
    amk_diag_clear(&d);
    if (amk_cuda_create(p, g_image, g_image_size, &cu, &d) == AMK_OK) {
        amk_cuda_set_timing(cu, 1);
        for (i = 0; i < 3; i++) amk_cuda_run(cu, 10000.0, &d);
        for (i = 0; i < runs; i++) {
            amk_cuda_run(cu, 10000.0, &d);
            amk_cuda_timing(cu, rec, n, &n_rec, &d);
            per[i] = (rec[n - 1].start_us - rec[0].start_us) / (n - 1);
        }
        qsort(per, (size_t)runs, sizeof(double), cmp_double);
        printf("  bench chain: %d dependent NOPs over %d SMs: %.3f us per hop (timing records, median of %d)", n,
               n_sms, per[runs / 2], runs);
        amk_cuda_set_timing(cu, 0);
        for (i = 0; i < runs; i++) {
            double t0 = now_ms();
            amk_cuda_run(cu, 10000.0, &d);
            per[i] = (now_ms() - t0) * 1e3;
        }
        qsort(per, (size_t)runs, sizeof(double), cmp_double);
        printf("; timing off: run() wall %.1f us = %.3f us per hop\n", per[runs / 2], per[runs / 2] / n);
        amk_cuda_free(cu);
    } else {
        printf("  bench chain: create failed: %s\n", d.message);
    }
    free(rec);
    amk_program_free(p);
}

/* Bandwidth per configuration (1 GiB scratch), and the fill kernels' speed on a 4 GiB bf16 weight. */
static void bench_service(void) {
    static const int per_sm[2] = {1, 0};
    const int64_t rows = 32768, cols = 65536; /* why: 4 GiB of bf16, a quarter of Llama-3-8B */
    amk_program *p;
    amk_cuda *cu = NULL;
    amk_diag d;
    double g = 0.0, cg = 0.0, t0, t_rand, t_val;
    int k, copy;
    amk_diag_clear(&d);
    for (copy = 0; copy < 2; copy++)
        for (k = 0; k < 2; k++) {
            if (amk__cuda_bw_measure(g_keep, (size_t)1 << 30, 20, copy, per_sm[k], &g, &d) == AMK_OK)
                printf("  bench bandwidth %s 1 GiB, %s x 1024 threads: %.0f GB/s (median of 20)\n", copy ? "copy" : "read",
                       per_sm[k] ? "1 block/SM" : "full occupancy", g);
            else
                printf("  bench bandwidth: %s\n", d.message);
        }
    if (amk_cuda_read_bandwidth(g_keep, (size_t)4 << 30, 10, &g, &cg, &d) == AMK_OK)
        printf("  bench bandwidth 4 GiB, best configuration: read %.0f GB/s, copy %.0f GB/s\n", g, cg);
    p = prog_new(1);
    buf(p, "W", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, rows, cols, 0);
    k = amk_program_add_task(p, AMK_OP_NOP, NULL, 0, NULL, 0, amk_program_add_counter(p, ""), "nop");
    p->tasks[k].sm = 0;
    if (amk_cuda_create(p, g_image, g_image_size, &cu, &d) == AMK_OK) {
        amk_cuda_fill_random(cu, 0, 1, 0.02f, &d); /* warm-up */
        t0 = now_ms();
        k = amk_cuda_fill_random(cu, 0, 2, 0.02f, &d);
        t_rand = now_ms() - t0;
        t0 = now_ms();
        k |= amk_cuda_fill_value(cu, 0, 1.0f, &d);
        t_val = now_ms() - t0;
        printf("  bench fill 4 GiB bf16: random %.1f ms (%.0f GB/s), value %.1f ms (%.0f GB/s)%s\n", t_rand,
               4.294967296 / t_rand * 1e3, t_val, 4.294967296 / t_val * 1e3, k ? " FAILED" : "");
        amk_cuda_free(cu);
    } else {
        printf("  bench fill: create failed: %s\n", d.message);
    }
    amk_program_free(p);
}

/* ---- main ------------------------------------------------------------------------------------------- */

static int wanted(const char *name) {
    int i;
    for (i = 0; i < g_n_only; i++)
        if (strstr(name, g_only[i])) return 1;
    return g_n_only == 0;
}

/* Runs test fn (name: its function's name) as RUN does and prints its line. kind >= 0: g_img
   forces that image for the test's GPU objects, and its name says so ("test_copy [general]": in
   the line, the filters and every CHECK's message). */
static void try_test(void (*fn)(void), const char *name, int kind) {
    static char label[96]; /* why static: amk_t_cur keeps pointing at it */
    const int skipped = skipped_total();
    double t0;
    if (kind >= 0) snprintf(label, sizeof label, "%s [%s]", name, image_name(kind));
    else snprintf(label, sizeof label, "%s", name);
    if (!wanted(label)) return;
    g_img = kind;
    t0 = now_ms();
    RUN_AS(fn, label);
    g_img = -1;
    printf("  %-36s %s %7.0f ms", label, amk_t_cur_failed ? "FAIL" : "ok  ", now_ms() - t0);
    if (skipped_total() > skipped) printf("  (%d skipped by design)", skipped_total() - skipped);
    printf("\n");
    fflush(stdout);
}
/* TRY: once, on the image the runtime picks. TRY_IMAGES: a comparison, once on each of g_images. */
#define TRY(fn) try_test(fn, #fn, -1)
#define TRY_IMAGES(fn) do { int i_; for (i_ = 0; i_ < g_n_images; i_++) try_test(fn, #fn, g_images[i_]); } while (0)
/* TRY_PREFILL: a comparison once more on the prefill image, when the set has it (its GEMV/GEMM
   tiles of 16-bit operands run amk_gemm_tma there). */
#define TRY_PREFILL(fn) do { if (g_has_prefill) try_test(fn, #fn, AMK_IMAGE_PREFILL); } while (0)

int main(int argc, char **argv) {
    int i;
    const char *s = getenv("AMK_TEST_SEED"), *slow = getenv("AMK_TEST_SLOW");
    amk_program *p;
    amk_diag d;
    amk_result r;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) g_quick = 1;
        else if (strcmp(argv[i], "--bench") == 0) g_bench = 1;
        else if (strcmp(argv[i], "--bench-gemm") == 0) g_bench_gemm = 1;
        else if (strcmp(argv[i], "--bench-attn") == 0) g_bench_attn = 1;
        else argv[1 + g_n_only++] = argv[i]; /* why: filters gather at argv[1..]; i >= 1 + g_n_only */
    }
    g_only = argv + 1;
    if (getenv("AMK_TEST_IMAGE") && *getenv("AMK_TEST_IMAGE")) { /* a variant build, for benchmarks */
        char *img;
        size_t n;
        if (amk__read_file(getenv("AMK_TEST_IMAGE"), &img, &n, NULL) != AMK_OK) {
            printf("test_gpu: cannot read AMK_TEST_IMAGE %s\n", getenv("AMK_TEST_IMAGE"));
            return 1;
        }
        g_image = img; /* why: read until exit; freed by the process */
        g_image_size = n;
        printf("test_gpu: image %s (%zu bytes)\n", getenv("AMK_TEST_IMAGE"), n);
    }
    { /* the images the comparisons run on: the set's full and general builds, or the one
         AMK_CUDA_IMAGE names (another value: the runtime refuses it below) */
        const char *force = getenv("AMK_CUDA_IMAGE");
        const void *one;
        size_t one_size;
        int k;
        g_n_images = 0;
        if (force && strcmp(force, "portable") == 0 && amk_image_set_is(g_image, g_image_size) &&
            amk_image_set_find(g_image, g_image_size, AMK_IMAGE_PORTABLE, &one, &one_size, NULL) == AMK_OK)
            g_images[g_n_images++] = AMK_IMAGE_PORTABLE;
        for (k = AMK_IMAGE_FULL; k <= AMK_IMAGE_GENERAL && amk_image_set_is(g_image, g_image_size); k++)
            if ((!force || !*force || strcmp(force, image_name(k)) == 0) &&
                amk_image_set_find(g_image, g_image_size, (amk_image_kind)k, &one, &one_size, NULL) == AMK_OK)
                g_images[g_n_images++] = k;
        if (g_n_images == 0) g_images[g_n_images++] = -1;
        g_has_prefill = amk_image_set_is(g_image, g_image_size) && (!force || !*force || strcmp(force, "prefill") == 0) &&
                        amk_image_set_find(g_image, g_image_size, AMK_IMAGE_PREFILL, &one, &one_size, NULL) == AMK_OK;
        if (g_n_images == 2) printf("test_gpu: each comparison on the full image, then on the general one\n");
        else if (g_images[0] >= 0) printf("test_gpu: the comparisons on the %s image only\n", image_name(g_images[0]));
        else printf("test_gpu: the comparisons on the one image loaded (no image set, or AMK_CUDA_IMAGE invalid)\n");
    }
    g_seed = s && *s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
    if (slow && *slow) g_slow = atof(slow) > 1.0 ? atof(slow) : 1.0;
    printf("test_gpu: seed %llu (AMK_TEST_SEED to repeat)%s\n", (unsigned long long)g_seed, g_quick ? ", quick" : "");
    p = prog_new(1);
    amk_program_add_task(p, AMK_OP_NOP, NULL, 0, NULL, 0, amk_program_add_counter(p, ""), "keep");
    p->tasks[0].sm = 0;
    amk_diag_clear(&d);
    r = amk_cuda_create(p, g_image, g_image_size, &g_keep, &d);
    amk_program_free(p);
    if (r != AMK_OK) {
        printf("test_gpu: no usable GPU (%s: %s)\n", amk_result_str(r), d.message);
        printf("%s: 0 passed, 1 failed\n", __FILE__);
        return 1;
    }
    TRY(test_info);
    TRY_IMAGES(test_nop);
    TRY_IMAGES(test_copy);
    TRY_IMAGES(test_copy_rows);
    TRY_PREFILL(test_copy_rows);
    TRY_IMAGES(test_embed);
    TRY_IMAGES(test_embed_rows);
    TRY_PREFILL(test_embed_rows);
    TRY_IMAGES(test_rmsnorm);
    TRY_IMAGES(test_layernorm);
    TRY_IMAGES(test_gemv_tile);
    TRY_IMAGES(test_gemm_tile);
    TRY_PREFILL(test_gemv_tile);
    TRY_PREFILL(test_gemm_tile);
    TRY_IMAGES(test_attention_tile);
    TRY_IMAGES(test_rope);
    TRY_IMAGES(test_elementwise);
    TRY_PREFILL(test_elementwise); /* its binary ops' 16-byte path (the prefill builds') */
    TRY_IMAGES(test_dequant);
    TRY_IMAGES(test_softmax);
    TRY_IMAGES(test_kv_append);
    TRY_IMAGES(test_sample_argmax);
    TRY_IMAGES(test_argmax_pairs);
    TRY_IMAGES(test_attention_combine);
    TRY_IMAGES(test_split_attention);
    TRY_IMAGES(test_fused_gemv);
    TRY_IMAGES(test_blk_ring);
    TRY_IMAGES(test_fused_gemv_rows);
    TRY_PREFILL(test_fused_gemv_rows);
    TRY_IMAGES(test_fused_mlp);
    TRY_IMAGES(test_fused_mlp_fold);
    TRY_IMAGES(test_attention_decode);
    TRY_IMAGES(test_attention_prefill);
    TRY_PREFILL(test_attention_prefill);
    TRY_IMAGES(test_attention_o);
    TRY_IMAGES(test_attention_o_prenorm);
    TRY_IMAGES(test_dag_tiles_join);
    TRY_IMAGES(test_dag_chain);
    TRY_IMAGES(test_dag_kv_attention);
#ifdef AMK_TEST_HAVE_RANDPROG
    TRY_IMAGES(test_dag_random);
#endif
    TRY_IMAGES(test_watchdog);
    TRY_IMAGES(test_device_errors);
    TRY_IMAGES(test_lean_errors);
    TRY_IMAGES(test_timing);
    TRY_IMAGES(test_update_params_checks);
    TRY(test_upload_checks);
    TRY_IMAGES(test_run_io);
    TRY_IMAGES(test_chain);
    TRY_IMAGES(test_prefill_program);
    TRY_PREFILL(test_prefill_program);
    TRY(test_llm_chain);
    TRY(test_images);
    TRY(test_fill_random);
    TRY(test_fill_blocks);
    TRY(test_fill_value);
    TRY(test_read_bandwidth);
    TRY_PREFILL(test_tensor_peak);
    TRY_IMAGES(test_time_runs);
    TRY(test_gemm_mma_runs);
    if (g_bench_gemm) {
        int m;
        for (m = 512; m <= 2048; m *= 4)
            for (i = 0; i < (int)(sizeof BENCH_TMA_NK / sizeof BENCH_TMA_NK[0]); i++)
                bench_gemm_tma(m, BENCH_TMA_NK[i][0], BENCH_TMA_NK[i][1]);
    }
    if (g_bench_attn) { /* the 8B's heads: a chunk of 128 rows late in a 2048-token prompt, by task size; 512 rows
                           (AMK_BENCH_ATTN="heads kv_heads head_dim max_seq rows pos rows_a_task": that one) */
        static const int rows_a_task[] = {8, 16, 32, 64};
        const char *one = getenv("AMK_BENCH_ATTN");
        int a[7];
        if (one && sscanf(one, "%d %d %d %d %d %d %d", &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6]) == 7) {
            bench_attn_prefill(a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
        } else {
            for (i = 0; i < 4; i++) bench_attn_prefill(32, 8, 128, 2048, 128, 1920, rows_a_task[i]);
            for (i = 0; i < 4; i++) bench_attn_prefill(32, 8, 128, 2048, 512, 1536, rows_a_task[i]);
            bench_attn_prefill(32, 8, 64, 2048, 512, 1536, 32);
        }
    }
    if (g_bench) {
        for (i = 0; i < (int)(sizeof BENCH_GEMMS / sizeof BENCH_GEMMS[0]); i++) {
            const bench_gemm_row *b = &BENCH_GEMMS[i];
            bench_gemm(b->M, b->xt, b->N, b->K, b->tiles, b->threads);
        }
        bench_layers(16, 4096, 256);
        bench_layers(16, 4096, 512);
        bench_chain(264, 132);
        bench_service();
    }
    amk_cuda_free(g_keep);
    for (i = AMK_IMAGE_FULL; i <= AMK_IMAGE_PORTABLE; i++)
        if (i <= AMK_IMAGE_GENERAL || AMK_IMAGE_HAS_PREFILL(i))
            printf("  images: %-7s %4d programs loaded, %4d buffers compared with the reference VM (%d differ), %d skipped by design\n",
               image_name(i), g_programs[image_index(i)], g_buffers[image_index(i)], g_differ[image_index(i)],
               g_skipped[image_index(i)]);
    TEST_SUMMARY();
}

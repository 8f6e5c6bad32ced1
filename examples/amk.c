/* amk - the AMK command-line tool: check, format, describe and run megakernel programs.

     amk validate FILE.json      every validation issue, then "accepted: ..." / "rejected: ..."
     amk fmt FILE.json [-o OUT]  the canonical JSON of a program
     amk info FILE.json          counts, weight bytes, critical path, SMs, pages, validation
     amk run FILE.json [...]     one forward pass on the reference VM (safetensors in and out)
     amk build -m MODEL          a model's decode step as a program
     amk generate -m MODEL -p P  text generation

   Results go to stdout, diagnostics to stderr. Exit codes, the same for every subcommand:
   0 success, 1 rejected by validation or failed at run time, 2 bad usage or an unreadable or
   malformed input file. A new subcommand is one function and one row of cli_cmds[].

   Build: cc -std=c99 -O2 -o amk examples/amk.c -lm (the Makefile builds it as build/amk). The
   tool holds the library's implementation but uses only its public API. */
#define AMK_IMPLEMENTATION
#include "../amk.h"
#include <stdio.h>
#include <time.h>
#include <unistd.h>

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_BAD_INPUT = 2 };

typedef struct cli_cmd {
    const char *name;
    const char *summary;  /* one line for `amk --help` */
    const char *synopsis; /* the usage line(s) */
    const char *details;  /* the rest of `amk NAME --help` */
    int (*run)(const struct cli_cmd *cmd, int argc, char **argv); /* argv[0] is the name */
} cli_cmd;

/* ---- small helpers ------------------------------------------------------------------------- */

static int cli_usage_error(const cli_cmd *cmd, const char *fmt, const char *arg) {
    fprintf(stderr, "amk %s: ", cmd->name);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nusage: %s\n(see amk %s --help)\n", cmd->synopsis, cmd->name);
    return CLI_BAD_INPUT;
}

/* The value after option argv[*i]; NULL (after a usage message) if there is none or the option
   was already given (*slot is then non-NULL). */
static const char *cli_take_value(const cli_cmd *cmd, int argc, char **argv, int *i, const char **slot) {
    const char *opt = argv[*i];
    if (*slot) { cli_usage_error(cmd, "option '%s' given twice", opt); return NULL; }
    if (*i + 1 >= argc) { cli_usage_error(cmd, "option '%s' needs a value", opt); return NULL; }
    *i += 1;
    *slot = argv[*i];
    return argv[*i];
}

/* Strict unsigned decimal: digits only (no sign, no spaces), no overflow. */
static int cli_parse_u64(const char *s, uint64_t *out) {
    char *end = NULL;
    unsigned long long v;
    if (!s || *s < '0' || *s > '9') return 0;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno == ERANGE || !end || *end != 0) return 0;
    *out = (uint64_t)v;
    return 1;
}

#define CLI_STR_(x) #x
#define CLI_STR(x) CLI_STR_(x)

/* --kv-splits: 0 (automatic), 1..8, or a multiple of 8 up to AMK_LLAMA_MAX_SPLITS (ATTENTION_COMBINE's
   8 inputs of stacked partial sets; the spec-opcode step takes 8 at most: the build says so) into
   *out; CLI_OK, or the usage error's code. */
static int cli_parse_splits(const cli_cmd *cmd, const char *s, int *out) {
    uint64_t v;
    if (!cli_parse_u64(s, &v) || v > AMK_LLAMA_MAX_SPLITS || (v > 8 && v % 8))
        return cli_usage_error(cmd, "bad --kv-splits '%s' (0 auto, 1..8, or a multiple of 8 up to "
                               CLI_STR(AMK_LLAMA_MAX_SPLITS) ")", s);
    *out = (int)v;
    return CLI_OK;
}

/* --mlp-steps / --attn-steps (opt): "1" -> 1 (one step), "2" -> 0 (two), else a usage error. */
static int cli_parse_steps(const cli_cmd *cmd, const char *opt, const char *s, int *one_step) {
    char what[96];
    if (strcmp(s, "1") != 0 && strcmp(s, "2") != 0) {
        snprintf(what, sizeof what, "%s '%.64s'", opt, s);
        return cli_usage_error(cmd, "bad %s (1 or 2)", what);
    }
    *one_step = s[0] == '1';
    return CLI_OK;
}

/* --x-q8: "0" or "1" into *out (amk_llama_build_opts.x_q8); CLI_OK, or the usage error's code. */
static int cli_parse_x_q8(const cli_cmd *cmd, const char *s, int *out) {
    if (strcmp(s, "0") != 0 && strcmp(s, "1") != 0) return cli_usage_error(cmd, "bad --x-q8 '%s' (0 or 1)", s);
    *out = s[0] == '1';
    return CLI_OK;
}

/* --qkv-fold: "0" or "1" into *out (amk_llama_build_opts.qkv_fold); CLI_OK, or the usage error's code. */
static int cli_parse_fold(const cli_cmd *cmd, const char *s, int *out) {
    if (strcmp(s, "0") != 0 && strcmp(s, "1") != 0) return cli_usage_error(cmd, "bad --qkv-fold '%s' (0 or 1)", s);
    *out = s[0] == '1';
    return CLI_OK;
}

static const char *cli_plural(int64_t n) { return n == 1 ? "" : "s"; }

/* "1.50 MiB" style; exact bytes below 1 KiB. */
static void cli_human_bytes(int64_t n, char *buf, size_t size) {
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)n;
    int u = -1;
    if (n < 1024) { snprintf(buf, size, "%lld B", (long long)n); return; }
    while (v >= 1024.0 && u < 4) { v /= 1024.0; u++; }
    snprintf(buf, size, "%.2f %s", v, units[u]);
}

/* The weight bytes a run of p reads (a decode step: a token's): every WEIGHT and CONST buffer a task
   reads, whole, except one only EMBED tasks read, of which a row a task (its last dimension). So a
   tied embedding, which the LM head reads whole, counts whole once. -1 on overflow or no memory. */
static int64_t cli_weight_bytes_read(const amk_program *p) {
    int64_t total = 0, nb;
    int i, j, *embeds, *others; /* [n_buffers]: EMBED tasks, other tasks reading it */
    if (p->n_buffers <= 0) return 0;
    embeds = (int *)calloc((size_t)p->n_buffers, sizeof(int));
    others = (int *)calloc((size_t)p->n_buffers, sizeof(int));
    if (!embeds || !others) { free(embeds); free(others); return -1; }
    for (i = 0; i < p->n_tasks; i++)
        for (j = 0; j < p->tasks[i].n_inputs; j++) {
            const int b = p->tasks[i].inputs[j];
            if (b >= 0 && b < p->n_buffers) (p->tasks[i].op == AMK_OP_EMBED ? embeds : others)[b]++;
        }
    for (i = 0; i < p->n_buffers && total >= 0; i++) {
        const amk_buffer *b = &p->buffers[i];
        if ((b->kind != AMK_KIND_WEIGHT && b->kind != AMK_KIND_CONST) || (!embeds[i] && !others[i])) continue;
        if (others[i] || b->rank < 1) nb = amk_buffer_numel(b) < 0 ? -1 : amk_dtype_nbytes(b->dtype, amk_buffer_numel(b));
        else if (!amk_mul_i64(amk_dtype_nbytes(b->dtype, b->shape[b->rank - 1]), embeds[i], &nb)) nb = -1;
        if (nb < 0 || !amk_add_i64(total, nb, &total)) total = -1;
    }
    free(embeds);
    free(others);
    return total;
}

/* 1 when some WEIGHT buffer of p is in a GGUF block format. */
static int cli_has_block_weights(const amk_program *p) {
    int b;
    for (b = 0; b < p->n_buffers; b++)
        if (p->buffers[b].kind == AMK_KIND_WEIGHT && amk_dtype_is_block(p->buffers[b].dtype)) return 1;
    return 0;
}

/* The WEIGHT buffers of p a dtype, block formats first, into buf: "Q4_1 210, Q8_0 1, F32 61". */
static void cli_weight_dtypes(const amk_program *p, char *buf, size_t size) {
    int t, i;
    size_t len;
    buf[0] = '\0';
    for (t = AMK_DTYPE_COUNT - 1; t >= 0; t--) {
        int n = 0;
        for (i = 0; i < p->n_buffers; i++) n += p->buffers[i].kind == AMK_KIND_WEIGHT && p->buffers[i].dtype == t;
        if (!n) continue;
        len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s %d", len ? ", " : "", amk_dtype_name(t), n);
    }
}

/* "96.6 MB of weights a token (Q4_1 210, Q8_0 1, F32 61)" (cli_weight_bytes_read, cli_weight_dtypes)
   into buf. */
static void cli_weight_summary(const amk_program *p, char *buf, size_t size) {
    char dts[192];
    const int64_t wb = cli_weight_bytes_read(p);
    cli_weight_dtypes(p, dts, sizeof dts);
    snprintf(buf, size, "%.1f MB of weights a token (%s)", wb < 0 ? -1.0 : (double)wb / 1e6, dts);
}

/* The dtype of a Llama step's activations and KV cache (its first K cache's), -1 without one. */
static int cli_act_dtype(const amk_program *p) {
    const int b = amk_program_find_buffer(p, "k_cache.0");
    return b >= 0 ? p->buffers[b].dtype : -1;
}

/* Reads and loads a program; on failure prints "FILE:LINE:COL: PATH: message" (or the I/O error)
   to stderr and returns NULL. */
static amk_program *cli_load(const char *path) {
    char *text = NULL;
    size_t len = 0;
    amk_program *p = NULL;
    amk_diag d;
    amk_diag_clear(&d);
    if (amk_file_read(path, &text, &len, &d) != AMK_OK) {
        fprintf(stderr, "amk: %s\n", d.message);
        return NULL;
    }
    if (amk_program_load_json(text, len, &p, &d) != AMK_OK) {
        if (d.line > 0) fprintf(stderr, "%s:%d:%d: ", path, d.line, d.col);
        else fprintf(stderr, "%s: ", path);
        if (d.path[0]) fprintf(stderr, "%s: ", d.path);
        fprintf(stderr, "%s\n", d.message[0] ? d.message : amk_result_str(d.result));
        amk_program_free(p);
        p = NULL;
    }
    amk_free(text);
    return p;
}

/* Validates p; prints every issue to out (when out is not NULL); fills the summary line
   ("accepted: 0 errors, 2 warnings"). Returns amk_program_validate's result. */
static amk_result cli_validate(const amk_program *p, FILE *out, char *summary, size_t size) {
    amk_report rep;
    amk_result r;
    int i;
    memset(&rep, 0, sizeof rep);
    r = amk_program_validate(p, &rep);
    for (i = 0; out && i < rep.n_items; i++) {
        char line[1024];
        amk_report_format_issue(p, &rep.items[i], line, sizeof line);
        fprintf(out, "%s\n", line);
    }
    if (out && rep.truncated) fprintf(out, "(more issues were found than were kept)\n");
    if (r == AMK_OK || r == AMK_ERR_REJECTED)
        snprintf(summary, size, "%s: %d error%s, %d warning%s", r == AMK_OK ? "accepted" : "rejected",
                 rep.n_errors, cli_plural(rep.n_errors), rep.n_warnings, cli_plural(rep.n_warnings));
    else
        snprintf(summary, size, "not validated: %s", amk_result_str(r));
    amk_report_free(&rep);
    return r;
}

/* Parses "CMD FILE" with no options; returns the file or NULL after a usage message. */
static const char *cli_one_file(const cli_cmd *cmd, int argc, char **argv, int *rc) {
    const char *file = NULL;
    int i;
    *rc = CLI_BAD_INPUT;
    for (i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1]) { cli_usage_error(cmd, "unknown option '%s'", argv[i]); return NULL; }
        if (file) { cli_usage_error(cmd, "unexpected argument '%s'", argv[i]); return NULL; }
        file = argv[i];
    }
    if (!file) cli_usage_error(cmd, "%s", "no program file given");
    return file;
}

/* ---- amk validate ---------------------------------------------------------------------------- */

static int cmd_validate(const cli_cmd *cmd, int argc, char **argv) {
    char summary[128];
    amk_program *p;
    amk_result r;
    int rc;
    const char *file = cli_one_file(cmd, argc, argv, &rc);
    if (!file) return rc;
    if (!(p = cli_load(file))) return CLI_BAD_INPUT;
    r = cli_validate(p, stdout, summary, sizeof summary);
    printf("%s\n", summary);
    amk_program_free(p);
    if (r != AMK_OK && r != AMK_ERR_REJECTED) fprintf(stderr, "amk validate: %s\n", amk_result_str(r));
    return r == AMK_OK ? CLI_OK : CLI_FAIL;
}

/* ---- amk fmt --------------------------------------------------------------------------------- */

static int cmd_fmt(const cli_cmd *cmd, int argc, char **argv) {
    const char *file = NULL, *out = NULL;
    amk_program *p;
    char *text = NULL;
    size_t len = 0;
    int i, rc = CLI_OK;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0) {
            if (!cli_take_value(cmd, argc, argv, &i, &out)) return CLI_BAD_INPUT;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
        } else if (file) {
            return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
        } else {
            file = argv[i];
        }
    }
    if (!file) return cli_usage_error(cmd, "%s", "no program file given");
    if (!(p = cli_load(file))) return CLI_BAD_INPUT;
    if (amk_program_write_json(p, &text, &len) != AMK_OK) {
        fprintf(stderr, "amk fmt: cannot write the JSON of '%s'\n", file);
        rc = CLI_FAIL;
    } else if (out) {
        amk_diag d;
        amk_diag_clear(&d);
        if (amk_file_write(out, text, len, &d) != AMK_OK) {
            fprintf(stderr, "amk fmt: %s\n", d.message);
            rc = CLI_FAIL;
        }
    } else if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0) {
        fprintf(stderr, "amk fmt: cannot write to stdout\n");
        rc = CLI_FAIL;
    }
    amk_free(text);
    amk_program_free(p);
    return rc;
}

/* ---- amk info -------------------------------------------------------------------------------- */

static int cli_int_cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* Distinct assigned SMs (0 when no task has one). */
static int cli_sms_used(const amk_program *p) {
    int *sms, n = 0, used = 0, i;
    if (p->n_tasks == 0) return 0;
    sms = (int *)malloc((size_t)p->n_tasks * sizeof(int));
    if (!sms) return -1;
    for (i = 0; i < p->n_tasks; i++)
        if (p->tasks[i].sm >= 0) sms[n++] = p->tasks[i].sm;
    qsort(sms, (size_t)n, sizeof(int), cli_int_cmp);
    for (i = 0; i < n; i++)
        if (i == 0 || sms[i] != sms[i - 1]) used++;
    free(sms);
    return used;
}

static int cmd_info(const cli_cmd *cmd, int argc, char **argv) {
    char buf[128], model[128];
    amk_program *p;
    int64_t wb;
    int i, k, first, unknown = 0, rc, sms;
    const char *file = cli_one_file(cmd, argc, argv, &rc);
    if (!file) return rc;
    if (!(p = cli_load(file))) return CLI_BAD_INPUT;
    printf("program: %s\n", file);
    if (amk_program_meta_string(p, "model", model, sizeof model)) printf("model: %s\n", model);
    if (p->has_target)
        printf("target: %s (sm_%d, %d SMs)\n", p->target.name, p->target.sm_arch, p->target.num_sms);

    printf("tasks: %d", p->n_tasks);
    for (k = 0, first = 1; k < AMK_OP_COUNT; k++) {
        int n = 0;
        for (i = 0; i < p->n_tasks; i++) n += p->tasks[i].op == k;
        if (n) { printf("%s%s %d", first ? " (" : ", ", amk_op_name(k), n); first = 0; }
    }
    for (i = 0; i < p->n_tasks; i++) unknown += amk_op_spec_get(p->tasks[i].op) == NULL;
    if (unknown) { printf("%sunknown %d", first ? " (" : ", ", unknown); first = 0; }
    printf("%s\n", first ? "" : ")");

    printf("buffers: %d", p->n_buffers);
    unknown = 0;
    for (k = 0, first = 1; k < AMK_KIND_COUNT; k++) {
        int n = 0;
        for (i = 0; i < p->n_buffers; i++) n += p->buffers[i].kind == k;
        if (n) { printf("%s%s %d", first ? " (" : ", ", amk_kind_name(k), n); first = 0; }
    }
    for (i = 0; i < p->n_buffers; i++) unknown += p->buffers[i].kind < 0 || p->buffers[i].kind >= AMK_KIND_COUNT;
    if (unknown) { printf("%sunknown %d", first ? " (" : ", ", unknown); first = 0; }
    printf("%s\n", first ? "" : ")");

    printf("counters: %d\n", p->n_counters);
    wb = amk_program_weight_bytes(p);
    if (wb < 0) printf("weight_bytes: overflow\n");
    else { cli_human_bytes(wb, buf, sizeof buf); printf("weight_bytes: %lld (%s)\n", (long long)wb, buf); }
    wb = cli_weight_bytes_read(p);
    if (wb < 0) printf("weight_bytes_read: overflow\n");
    else { cli_human_bytes(wb, buf, sizeof buf); printf("weight_bytes_read: %lld (%s)\n", (long long)wb, buf); }
    {
        char dts[192];
        cli_weight_dtypes(p, dts, sizeof dts);
        if (dts[0]) printf("weight_dtypes: %s\n", dts);
    }
    printf("critical_path: %d\n", amk_program_critical_path(p));
    sms = cli_sms_used(p);
    if (sms == 0) printf("sms_used: unassigned\n");
    else if (sms < 0) printf("sms_used: unknown (out of memory)\n");
    else if (p->has_target) printf("sms_used: %d of %d\n", sms, p->target.num_sms);
    else printf("sms_used: %d\n", sms);
    if (p->has_pages) {
        int64_t total = 0, scratch = 0, onchip = 0;
        int ok = 1;
        for (i = 0; i < p->n_pages; i++) {
            const amk_page *pg = &p->pages[i];
            int on = pg->space == AMK_SPACE_SMEM || pg->space == AMK_SPACE_REGISTER;
            ok = ok && amk_add_i64(total, pg->nbytes, &total) &&
                 (on ? amk_add_i64(onchip, pg->nbytes, &onchip) : amk_add_i64(scratch, pg->nbytes, &scratch));
        }
        if (ok)
            printf("pages: %d (%lld bytes: scratch %lld, on-chip %lld)\nscratch_bytes: %lld\n", p->n_pages,
                   (long long)total, (long long)scratch, (long long)onchip, (long long)scratch);
        else
            printf("pages: %d (sizes overflow)\n", p->n_pages);
    }
    cli_validate(p, NULL, buf, sizeof buf);
    printf("validation: %s\n", buf);
    amk_program_free(p);
    return CLI_OK;
}

/* ---- amk run --------------------------------------------------------------------------------- */

typedef struct cli_run {
    const char *program, *weights, *inputs, *kv, *out, *random, *order_seed, *expect, *rtol;
    uint64_t random_seed, order;
    double rtol_value;               /* --rtol, or -1: each dtype's default (cli_default_rtol) */
    amk_safetensors w, in, kvst, ex; /* zeroed when not given */
} cli_run;

static const char *cli_kind_word(int kind) {
    switch (kind) {
    case AMK_KIND_WEIGHT: return "weight";
    case AMK_KIND_CONST: return "const";
    case AMK_KIND_IO_INPUT: return "input";
    case AMK_KIND_KV_CACHE: return "kv cache";
    default: return "buffer";
    }
}

/* 1 if t holds exactly buffer b's dtype and shape, or b is I4 [..., L] (L even) and t the same
   bytes as U8 [..., L/2] (two values a byte: safetensors has no 4-bit dtype); else prints the
   mismatch and returns 0. */
static int cli_tensor_fits(const amk_st_tensor *t, const amk_buffer *b, const char *key) {
    char have[192], want[192];
    const int packed = b->dtype == AMK_DTYPE_I4 && t->dtype == AMK_DTYPE_U8 && b->rank >= 1 &&
                       b->shape[b->rank - 1] % 2 == 0;
    int i, same = (t->dtype == b->dtype || packed) && t->rank == b->rank;
    for (i = 0; same && i < b->rank; i++)
        same = t->shape[i] == (packed && i == b->rank - 1 ? b->shape[i] / 2 : b->shape[i]);
    if (same) return 1;
    amk_shape_format(have, sizeof have, t->shape, t->rank);
    amk_shape_format(want, sizeof want, b->shape, b->rank);
    fprintf(stderr, "amk run: %s '%s': file has %s %s, buffer wants %s %s\n", cli_kind_word(b->kind),
            key, t->dtype_name, have, amk_dtype_name(b->dtype), want);
    return 0;
}

/* Integer random values stay in [0, bound): 8, or fewer rows of an EMBED table this buffer
   indexes, so token ids are always valid. */
static uint64_t cli_int_bound(const amk_program *p, int id) {
    uint64_t bound = 8; /* why: small valid ids and positions for any integer buffer */
    int i;
    for (i = 0; i < p->n_tasks; i++) {
        const amk_task *t = &p->tasks[i];
        if (t->op == AMK_OP_EMBED && t->n_inputs >= 2 && t->inputs[0] == id && t->inputs[1] >= 0 &&
            t->inputs[1] < p->n_buffers && p->buffers[t->inputs[1]].rank >= 1 &&
            p->buffers[t->inputs[1]].shape[0] >= 0 && (uint64_t)p->buffers[t->inputs[1]].shape[0] < bound)
            bound = (uint64_t)p->buffers[t->inputs[1]].shape[0];
    }
    return bound;
}

/* Fills the VM's storage of buffer id from the seed: floats uniform in [-1, 1), integers in
   [0, cli_int_bound). Each buffer gets its own stream, so its values depend only on (seed, id). */
static int cli_fill_random(const amk_program *p, amk_refvm *vm, int id, uint64_t seed) {
    const amk_buffer *b = &p->buffers[id];
    int64_t n = amk_buffer_numel(b), i;
    size_t nbytes = 0;
    void *mem = amk_refvm_buffer(vm, id, &nbytes);
    amk_rng rng;
    if (!mem || n < 0 || (int64_t)nbytes != amk_dtype_nbytes(b->dtype, n)) return 0;
    amk_rng_seed(&rng, seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(id + 1)));
    if (amk_dtype_is_float(b->dtype)) {
        for (i = 0; i < n; i++) amk_dtype_store_f32(mem, nbytes, b->dtype, i, amk_rng_uniform_sym(&rng));
    } else {
        uint64_t bound = cli_int_bound(p, id);
        for (i = 0; i < n; i++) amk_dtype_store_i64(mem, nbytes, b->dtype, i, (int64_t)amk_rng_below(&rng, bound));
    }
    return 1;
}

/* Binds or copies every WEIGHT, CONST, IO_INPUT and KV_CACHE buffer from the files (or the
   seed). Reports every problem, not the first; returns the number of problems. */
static int cli_bind_all(cli_run *a, const amk_program *p, amk_refvm *vm) {
    int id, problems = 0;
    for (id = 0; id < p->n_buffers; id++) {
        const amk_buffer *b = &p->buffers[id];
        const amk_safetensors *st;
        const char *file, *key = b->name, *flag;
        const amk_st_tensor *t;
        size_t nbytes = 0;
        void *mem;
        if (b->kind == AMK_KIND_WEIGHT || b->kind == AMK_KIND_CONST) {
            st = &a->w; file = a->weights; flag = "--weights";
            if (b->source) key = b->source;
        } else if (b->kind == AMK_KIND_IO_INPUT) {
            st = &a->in; file = a->inputs; flag = "--inputs";
        } else if (b->kind == AMK_KIND_KV_CACHE) {
            st = &a->kvst; file = a->kv; flag = "--kv";
        } else {
            continue;
        }
        t = amk_safetensors_find(st, key);
        if (t) {
            if (!cli_tensor_fits(t, b, key)) { problems++; continue; }
            if (b->kind == AMK_KIND_WEIGHT || b->kind == AMK_KIND_CONST) { /* no copy */
                if (amk_refvm_bind(vm, id, t->data, (size_t)t->nbytes) != AMK_OK) {
                    fprintf(stderr, "amk run: cannot bind %s '%s' (buffer %d)\n", cli_kind_word(b->kind), key, id);
                    problems++;
                }
                continue;
            }
            mem = amk_refvm_buffer(vm, id, &nbytes);
            if (!mem || (uint64_t)nbytes != t->nbytes) {
                fprintf(stderr, "amk run: the VM has no storage of the right size for %s '%s' (buffer %d)\n",
                        cli_kind_word(b->kind), key, id);
                problems++;
                continue;
            }
            if (nbytes) memcpy(mem, t->data, nbytes);
        } else if (b->kind == AMK_KIND_KV_CACHE) {
            if (file) fprintf(stderr, "amk run: note: kv cache '%s' is not in %s; it starts at zero\n", key, file);
        } else if (a->random) {
            if (!cli_fill_random(p, vm, id, a->random_seed)) {
                fprintf(stderr, "amk run: cannot fill %s '%s' (buffer %d)\n", cli_kind_word(b->kind), key, id);
                problems++;
            }
        } else if (file) {
            fprintf(stderr, "amk run: %s '%s' (buffer %d) not found in %s\n", cli_kind_word(b->kind), key, id, file);
            problems++;
        } else {
            fprintf(stderr, "amk run: %s '%s' (buffer %d) not found: no %s file given (or use --random SEED)\n",
                    cli_kind_word(b->kind), key, id, flag);
            problems++;
        }
    }
    return problems;
}

/* "name: F32 [1, 16] = v0 v1 ... (+n more)" for one output (mem: its nbytes bytes). */
static void cli_print_summary(const amk_buffer *b, const void *mem, size_t nbytes) {
    char shape[192];
    int64_t n = amk_buffer_numel(b), i, shown = n < 8 ? n : 8; /* why: 8 values fit a line */
    amk_shape_format(shape, sizeof shape, b->shape, b->rank);
    printf("%s: %s %s =", b->name, amk_dtype_name(b->dtype), shape);
    for (i = 0; i < shown; i++) {
        if (amk_dtype_is_float(b->dtype)) printf(" %.6g", (double)amk_dtype_load_f32(mem, nbytes, b->dtype, i));
        else printf(" %lld", (long long)amk_dtype_load_i64(mem, nbytes, b->dtype, i));
    }
    if (n > shown) printf(" ... (%lld values)", (long long)n);
    if (n == 0) printf(" (empty)");
    printf("\n");
}

/* Writes (or prints) every IO_OUTPUT and KV_CACHE buffer. */
static int cli_emit_outputs(const cli_run *a, const amk_program *p, amk_refvm *vm) {
    amk_st_entry *e;
    int id, n = 0, rc = CLI_OK;
    e = (amk_st_entry *)calloc((size_t)(p->n_buffers ? p->n_buffers : 1), sizeof(amk_st_entry));
    if (!e) { fprintf(stderr, "amk run: out of memory\n"); return CLI_FAIL; }
    for (id = 0; id < p->n_buffers; id++) {
        const amk_buffer *b = &p->buffers[id];
        size_t nbytes = 0;
        const void *mem;
        if (b->kind != AMK_KIND_IO_OUTPUT && b->kind != AMK_KIND_KV_CACHE) continue;
        mem = amk_refvm_buffer(vm, id, &nbytes);
        if (!mem || (int64_t)nbytes != amk_dtype_nbytes(b->dtype, amk_buffer_numel(b))) {
            fprintf(stderr, "amk run: the VM has no storage for output '%s' (buffer %d)\n", b->name, id);
            rc = CLI_FAIL;
            continue;
        }
        if (!a->out) { cli_print_summary(b, mem, nbytes); continue; }
        e[n].name = b->name;
        e[n].dtype = b->dtype;
        e[n].rank = b->rank;
        e[n].shape = b->shape;
        e[n].data = mem;
        n++;
    }
    if (a->out && rc == CLI_OK) {
        amk_diag d;
        amk_diag_clear(&d);
        if (amk_safetensors_write(a->out, e, n, &d) != AMK_OK) {
            fprintf(stderr, "amk run: %s\n", d.message);
            rc = CLI_FAIL;
        } else {
            printf("wrote %d tensor%s to %s\n", n, cli_plural(n), a->out);
        }
    }
    free(e);
    return rc;
}

/* --expect's tolerance for a tensor of dtype dt: relative to its largest value, one rounding of a
   16-bit float and more for the 8-bit ones; integers exact. */
static double cli_default_rtol(int dt) {
    switch (dt) {
    case AMK_DTYPE_F32: return 1e-4;
    case AMK_DTYPE_F16: case AMK_DTYPE_BF16: return 3e-2;
    case AMK_DTYPE_F8E4M3: case AMK_DTYPE_F8E5M2: return 2.5e-1;
    default: return 0.0;
    }
}

/* Compares the run's buffer b (mem, nbytes) with the expected tensor t: max |got - want| <= rtol *
   max |want| (NaN where the other has NaN counts as equal). Prints one line; 1 if it matches. */
static int cli_expect_one(const amk_st_tensor *t, const amk_buffer *b, const void *mem, size_t nbytes,
                          double rtol) {
    int64_t n = amk_buffer_numel(b), i, worst = -1;
    double diff = 0.0, scale = 0.0;
    int nan_mismatch = 0, fits;
    for (i = 0; i < n; i++) {
        double got, want, e;
        if (amk_dtype_is_float(b->dtype)) {
            got = amk_dtype_load_f32(mem, nbytes, b->dtype, i);
            want = amk_dtype_load_f32(t->data, (size_t)t->nbytes, b->dtype, i);
        } else {
            got = (double)amk_dtype_load_i64(mem, nbytes, b->dtype, i);
            want = (double)amk_dtype_load_i64(t->data, (size_t)t->nbytes, b->dtype, i);
        }
        if (got != got || want != want) { nan_mismatch += (got != got) != (want != want); continue; }
        if (fabs(want) > scale) scale = fabs(want);
        e = fabs(got - want);
        if (e > diff) { diff = e; worst = i; }
    }
    fits = !nan_mismatch && diff <= rtol * scale;
    printf("expect %s: max |got - want| %.3g (element %lld) vs max |want| %.3g: %.3g relative, rtol %.3g%s: %s\n",
           b->name, diff, (long long)worst, scale, scale > 0 ? diff / scale : diff, rtol,
           nan_mismatch ? ", NaN where the other has none" : "", fits ? "ok" : "MISMATCH");
    return fits;
}

/* --expect: every tensor of the file against the IO_OUTPUT or KV_CACHE buffer of its name. Returns
   CLI_OK when all match. */
static int cli_expect(const cli_run *a, const amk_program *p, amk_refvm *vm) {
    int i, id, bad = 0;
    for (i = 0; i < a->ex.n_tensors; i++) {
        const amk_st_tensor *t = &a->ex.tensors[i];
        const amk_buffer *b = NULL;
        size_t nbytes = 0;
        const void *mem;
        for (id = 0; id < p->n_buffers && !b; id++)
            if ((p->buffers[id].kind == AMK_KIND_IO_OUTPUT || p->buffers[id].kind == AMK_KIND_KV_CACHE) &&
                p->buffers[id].name && strcmp(p->buffers[id].name, t->name) == 0)
                b = &p->buffers[id];
        if (!b) {
            fprintf(stderr, "amk run: expected '%s' is no output or KV cache of the program\n", t->name);
            bad++;
            continue;
        }
        mem = amk_refvm_buffer(vm, (int)(b - p->buffers), &nbytes);
        if (!cli_tensor_fits(t, b, t->name) || !mem ||
            !cli_expect_one(t, b, mem, nbytes, a->rtol_value >= 0 ? a->rtol_value : cli_default_rtol(b->dtype)))
            bad++;
    }
    if (bad) fprintf(stderr, "amk run: %d of %d expected tensor%s differ\n", bad, a->ex.n_tensors,
                     cli_plural(a->ex.n_tensors));
    return bad ? CLI_FAIL : CLI_OK;
}

static int cli_open_st(const char *path, amk_safetensors *st) {
    amk_diag d;
    amk_diag_clear(&d);
    if (!path) return 1;
    if (amk_safetensors_open(path, st, &d) == AMK_OK) return 1;
    fprintf(stderr, "amk run: %s\n", d.message);
    return 0;
}

static int cmd_run(const cli_cmd *cmd, int argc, char **argv) {
    cli_run a;
    amk_program *p = NULL;
    amk_refvm *vm = NULL;
    amk_refvm_opts opts;
    amk_diag d;
    amk_result r;
    int i, rc = CLI_BAD_INPUT;
    memset(&a, 0, sizeof a);
    for (i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char **slot = strcmp(o, "--weights") == 0 ? &a.weights : strcmp(o, "--inputs") == 0 ? &a.inputs
                          : strcmp(o, "--kv") == 0 ? &a.kv : strcmp(o, "-o") == 0 ? &a.out
                          : strcmp(o, "--random") == 0 ? &a.random : strcmp(o, "--order-seed") == 0 ? &a.order_seed
                          : strcmp(o, "--expect") == 0 ? &a.expect : strcmp(o, "--rtol") == 0 ? &a.rtol
                          : NULL;
        if (slot) {
            if (!cli_take_value(cmd, argc, argv, &i, slot)) return CLI_BAD_INPUT;
        } else if (o[0] == '-' && o[1]) {
            return cli_usage_error(cmd, "unknown option '%s'", o);
        } else if (a.program) {
            return cli_usage_error(cmd, "unexpected argument '%s'", o);
        } else {
            a.program = o;
        }
    }
    if (!a.program) return cli_usage_error(cmd, "%s", "no program file given");
    if (a.random && !cli_parse_u64(a.random, &a.random_seed))
        return cli_usage_error(cmd, "--random wants an unsigned integer seed, not '%s'", a.random);
    if (a.order_seed && !cli_parse_u64(a.order_seed, &a.order))
        return cli_usage_error(cmd, "--order-seed wants an unsigned integer, not '%s'", a.order_seed);
    a.rtol_value = -1.0;
    if (a.rtol) {
        char *end = NULL;
        a.rtol_value = strtod(a.rtol, &end);
        if (!end || *end || !(a.rtol_value >= 0) || a.rtol_value > 1e30)
            return cli_usage_error(cmd, "--rtol wants a number >= 0, not '%s'", a.rtol);
        if (!a.expect) return cli_usage_error(cmd, "%s", "--rtol needs --expect");
    }

    if (!(p = cli_load(a.program))) return CLI_BAD_INPUT;
    if (!cli_open_st(a.weights, &a.w) || !cli_open_st(a.inputs, &a.in) || !cli_open_st(a.kv, &a.kvst) ||
        !cli_open_st(a.expect, &a.ex))
        goto done;
    amk_diag_clear(&d);
    r = amk_refvm_create(p, &vm, &d);
    if (r != AMK_OK) {
        char summary[128];
        if (r == AMK_ERR_REJECTED) {
            cli_validate(p, stderr, summary, sizeof summary);
            fprintf(stderr, "amk run: %s\n", summary);
        } else {
            fprintf(stderr, "amk run: %s\n", d.message[0] ? d.message : amk_result_str(r));
        }
        rc = CLI_FAIL;
        goto done;
    }
    if (cli_bind_all(&a, p, vm) > 0) goto done;
    memset(&opts, 0, sizeof opts);
    opts.seed = a.order;
    amk_diag_clear(&d);
    r = amk_refvm_run(vm, &opts, &d);
    if (r != AMK_OK) {
        fprintf(stderr, "amk run: %s: %s\n", amk_result_str(r), d.message);
        rc = CLI_FAIL;
        goto done;
    }
    rc = cli_emit_outputs(&a, p, vm);
    if (rc == CLI_OK && a.expect) rc = cli_expect(&a, p, vm);
done:
    amk_refvm_free(vm); /* before the files: bound weights point into their maps */
    amk_safetensors_close(&a.w);
    amk_safetensors_close(&a.in);
    amk_safetensors_close(&a.kvst);
    amk_safetensors_close(&a.ex);
    amk_program_free(p);
    return rc;
}

/* ---- the device image and the timeline ------------------------------------------------------- */

#ifdef AMK_EMBED_DEVICE_IMAGE /* the Makefile embeds the cubin where nvcc exists */
#include "amk_device_image.h"
static const void *cli_image(size_t *n) { *n = amk_device_cubin_size; return amk_device_cubin.bytes; }
#else
static const void *cli_image(size_t *n) { *n = 0; return NULL; }
#endif

/* Writes the last GPU run's per-instruction timeline as Chrome trace JSON (Perfetto opens it):
   one track per SM, one slice per task (label, opcode, wait time). */
static int cli_write_trace(amk_cuda *c, const amk_program *p, const char *path) {
    amk_cuda_timing_record *rec = (amk_cuda_timing_record *)calloc((size_t)p->n_tasks + 1, sizeof *rec);
    int n = 0, i;
    FILE *f;
    amk_diag d;
    amk_diag_clear(&d);
    if (!rec || amk_cuda_timing(c, rec, p->n_tasks, &n, &d) != AMK_OK) {
        fprintf(stderr, "amk: no timeline: %s\n", d.message);
        free(rec);
        return CLI_FAIL;
    }
    f = fopen(path, "w");
    if (!f) { fprintf(stderr, "amk: cannot write '%s'\n", path); free(rec); return CLI_FAIL; }
    fprintf(f, "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n");
    for (i = 0; i < n; i++) {
        const amk_cuda_timing_record *r = &rec[i];
        const char *label = p->tasks[r->task].label;
        int k;
        if (!r->done) continue;
        fprintf(f, "{\"name\": \"");
        for (k = 0; label[k]; k++) /* labels are ours: escape only what JSON needs */
            if (label[k] == '"' || label[k] == '\\') fprintf(f, "\\%c", label[k]);
            else if ((unsigned char)label[k] >= 0x20) fputc(label[k], f);
        fprintf(f, "\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": 0, \"tid\": %d, "
                   "\"args\": {\"task\": %d, \"wait_us\": %.3f, \"hw_sm\": %d",
                amk_op_name(r->op), r->start_us, r->end_us - r->start_us, r->sm, r->task, r->wait_us, r->hw_sm);
        for (k = 0; k < AMK_VM_MARKS_N && r->mark_us[k] == 0.0; k++) {}
        if (k < AMK_VM_MARKS_N) { /* an image with marks (AMK_VM_MARKS, amk_tune.h): all of them, 0 = not passed */
            for (k = 0; k < AMK_VM_MARKS_N; k++) fprintf(f, "%s%.3f", k ? ", " : ", \"marks_us\": [", r->mark_us[k]);
            fputc(']', f);
        }
        fprintf(f, "}},\n");
    }
    fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"name\": \"amk megakernel\"}}\n]}\n");
    fclose(f);
    free(rec);
    return CLI_OK;
}

/* ---- build and generate: the Llama path ------------------------------------------------------- */

typedef struct cli_llm_args {
    const char *model, *random, *ctx, *dtype, *act_dtype, *sms, *splits, *seed, *timeout, *mlp_steps, *attn_steps, *qkv_fold;
    const char *x_q8;
    int cpu, spec_ops;
} cli_llm_args;

/* Takes a Llama option at argv[*i] into a; 1 taken, 0 not a Llama option, -1 usage error. */
static int cli_llm_option(const cli_cmd *cmd, int argc, char **argv, int *i, cli_llm_args *a) {
    const char *o = argv[*i];
    const char **slot = strcmp(o, "-m") == 0 || strcmp(o, "--model") == 0 ? &a->model
                      : strcmp(o, "--random-weights") == 0 ? &a->random
                      : strcmp(o, "--ctx") == 0 ? &a->ctx
                      : strcmp(o, "--dtype") == 0 ? &a->dtype
                      : strcmp(o, "--act-dtype") == 0 ? &a->act_dtype
                      : strcmp(o, "--sms") == 0 ? &a->sms
                      : strcmp(o, "--kv-splits") == 0 ? &a->splits
                      : strcmp(o, "--weight-seed") == 0 ? &a->seed
                      : strcmp(o, "--timeout") == 0 ? &a->timeout
                      : strcmp(o, "--mlp-steps") == 0 ? &a->mlp_steps
                      : strcmp(o, "--attn-steps") == 0 ? &a->attn_steps
                      : strcmp(o, "--qkv-fold") == 0 ? &a->qkv_fold
                      : strcmp(o, "--x-q8") == 0 ? &a->x_q8 : NULL;
    if (strcmp(o, "--cpu") == 0) { a->cpu = 1; return 1; }
    if (strcmp(o, "--spec-ops") == 0) { a->spec_ops = 1; return 1; }
    if (!slot) return 0;
    return cli_take_value(cmd, argc, argv, i, slot) ? 1 : -1;
}

/* Options into amk_llm_opts; CLI_OK or CLI_BAD_INPUT (after a message). */
static int cli_llm_opts(const cli_cmd *cmd, const cli_llm_args *a, amk_llm_opts *o) {
    uint64_t v;
    int rc;
    amk_llm_opts_default(o);
    o->backend = a->cpu ? AMK_BACKEND_CPU : AMK_BACKEND_AUTO;
    if (a->ctx) {
        if (!cli_parse_u64(a->ctx, &v) || v < 1 || v > (1u << 24)) return cli_usage_error(cmd, "bad --ctx '%s'", a->ctx);
        o->build.max_seq = (int)v;
    }
    if (a->sms) {
        if (!cli_parse_u64(a->sms, &v) || v < 1 || v > 4096) return cli_usage_error(cmd, "bad --sms '%s'", a->sms);
        o->build.num_sms = (int)v;
    }
    if (a->splits && (rc = cli_parse_splits(cmd, a->splits, &o->build.kv_splits)) != CLI_OK) return rc;
    if (a->seed && !cli_parse_u64(a->seed, &o->random_seed)) return cli_usage_error(cmd, "bad --weight-seed '%s'", a->seed);
    if (a->timeout) {
        if (!cli_parse_u64(a->timeout, &v) || v < 1 || v > 3600000) return cli_usage_error(cmd, "bad --timeout '%s' (ms, 1..3600000)", a->timeout);
        o->timeout_ms = (double)v;
    }
    o->build.spec_ops = a->spec_ops;
    if (a->spec_ops && o->build.kv_splits > 8)
        return cli_usage_error(cmd, "--kv-splits %s with --spec-ops: the spec's opcodes take 1..8 (its ATTENTION_TILE "
                               "has no stacked partial sets)", a->splits);
    if (a->mlp_steps && (rc = cli_parse_steps(cmd, "--mlp-steps", a->mlp_steps, &o->build.mlp_accum)) != CLI_OK) return rc;
    if (a->attn_steps && (rc = cli_parse_steps(cmd, "--attn-steps", a->attn_steps, &o->build.attn_o)) != CLI_OK)
        return rc;
    if (a->qkv_fold && (rc = cli_parse_fold(cmd, a->qkv_fold, &o->build.qkv_fold)) != CLI_OK) return rc;
    if (a->x_q8 && (rc = cli_parse_x_q8(cmd, a->x_q8, &o->build.x_q8)) != CLI_OK) return rc;
    if (a->dtype) {
        int t = amk_dtype_from_name(a->dtype);
        if (t != AMK_DTYPE_F32 && t != AMK_DTYPE_BF16 && t != AMK_DTYPE_F16)
            return cli_usage_error(cmd, "bad --dtype '%s' (F32, BF16 or F16)", a->dtype);
        o->build.weight_dtype = t;
        /* why the activations too: as torch_dtype does; the prompt's tensor-core GEMM and attention
           take 16-bit x, K and V only (F32 activations ran SmolLM2's BF16 prompt ~10x slower) */
        o->build.act_dtype = t;
        o->weights_as_stored = 0; /* every matrix converted to t */
    }
    if (a->act_dtype) {
        int t = amk_dtype_from_name(a->act_dtype);
        if (t != AMK_DTYPE_F32 && t != AMK_DTYPE_BF16 && t != AMK_DTYPE_F16)
            return cli_usage_error(cmd, "bad --act-dtype '%s' (F32, BF16 or F16)", a->act_dtype);
        o->build.act_dtype = t;
        /* why the matrices outside a block format too (without --dtype): the prompt's tensor-core
           tiles take x and W of one 16-bit dtype; the block formats stay as stored, and a chunk
           dequantizes them to t for those tiles */
        if (!a->dtype) o->build.weight_dtype = t;
    }
    if (!a->model == !a->random) return cli_usage_error(cmd, "%s", "give exactly one of -m MODEL and --random-weights SHAPE");
    return CLI_OK;
}

/* The config of --random-weights: a preset name or a config.json path. */
static int cli_random_config(const char *shape, amk_llama_config *c) {
    amk_diag d;
    amk_diag_clear(&d);
    if (amk_llama_config_preset(shape, c) == AMK_OK) return CLI_OK;
    if (!strchr(shape, '/') && !strstr(shape, ".json")) {
        fprintf(stderr, "amk: unknown shape '%s' (llama3-8b, llama3.2-1b, smollm2-135m, or a config.json)\n", shape);
        return CLI_BAD_INPUT;
    }
    if (amk_llama_config_load_json(shape, c, &d) != AMK_OK) {
        fprintf(stderr, "amk: %s\n", d.message);
        return CLI_BAD_INPUT;
    }
    return CLI_OK;
}

/* --ctx against the model's context (max_position_embeddings or context_length): CLI_OK, or
   CLI_BAD_INPUT after a message. */
static int cli_ctx_fits(const amk_llama_config *c, const amk_llm_opts *o) {
    if (o->build.max_seq > 0 && c->max_pos > 0 && o->build.max_seq > c->max_pos) {
        fprintf(stderr, "amk: --ctx %d is longer than the model's context of %d tokens\n", o->build.max_seq, c->max_pos);
        return CLI_BAD_INPUT;
    }
    return CLI_OK;
}

static int cmd_build(const cli_cmd *cmd, int argc, char **argv) {
    cli_llm_args a;
    const char *out = NULL;
    amk_llm_opts o;
    amk_llama_config cfg;
    amk_model *model = NULL;
    amk_program *p = NULL;
    amk_diag d;
    amk_result r;
    const char *prefill = NULL;
    int i, rc;
    memset(&a, 0, sizeof a);
    amk_diag_clear(&d);
    for (i = 1; i < argc; i++) {
        int took = cli_llm_option(cmd, argc, argv, &i, &a);
        if (took < 0) return CLI_BAD_INPUT;
        if (took) continue;
        if (strcmp(argv[i], "-o") == 0) { if (!cli_take_value(cmd, argc, argv, &i, &out)) return CLI_BAD_INPUT; continue; }
        if (strcmp(argv[i], "--prefill") == 0) { if (!cli_take_value(cmd, argc, argv, &i, &prefill)) return CLI_BAD_INPUT; continue; }
        return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
    }
    if ((rc = cli_llm_opts(cmd, &a, &o)) != CLI_OK) return rc;
    /* why F32: a program file is for any backend; amk_llm's GPU choice (BF16) is --dtype BF16 here */
    if (o.build.weight_dtype == AMK_DTYPE_AUTO) o.build.weight_dtype = AMK_DTYPE_F32;
    if (o.build.act_dtype == AMK_DTYPE_AUTO) o.build.act_dtype = AMK_DTYPE_F32;
    if (prefill) {
        uint64_t v;
        if (!cli_parse_u64(prefill, &v) || v < 1 || v > (1u << 20)) return cli_usage_error(cmd, "bad --prefill '%s'", prefill);
        o.build.prefill_rows = (int)v;
    }
    if (a.random) {
        if ((rc = cli_random_config(a.random, &cfg)) != CLI_OK) return rc;
    } else {
        if (amk_model_open(a.model, &model, &d) != AMK_OK) { fprintf(stderr, "amk: %s\n", d.message); return CLI_BAD_INPUT; }
        cfg = *amk_model_config(model);
        if (o.weights_as_stored) amk_llama_build_opts_stored(&o.build, model); /* its quantized tensors as stored */
    }
    if ((rc = cli_ctx_fits(&cfg, &o)) != CLI_OK) { amk_model_close(model); return rc; }
    r = amk_llama_build_lowered(&cfg, &o.build, &p, &d);
    amk_model_close(model);
    if (r != AMK_OK) {
        fprintf(stderr, "amk: %s\n", d.message);
        return CLI_FAIL;
    }
    if (out) {
        if (amk_program_save(p, out, &d) != AMK_OK) { fprintf(stderr, "amk: %s\n", d.message); amk_program_free(p); return CLI_FAIL; }
    } else {
        char *text = NULL;
        size_t n = 0;
        if (amk_program_write_json(p, &text, &n) != AMK_OK) { amk_program_free(p); return CLI_FAIL; }
        fwrite(text, 1, n, stdout);
        amk_free(text);
    }
    {
        char sum[256];
        cli_weight_summary(p, sum, sizeof sum);
        fprintf(stderr, "built %s%s: %d layers, %d tasks, %d buffers, %d counters, %s%s, lowered onto %d SMs\n",
                cfg.name, prefill ? " (prefill)" : "", cfg.n_layers, p->n_tasks, p->n_buffers, p->n_counters, sum,
                prefill ? " (a chunk reads them once)" : "", o.build.num_sms);
    }
    amk_program_free(p);
    return CLI_OK;
}

static double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A progress bar on stderr while weights load (only when stderr is a terminal). */
static void cli_prompt_progress(int done, int total, double t_start);
static double cli_prompt_t0; /* when the prompt started (cli_progress's "prompt") */

static void cli_progress(void *user, const char *what, uint64_t done, uint64_t total) {
    int width = 30, fill = total ? (int)(done * (uint64_t)width / total) : width, k;
    (void)user;
    if (strcmp(what, "prompt") == 0) {
        cli_prompt_progress((int)done, (int)total, cli_prompt_t0);
        return;
    }
    if (!isatty(2)) return;
    fprintf(stderr, "\rloading %s [", what);
    for (k = 0; k < width; k++) fputc(k < fill ? '#' : ' ', stderr);
    fprintf(stderr, "] %3d%%%s", total ? (int)(done * 100 / total) : 100, done >= total ? "\n" : "");
    fflush(stderr);
}

/* The prompt's progress on stderr (only when it is a terminal), once the prompt has run a second
   (a long prompt on the reference VM runs for minutes), at most every quarter of a second; the
   line is cleared when the prompt is done. */
static void cli_prompt_progress(int done, int total, double t_start) {
    static double last = 0.0;
    static int shown = 0;
    const double now = cli_now();
    if (!isatty(2)) return;
    if (done >= total) { /* the prompt is done: clear the line */
        if (shown) fprintf(stderr, "\r%60s\r", "");
        shown = 0;
        return;
    }
    if (now - t_start < 1.0 || now - last < 0.25) return;
    last = now;
    shown = 1;
    fprintf(stderr, "\rprompt %d/%d tokens, %.1f tok/s", done, total, done / (now - t_start));
    fflush(stderr);
}

/* The prompt's token ids (in the chat template with chat) into a malloc'd *ids; returns the count,
   or -1 (with a message printed when report), -2 for an empty prompt without a BOS token. A prompt
   of no tokens starts from BOS (as llama.cpp does): the tokenizer's, else bos (the config's; -1
   none). */
static int cli_prompt_ids(const amk_tokenizer *tok, int chat, const char *sys, const char *prompt, int **ids,
                          int report, int bos) {
    char *text = NULL;
    const char *src = prompt;
    int n = -1, cap = 256;
    *ids = NULL;
    if (chat) {
        int need = amk_tokenizer_chat_prompt(tok, sys, prompt, NULL, 0);
        text = need >= 0 ? (char *)malloc((size_t)need + 1) : NULL;
        if (!text) {
            if (report) fprintf(stderr, "amk: cannot build the chat prompt\n");
            return -1;
        }
        amk_tokenizer_chat_prompt(tok, sys, prompt, text, (size_t)need + 1);
        src = text;
    }
    for (;;) { /* why twice at most: the first call says how many ids the whole encoding has */
        *ids = (int *)malloc((size_t)cap * sizeof(int));
        if (!*ids) break;
        n = amk_tokenizer_encode(tok, src, strlen(src), amk_tokenizer_add_bos(tok), *ids, cap);
        if (n <= cap) break;
        free(*ids);
        *ids = NULL;
        cap = n;
    }
    free(text);
    if (!*ids || n < 0) {
        if (report) fprintf(stderr, "amk: cannot encode the prompt\n");
        free(*ids);
        *ids = NULL;
        return -1;
    }
    if (n == 0) { /* cap >= 1: *ids has room for one */
        if (amk_tokenizer_bos(tok) >= 0) bos = amk_tokenizer_bos(tok);
        if (bos < 0) {
            if (report) fprintf(stderr, "amk: the prompt is empty and the model has no BOS token to start from; give a prompt\n");
            free(*ids);
            *ids = NULL;
            return -2;
        }
        (*ids)[0] = bos;
        n = 1;
    }
    return n;
}

/* Opens the model and its tokenizer once, for the step too (*mdl, *tok: handed to
   amk_llm_open_model; *tok NULL when the tokenizer cannot be read, which amk_llm_open_model then
   reports). With fit (no --ctx), returns the KV cache rows for the prompt plus n_new tokens (at
   most the model's context and AMK_LLAMA_DEFAULT_MAX_SEQ), so a short generation runs the
   one-split step instead of the default's 4096-row one; 0 (the builder's default) otherwise or
   when the text does not fit. The prompt's ids go to *ids and *n (NULL and -1 when it could not be
   encoded here). A model that does not open: -1, its error in d. */
static int cli_open_fit(const char *model, int fit, int chat, const char *sys, const char *prompt, int n_new,
                        amk_model **mdl, amk_tokenizer **tok, int **ids, int *n, amk_diag *d) {
    int max_pos = 0;
    int64_t need;
    *ids = NULL;
    *n = -1;
    *tok = NULL;
    if (amk_model_open(model, mdl, d) != AMK_OK) return -1;
    max_pos = amk_model_config(*mdl)->max_pos;
    if (amk_tokenizer_from_model(*mdl, tok, NULL) == AMK_OK)
        *n = cli_prompt_ids(*tok, chat, sys, prompt, ids, 0, amk_model_config(*mdl)->bos_id);
    need = (int64_t)*n + n_new;
    if (!fit || *n < 1 || need > AMK_LLAMA_DEFAULT_MAX_SEQ || (max_pos > 0 && need > max_pos)) return 0;
    return (int)need;
}

/* --chain N (generate, bench): steps a launch in [1, AMK_CUDA_MAX_CHAIN]. 0 after a usage error. */
static int cli_parse_chain(const cli_cmd *cmd, const char *s, int *chain) {
    uint64_t v;
    char what[64];
    if (cli_parse_u64(s, &v) && v >= 1 && v <= AMK_CUDA_MAX_CHAIN) {
        *chain = (int)v;
        return 1;
    }
    snprintf(what, sizeof what, "%.20s' (1..%d)", s, AMK_CUDA_MAX_CHAIN);
    cli_usage_error(cmd, "bad --chain '%s", what);
    return 0;
}

/* A generated token to stdout: its text, or its id (random weights have no tokenizer). */
static void cli_print_token(const amk_tokenizer *tok, int id) {
    char piece[512];
    if (tok) {
        const int k = amk_tokenizer_decode(tok, id, piece, sizeof piece);
        if (k > 0) fwrite(piece, 1, (size_t)k, stdout);
    } else {
        printf("%d ", id);
    }
}

/* Greedy tokens a launch on the GPU (generate --chain N): a chunk's tokens print together, and the
   steps after an end-of-sequence in it are wasted. why 16: +4% (bench/RESULTS.md run 273) and +8%
   (run 281) decode tok/s on SmolLM2 against a launch a token, while a chunk's tokens still appear every ~90
   ms on the 8B (16 steps of 5.6 ms); racecheck and memcheck of chained bf16 steps are clean (run
   280). */
#define CLI_CHAIN_DEFAULT 16

/* --prefill-rows M|off into amk_llm_opts.prefill_rows (off: -1, a token at a time). */
static int cli_parse_prefill_rows(const cli_cmd *cmd, const char *s, int *rows) {
    uint64_t v;
    if (strcmp(s, "off") == 0) { *rows = -1; return CLI_OK; }
    if (!cli_parse_u64(s, &v) || v < 1 || v > (1u << 20)) return cli_usage_error(cmd, "bad --prefill-rows '%s' (M >= 1, or off)", s);
    *rows = (int)v;
    return CLI_OK;
}

static int cmd_generate(const cli_cmd *cmd, int argc, char **argv) {
    cli_llm_args a;
    const char *prompt = NULL, *n_s = NULL, *temp_s = NULL, *topk_s = NULL, *topp_s = NULL, *seed_s = NULL, *sys_s = NULL;
    const char *trace = NULL, *chain_s = NULL, *rows_s = NULL;
    int chat = 0, quiet = 0, i, rc, n_new = 64, n_prompt = -1, *ids = NULL, pos, next = -1, eos, generated = 0;
    int chain = CLI_CHAIN_DEFAULT, chained, *chunk = NULL;
    uint64_t v, seed = 0;
    double temp = 0.0, top_p = 1.0, t0, t1, t2;
    int top_k = 0;
    amk_llm_opts o;
    amk_llm *m = NULL;
    amk_llama_config cfg;
    const amk_tokenizer *tok;
    amk_sampler smp;
    amk_diag d;
    memset(&a, 0, sizeof a);
    amk_diag_clear(&d);
    for (i = 1; i < argc; i++) {
        const char *x = argv[i];
        int took = cli_llm_option(cmd, argc, argv, &i, &a);
        if (took < 0) return CLI_BAD_INPUT;
        if (took) continue;
        if (strcmp(x, "--chat") == 0) { chat = 1; continue; }
        if (strcmp(x, "-q") == 0 || strcmp(x, "--quiet") == 0) { quiet = 1; continue; }
        {
            const char **slot = strcmp(x, "-p") == 0 || strcmp(x, "--prompt") == 0 ? &prompt
                              : strcmp(x, "-n") == 0 ? &n_s : strcmp(x, "--temp") == 0 ? &temp_s
                              : strcmp(x, "--top-k") == 0 ? &topk_s : strcmp(x, "--top-p") == 0 ? &topp_s
                              : strcmp(x, "--seed") == 0 ? &seed_s : strcmp(x, "--system") == 0 ? &sys_s
                              : strcmp(x, "--trace") == 0 ? &trace : strcmp(x, "--chain") == 0 ? &chain_s
                              : strcmp(x, "--prefill-rows") == 0 ? &rows_s : NULL;
            if (!slot) return cli_usage_error(cmd, "unexpected argument '%s'", x);
            if (!cli_take_value(cmd, argc, argv, &i, slot)) return CLI_BAD_INPUT;
        }
    }
    if ((rc = cli_llm_opts(cmd, &a, &o)) != CLI_OK) return rc;
    if (rows_s && (rc = cli_parse_prefill_rows(cmd, rows_s, &o.prefill_rows)) != CLI_OK) return rc;
    if (n_s) { if (!cli_parse_u64(n_s, &v) || v > (1u << 24)) return cli_usage_error(cmd, "bad -n '%s'", n_s); n_new = (int)v; }
    if (topk_s) { if (!cli_parse_u64(topk_s, &v) || v > (1u << 30)) return cli_usage_error(cmd, "bad --top-k '%s'", topk_s); top_k = (int)v; }
    if (chain_s && !cli_parse_chain(cmd, chain_s, &chain)) return CLI_BAD_INPUT;
    if (seed_s && !cli_parse_u64(seed_s, &seed)) return cli_usage_error(cmd, "bad --seed '%s'", seed_s);
    if (temp_s) { char *e; temp = strtod(temp_s, &e); if (*e || !(temp >= 0.0 && temp <= 100.0)) return cli_usage_error(cmd, "bad --temp '%s'", temp_s); }
    if (topp_s) { char *e; top_p = strtod(topp_s, &e); if (*e || !(top_p > 0.0 && top_p <= 1.0)) return cli_usage_error(cmd, "bad --top-p '%s' (0 < p <= 1)", topp_s); }
    if (!a.random && !prompt) return cli_usage_error(cmd, "%s", "-p PROMPT is required with -m");
    if (sys_s && !chat) return cli_usage_error(cmd, "%s", "--system needs --chat (the system prompt is part of the chat template)");
    o.progress = quiet ? NULL : cli_progress;
    o.device_image = cli_image(&o.device_image_size);
    t0 = cli_now();
    if (a.random) {
        if ((rc = cli_random_config(a.random, &cfg)) != CLI_OK || (rc = cli_ctx_fits(&cfg, &o)) != CLI_OK) return rc;
        if (amk_llm_open_random(&cfg, &o, &m, &d) != AMK_OK) {
            fprintf(stderr, "amk: %s\n", d.message);
            return d.result == AMK_ERR_INVALID_ARG ? CLI_BAD_INPUT : CLI_FAIL;
        }
    } else {
        amk_model *mdl = NULL;
        amk_tokenizer *mtok = NULL;
        const int fit = cli_open_fit(a.model, !a.ctx, chat, sys_s, prompt, n_new, &mdl, &mtok, &ids, &n_prompt, &d);
        if (fit >= 0 && (rc = cli_ctx_fits(amk_model_config(mdl), &o)) != CLI_OK) {
            amk_model_close(mdl);
            amk_tokenizer_free(mtok);
            free(ids);
            return rc;
        }
        if (fit > 0) o.build.max_seq = fit;
        if (fit < 0 || amk_llm_open_model(mdl, mtok, &o, &m, &d) != AMK_OK) { /* it took mdl and mtok */
            fprintf(stderr, "amk: %s\n", d.message);
            free(ids);
            return d.result == AMK_ERR_OUT_OF_MEMORY || d.result == AMK_ERR_REJECTED ? CLI_FAIL : CLI_BAD_INPUT;
        }
    }
    if (amk_llm_note(m)[0]) fprintf(stderr, "note: %s\n", amk_llm_note(m));
    tok = amk_llm_tokenizer(m);
    if (tok) { /* the prompt, as text or in the chat template (unless encoded for the context) */
        if (!ids) n_prompt = cli_prompt_ids(tok, chat, sys_s, prompt, &ids, 1, amk_llm_config(m)->bos_id);
        if (n_prompt < 0) { rc = n_prompt == -2 ? CLI_BAD_INPUT : CLI_FAIL; goto done; }
        eos = amk_tokenizer_eos(tok);
    } else { /* random weights: no tokenizer; start from BOS and print ids */
        ids = (int *)malloc(sizeof(int));
        if (!ids) { amk_llm_close(m); return CLI_FAIL; }
        ids[0] = cfg.bos_id >= 0 && cfg.bos_id < cfg.vocab ? cfg.bos_id : 0;
        n_prompt = 1;
        eos = -1;
    }
    if (n_prompt < 1 || n_prompt > amk_llm_max_seq(m) || n_prompt + n_new > amk_llm_max_seq(m)) {
        fprintf(stderr, "amk: the prompt (%d tokens) plus -n %d does not fit the context of %d tokens (use --ctx)\n",
                n_prompt, n_new, amk_llm_max_seq(m));
        rc = CLI_FAIL;
        goto done;
    }
    amk_sampler_init(&smp, (float)temp, top_k, (float)top_p, seed);
    chained = temp == 0.0 && chain > 1 && amk_llm_cuda(m) != NULL; /* greedy on the GPU: the decode in chunks */
    if (!quiet) {
        char sum[256], dev[128] = "";
        if (amk_llm_cuda(m)) /* the step's arena (weights, caches, activations, tables) and the prefill programs' */
            snprintf(dev, sizeof dev, ", device memory %.1f MB", (double)amk_llm_device_bytes(m) / 1e6);
        cli_weight_summary(amk_llm_program(m), sum, sizeof sum);
        for (i = 0; amk_llm_prefill_rows_at(m, i) > 0; i++) /* the prefill programs' chunk rows: "of 2048, 512 and 128" */
            snprintf(dev + strlen(dev), sizeof dev - strlen(dev), "%s%d", i == 0 ? ", prompt chunks of "
                     : amk_llm_prefill_rows_at(m, i + 1) > 0 ? ", " : " and ", amk_llm_prefill_rows_at(m, i));
        fprintf(stderr, "%s: %s, %s, %d layers, %s, activations %s, backend %s (%s)%s, context %d\n",
                a.model ? a.model : a.random, amk_llm_config(m)->name[0] ? amk_llm_config(m)->name : "(unnamed)",
                amk_llm_config(m)->arch, amk_llm_config(m)->n_layers, sum, amk_dtype_name(cli_act_dtype(amk_llm_program(m))),
                amk_llm_backend_name(m), amk_llm_backend_reason(m), dev, amk_llm_max_seq(m));
        if (amk_llm_cuda(m) && amk_llm_prefill_rows(m) > 0 && cli_act_dtype(amk_llm_program(m)) == AMK_DTYPE_F32 &&
            cli_has_block_weights(amk_llm_program(m)))
            fprintf(stderr, "amk: with F32 activations the prompt's quantized matrices run on the CUDA cores; "
                            "--act-dtype BF16 runs them on the tensor cores\n");
    }
    if (tok && !chat) fputs(prompt, stdout);
    t1 = t2 = cli_prompt_t0 = cli_now();
    rc = CLI_OK;
    /* the prompt in one call (chunks of the prefill program on the GPU), then a step a new token;
       the last new token is not fed back; with -n 0 the prompt alone runs */
    for (pos = n_prompt - 1; pos < (n_new > 0 ? n_prompt + n_new - 1 : n_prompt); pos++) {
        const float *logits = NULL;
        int argmax = -1;
        /* why logits only when sampling: greedy needs the token alone (no copy of vocab floats) */
        const amk_result r = pos == n_prompt - 1
            ? amk_llm_prefill(m, ids, n_prompt, 0, temp > 0.0 ? &logits : NULL, &argmax, &d)
            : amk_llm_step(m, next, pos, temp > 0.0 ? &logits : NULL, &argmax, &d);
        if (r != AMK_OK) {
            if (pos == n_prompt - 1) fprintf(stderr, "\namk: the prompt: %s\n", d.message);
            else fprintf(stderr, "\namk: step %d: %s\n", pos, d.message);
            rc = CLI_FAIL;
            break;
        }
        if (pos == n_prompt - 1) t2 = cli_now();
        if (n_new == 0) continue;
        next = temp > 0.0 ? amk_sampler_sample(&smp, logits, amk_llm_config(m)->vocab) : argmax;
        generated++;
        if (next == eos) break;
        cli_print_token(tok, next);
        fflush(stdout);
        if (generated >= n_new) break;
        if (chained) break; /* the rest in chunks, below */
    }
    /* why chained: a launch of several steps has no launch and no host round trip between tokens
       (amk_llm_generate); the tokens after an end-of-sequence in a chunk are dropped */
    if (rc == CLI_OK && chained && generated >= 1 && next != eos && generated < n_new &&
        !(chunk = (int *)malloc((size_t)chain * sizeof(int)))) {
        fprintf(stderr, "\namk: out of memory\n");
        rc = CLI_FAIL;
    }
    while (chunk && generated < n_new) {
        const int k = n_new - generated < chain ? n_new - generated : chain;
        int j;
        if (amk_llm_generate(m, next, pos + 1, k, chunk, &d) != AMK_OK) {
            fprintf(stderr, "\namk: steps %d..%d: %s\n", pos + 1, pos + k, d.message);
            rc = CLI_FAIL;
            break;
        }
        for (j = 0; j < k; j++) {
            next = chunk[j];
            pos++;
            generated++;
            if (next == eos) break;
            cli_print_token(tok, next);
        }
        fflush(stdout);
        if (next == eos) break;
    }
    free(chunk);
    if (trace && amk_llm_cuda(m)) { /* the timeline of one more step at the last position */
        const float *lg;
        amk_cuda_set_timing(amk_llm_cuda(m), 1);
        if (amk_llm_step(m, next >= 0 ? next : 0, pos < amk_llm_max_seq(m) ? pos : pos - 1, &lg, NULL, &d) == AMK_OK &&
            cli_write_trace(amk_llm_cuda(m), amk_llm_program(m), trace) == CLI_OK && !quiet)
            fprintf(stderr, "trace: %s\n", trace);
    } else if (trace) {
        fprintf(stderr, "amk: --trace needs the GPU backend\n");
    }
    printf("\n");
    fflush(stdout);
    {
        double end = cli_now(), pre = t2 - t1, dec = end - t2;
        if (!quiet)
            fprintf(stderr, "load %.2f s | prompt %d tokens, %.1f tok/s | decode %d tokens, %.1f tok/s (%s)\n",
                    t1 - t0, n_prompt, pre > 0 ? n_prompt / pre : 0.0, generated > 1 ? generated - 1 : 0,
                    dec > 0 && generated > 1 ? (generated - 1) / dec : 0.0, amk_llm_backend_name(m));
    }
    amk_sampler_free(&smp);
done:
    free(ids);
    amk_llm_close(m);
    return rc;
}

/* ---- bench --------------------------------------------------------------------------------- */

/* Sum of op time per opcode over all SMs from the last run's timeline; prints the top ones. */
static void cli_print_op_times(amk_cuda *c, const amk_program *p, double step_us, int grid) {
    amk_cuda_timing_record *rec = (amk_cuda_timing_record *)calloc((size_t)p->n_tasks + 1, sizeof *rec);
    double per_op[AMK_OP_COUNT], wait_total = 0.0, busy = 0.0;
    int n = 0, i, op;
    amk_diag d;
    amk_diag_clear(&d);
    memset(per_op, 0, sizeof per_op);
    if (!rec || amk_cuda_timing(c, rec, p->n_tasks, &n, &d) != AMK_OK) { free(rec); return; }
    for (i = 0; i < n; i++) {
        if (!rec[i].done || rec[i].op < 0 || rec[i].op >= AMK_OP_COUNT) continue;
        per_op[rec[i].op] += rec[i].end_us - rec[i].start_us;
        wait_total += rec[i].wait_us;
    }
    for (op = 0; op < AMK_OP_COUNT; op++) busy += per_op[op];
    printf("    per opcode (sum over SMs of op time; %% of all SMs x step time):");
    for (op = 0; op < AMK_OP_COUNT; op++)
        if (per_op[op] > 0.0) printf(" %s %.0f us (%.1f%%)", amk_op_name(op), per_op[op], 100.0 * per_op[op] / (step_us * grid));
    printf("\n    until the waits were met (setup, counters): %.0f us (%.1f%%), idle/overhead: %.1f%%\n",
           wait_total, 100.0 * wait_total / (step_us * grid), 100.0 * (1.0 - (busy + wait_total) / (step_us * grid)));
    free(rec);
}

/* A quantization of the random weights (amk bench --quant): llama.cpp's choice of each tensor's
   type for a Llama model (llama-quant.cpp's rules, as far as the shapes here need): the recipe's
   type for every matrix; Q6_K for the output (and a tied embedding: it is the output), Q8_0 when
   its rows are not whole 256-blocks or the recipe is Q8_0; Q4_K_M and Q5_K_M give attn_v and
   ffn_down Q6_K in the layers use_more_bits picks (the first and last eighth, every third
   between); a K format whose block does not divide a row falls back as llama.cpp does (Q4_K to
   Q5_0, Q5_K to Q5_1, Q6_K to Q8_0). */
typedef struct cli_quant {
    const char *name;
    int base, more; /* the matrices' type; attn_v and ffn_down's in use_more_bits layers */
    int n_layers, tied;
} cli_quant;

static const cli_quant cli_quants[] = {
    {"Q8_0", AMK_DTYPE_Q8_0, AMK_DTYPE_Q8_0, 0, 0},   {"Q4_0", AMK_DTYPE_Q4_0, AMK_DTYPE_Q4_0, 0, 0},
    {"Q4_1", AMK_DTYPE_Q4_1, AMK_DTYPE_Q4_1, 0, 0},   {"Q5_0", AMK_DTYPE_Q5_0, AMK_DTYPE_Q5_0, 0, 0},
    {"Q4_K_M", AMK_DTYPE_Q4_K, AMK_DTYPE_Q6_K, 0, 0}, {"Q5_K_M", AMK_DTYPE_Q5_K, AMK_DTYPE_Q6_K, 0, 0},
    {"Q6_K", AMK_DTYPE_Q6_K, AMK_DTYPE_Q6_K, 0, 0}};

static int cli_quant_dtype(void *user, const char *tensor, int64_t rows, int64_t cols) {
    const cli_quant *q = (const cli_quant *)user;
    const int output = strcmp(tensor, "lm_head.weight") == 0 || (q->tied && strcmp(tensor, "model.embed_tokens.weight") == 0);
    int layer = -1, t = q->base;
    (void)rows;
    if (output) return cols % 256 || q->base == AMK_DTYPE_Q8_0 ? AMK_DTYPE_Q8_0 : AMK_DTYPE_Q6_K;
    if (sscanf(tensor, "model.layers.%d.", &layer) == 1 && (strstr(tensor, ".v_proj.") || strstr(tensor, ".down_proj."))) {
        const int n = q->n_layers;
        if (layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2) t = q->more; /* use_more_bits */
    }
    if (cols % 256) t = t == AMK_DTYPE_Q4_K ? AMK_DTYPE_Q5_0 : t == AMK_DTYPE_Q5_K ? AMK_DTYPE_Q5_1
                      : t == AMK_DTYPE_Q6_K ? AMK_DTYPE_Q8_0 : t;
    return t;
}

/* One row of amk bench's table: a step of us microseconds reading wgb GB of weights. */
static void cli_bench_row(const char *shape, const char *ctxcell, const char *how, double us, double wgb, double read_gbs,
                          int n_tasks) {
    printf("| %s | %s%s | %.3f | %.2f | %.0f | %.1f%% | %d |\n", shape, ctxcell, how, us / 1000.0, wgb, wgb / (us * 1e-6),
           100.0 * wgb / (us * 1e-6) / read_gbs, n_tasks);
}

/* amk bench's options for a shape on the GPU: BF16 weights and activations (F16 where qn is
   "F16"), max_seq cache rows, and quant's block formats where it names a recipe (*quant: the recipe
   named qn for cfg, zeroed for BF16 and F16; o keeps a pointer to it). */
static void cli_bench_opts(amk_llm_opts *o, const void *image, size_t image_size, int max_seq, const char *qn,
                           const amk_llama_config *cfg, cli_quant *quant) {
    size_t k;
    memset(quant, 0, sizeof *quant);
    for (k = 0; k < sizeof cli_quants / sizeof cli_quants[0]; k++)
        if (strcmp(qn, cli_quants[k].name) == 0) *quant = cli_quants[k];
    quant->n_layers = cfg->n_layers;
    quant->tied = cfg->tie_embeddings;
    amk_llm_opts_default(o);
    o->backend = AMK_BACKEND_CUDA;
    o->device_image = image;
    o->device_image_size = image_size;
    o->build.weight_dtype = o->build.act_dtype = strcmp(qn, "F16") == 0 ? AMK_DTYPE_F16 : AMK_DTYPE_BF16;
    o->build.max_seq = max_seq;
    if (quant->name) { /* the recipe's block formats; BF16 where none applies */
        o->build.weight_dtype_of = cli_quant_dtype;
        o->build.weight_dtype_user = quant;
    }
}

static int cli_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The multiply-adds x 2 of a prompt of n tokens through cfg: every layer's matrices on every row,
   causal attention (QK^T and P.V over the keys each row sees), the LM head on the last row. */
static double cli_prompt_flops(const amk_llama_config *c, int n) {
    const double H = c->hidden, I = c->intermediate, q = (double)c->n_heads * c->head_dim;
    const double kv = (double)c->n_kv_heads * c->head_dim, rows = n;
    const double layer = 2.0 * rows * (H * (q + 2.0 * kv) + q * H + 3.0 * H * I) +
                         4.0 * (double)c->head_dim * c->n_heads * rows * (rows + 1.0) / 2.0;
    return layer * c->n_layers + 2.0 * H * c->vocab;
}

/* The chunks one amk_llm_prefill ran, from its progress calls ("prompt", tokens done): runs of equal
   sizes, "512 x 2 + 128" (a step a token: "1"). */
typedef struct cli_chunks {
    char text[96];
    uint64_t last, size, count;
    int frozen; /* text is whole: later calls change nothing */
} cli_chunks;
static void cli_chunks_flush(cli_chunks *c) {
    const size_t at = strlen(c->text);
    if (!c->count) return;
    if (c->count > 1)
        snprintf(c->text + at, sizeof c->text - at, "%s%llu x %llu", at ? " + " : "", (unsigned long long)c->size,
                 (unsigned long long)c->count);
    else
        snprintf(c->text + at, sizeof c->text - at, "%s%llu", at ? " + " : "", (unsigned long long)c->size);
    c->count = 0;
}
static void cli_chunks_progress(void *user, const char *what, uint64_t done, uint64_t total) {
    cli_chunks *c = (cli_chunks *)user;
    (void)total;
    if (!c || c->frozen || strcmp(what, "prompt") != 0 || done <= c->last) return;
    if (done - c->last != c->size) cli_chunks_flush(c);
    c->size = done - c->last;
    c->count++;
    c->last = done;
}

/* A row of amk bench --prefill's table: its cells up to TFLOP/s, that rate, and the token-at-a-time
   time ("" when not run). */
typedef struct cli_prefill_row {
    char head[320], one[32];
    double tflops;
} cli_prefill_row;

/* amk bench --prefill: a prompt of each length through amk_llm_prefill on random weights (the
   median of iters runs after one warm-up, the KV cache reset before each), beside the same model's
   decode step a token at a time (amk_llm_step, one run) on the first length. */
static int cli_bench_prefill(const char *shapes_s, const char *quants_s, const char *lens_s, int rows, int iters,
                             const char *trace, const void *image, size_t image_size) {
    char shapes[256], *save = NULL, *sh;
    int rc = CLI_OK;
    /* the tensor cores' rate, measured once by the first prefill image after its prompts (why
       after: right before them, its full-power launches slowed the first prompt by ~2%) */
    double peak = 0.0;
    cli_prefill_row *tab = NULL; /* the table's rows, printed last */
    int n_tab = 0, cap_tab = 0, t;
    cli_chunks chunks;
    snprintf(shapes, sizeof shapes, "%s", shapes_s);
    for (sh = strtok_r(shapes, ",", &save); sh; sh = strtok_r(NULL, ",", &save)) {
      char qbuf[128], *qsave = NULL, *qn;
      snprintf(qbuf, sizeof qbuf, "%s", quants_s);
      for (qn = strtok_r(qbuf, ",", &qsave); qn; qn = strtok_r(NULL, ",", &qsave)) {
        char lbuf[128], *lsave = NULL, *ls, label[96];
        int longest = 0, first = 1, *tok = NULL, j;
        amk_llama_config cfg;
        cli_quant quant;
        amk_llm_opts o;
        amk_llm *m = NULL;
        amk_diag d;
        uint64_t v;
        amk_diag_clear(&d);
        if (cli_random_config(sh, &cfg) != CLI_OK) { rc = CLI_BAD_INPUT; goto out; }
        snprintf(label, sizeof label, "%s %s", sh, qn);
        snprintf(lbuf, sizeof lbuf, "%s", lens_s);
        for (ls = strtok_r(lbuf, ",", &lsave); ls; ls = strtok_r(NULL, ",", &lsave)) {
            if (!cli_parse_u64(ls, &v) || v < 1 || v > (1u << 20)) {
                fprintf(stderr, "amk bench: bad --prefill length '%s'\n", ls);
                rc = CLI_BAD_INPUT;
                goto out;
            }
            if ((int)v > longest) longest = (int)v;
        }
        cli_bench_opts(&o, image, image_size, longest, qn, &cfg, &quant);
        o.prefill_rows = rows;
        o.progress = cli_chunks_progress;
        o.progress_user = &chunks;
        tok = (int *)malloc((size_t)longest * sizeof(int));
        if (!tok) { rc = CLI_FAIL; goto out; }
        for (j = 0; j < longest; j++) tok[j] = (int)(((uint64_t)j * 7919u + 13u) % (uint64_t)cfg.vocab);
        if (amk_llm_open_random(&cfg, &o, &m, &d) != AMK_OK) {
            fprintf(stderr, "amk bench: %s prefill: %s\n", label, d.message);
            free(tok);
            rc = CLI_FAIL;
            continue;
        }
        if (amk_llm_note(m)[0]) fprintf(stderr, "amk bench: %s prefill: note: %s\n", label, amk_llm_note(m));
        snprintf(lbuf, sizeof lbuf, "%s", lens_s);
        for (ls = strtok_r(lbuf, ",", &lsave); ls; ls = strtok_r(NULL, ",", &lsave)) {
            const int n = atoi(ls);
            double t[64], med, warm = 0.0;
            int it, k, runs = iters < 64 ? iters : 64;
            char one[32] = "";
            memset(&chunks, 0, sizeof chunks);
            for (it = -1; it < runs; it++) {
                double t0;
                if (amk_llm_reset(m, &d) != AMK_OK) break;
                if (it == 0) { /* the warm-up's chunks: every run's */
                    cli_chunks_flush(&chunks);
                    chunks.frozen = 1;
                }
                t0 = cli_now();
                if (amk_llm_prefill(m, tok, n, 0, NULL, NULL, &d) != AMK_OK) break;
                if (it >= 0) t[it] = cli_now() - t0;
                else warm = cli_now() - t0;
            }
            if (it < runs) {
                fprintf(stderr, "amk bench: %s prefill %d: %s\n", label, n, d.message);
                rc = CLI_FAIL;
                continue;
            }
            qsort(t, (size_t)runs, sizeof t[0], cli_cmp_double);
            med = t[runs / 2];
            if (first && amk_llm_reset(m, &d) == AMK_OK) { /* the decode step a token at a time: one run */
                const double t0 = cli_now();
                for (k = 0; k < n && amk_llm_step(m, tok[k], k, NULL, NULL, &d) == AMK_OK; k++) {}
                if (k == n) snprintf(one, sizeof one, "%.1f", (cli_now() - t0) * 1e3);
            }
            if (n_tab == cap_tab) {
                void *grown = realloc(tab, (size_t)(cap_tab = cap_tab ? 2 * cap_tab : 16) * sizeof *tab);
                if (!grown) { free(tok); amk_llm_close(m); rc = CLI_FAIL; goto out; }
                tab = (cli_prefill_row *)grown;
            }
            snprintf(tab[n_tab].head, sizeof tab[n_tab].head, "| %s | %d | %s | %.2f | %.0f | %.1f |", label, n, chunks.text,
                     med * 1e3, n / med, cli_prompt_flops(&cfg, n) / med / 1e12);
            snprintf(tab[n_tab].one, sizeof tab[n_tab].one, "%s", one);
            tab[n_tab++].tflops = cli_prompt_flops(&cfg, n) / med / 1e12;
            fprintf(stderr, "amk bench: %s prefill %d: the warm-up run (not in the median) took %.2f ms\n", label, n,
                    warm * 1e3);
            fflush(stdout);
            first = 0;
        }
        if (peak == 0.0 && amk_llm_prefill_cuda(m) && amk_cuda_tensor_peak(amk_llm_prefill_cuda(m), 5, &peak, &d) != AMK_OK)
            fprintf(stderr, "amk bench: tensor-core ceiling: %s\n", d.message);
        if (amk_llm_prefill_cuda(m)) { /* the last chunk's launch again, timed, then its timeline */
            amk_cuda *pc = amk_llm_prefill_cuda(m);
            amk_cuda_info info;
            double cmed = 0.0;
            amk_cuda_get_info(pc, &info);
            if (amk_cuda_time_runs(pc, 1, 5, &cmed, NULL, &d) == AMK_OK) {
                printf("    %s: a chunk of %d rows %.2f ms, %d tasks, %d registers, %lld bytes of shared memory a block, "
                       "device memory of its own %.2f GB (%.2f GB with the step and the other prefill programs)\n", label,
                       amk_llm_prefill_rows(m), cmed / 1e3, amk_llm_prefill_program(m)->n_tasks, info.regs_per_thread,
                       (long long)info.smem_bytes, (double)info.arena_bytes / 1e9, (double)amk_llm_device_bytes(m) / 1e9);
                amk_cuda_set_timing(pc, 1);
                if (amk_cuda_run(pc, 0.0, &d) == AMK_OK) {
                    cli_print_op_times(pc, amk_llm_prefill_program(m), cmed, info.grid);
                    if (trace) {
                        char path[512];
                        snprintf(path, sizeof path, "%s.%s.%s.prefill%d.json", trace, sh, qn, amk_llm_prefill_rows(m));
                        if (cli_write_trace(pc, amk_llm_prefill_program(m), path) == CLI_OK) printf("    trace: %s\n", path);
                    }
                }
                amk_cuda_set_timing(pc, 0);
            }
        }
        amk_llm_close(m);
        free(tok);
      }
    }
out: /* the rows so far, also after an error */
    printf("| shape | prompt tokens | chunks (rows) | ms | tok/s | TFLOP/s | %% of tensor-core ceiling | a token at a time: ms |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (t = 0; t < n_tab; t++) {
        if (peak > 0.0) printf("%s %.1f%% | %s |\n", tab[t].head, 100.0 * tab[t].tflops / peak, tab[t].one);
        else printf("%s - | %s |\n", tab[t].head, tab[t].one);
    }
    if (peak > 0.0)
        printf("tensor-core ceiling (same run): %.0f TFLOP/s (bf16 m64n128k16 MMAs back to back on every SM, the prompt "
               "GEMM's shape)\n", peak);
    free(tab);
    return rc;
}

static int cmd_bench(const cli_cmd *cmd, int argc, char **argv) {
    const char *shapes_s = NULL, *ctx_s = NULL, *iters_s = NULL, *trace = NULL, *splits_s = NULL, *pos_s = NULL;
    const char *chain_s = NULL, *fold_s = NULL, *quant_s = NULL, *prefill_s = NULL, *rows_s = NULL, *x8_s = NULL;
    char shapes[256], ctxs[128], quants[128], *save = NULL, *sh;
    uint64_t v;
    int iters = 50, i, rc = CLI_OK, splits = 0, pos_opt = -1, chain = 1, fold = -1, x8 = 1;
    size_t image_size = 0;
    const void *image = cli_image(&image_size);
    double read_gbs = 0.0, copy_gbs = 0.0;
    for (i = 1; i < argc; i++) {
        const char **slot = strcmp(argv[i], "--shapes") == 0 ? &shapes_s : strcmp(argv[i], "--ctx") == 0 ? &ctx_s
                          : strcmp(argv[i], "--iters") == 0 ? &iters_s : strcmp(argv[i], "--trace") == 0 ? &trace
                          : strcmp(argv[i], "--kv-splits") == 0 ? &splits_s : strcmp(argv[i], "--pos") == 0 ? &pos_s
                          : strcmp(argv[i], "--chain") == 0 ? &chain_s : strcmp(argv[i], "--qkv-fold") == 0 ? &fold_s
                          : strcmp(argv[i], "--quant") == 0 ? &quant_s : strcmp(argv[i], "--prefill") == 0 ? &prefill_s
                          : strcmp(argv[i], "--prefill-rows") == 0 ? &rows_s : strcmp(argv[i], "--x-q8") == 0 ? &x8_s : NULL;
        if (!slot) return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
        if (!cli_take_value(cmd, argc, argv, &i, slot)) return CLI_BAD_INPUT;
    }
    if (pos_s) { if (!cli_parse_u64(pos_s, &v) || v > (1u << 20)) return cli_usage_error(cmd, "bad --pos '%s'", pos_s); pos_opt = (int)v; }
    if (iters_s) { if (!cli_parse_u64(iters_s, &v) || v < 1 || v > 100000) return cli_usage_error(cmd, "bad --iters '%s'", iters_s); iters = (int)v; }
    if (chain_s && !cli_parse_chain(cmd, chain_s, &chain)) return CLI_BAD_INPUT;
    if (splits_s && (rc = cli_parse_splits(cmd, splits_s, &splits)) != CLI_OK) return rc;
    if (fold_s && (rc = cli_parse_fold(cmd, fold_s, &fold)) != CLI_OK) return rc;
    if (x8_s && (rc = cli_parse_x_q8(cmd, x8_s, &x8)) != CLI_OK) return rc;
    snprintf(shapes, sizeof shapes, "%s", shapes_s ? shapes_s : "llama3-8b,llama3.2-1b,smollm2-135m");
    snprintf(ctxs, sizeof ctxs, "%s", ctx_s ? ctx_s : "128,4096");
    snprintf(quants, sizeof quants, "%s", quant_s ? quant_s : "BF16");
    { /* every recipe known before anything runs */
        char qb[128], *qsave = NULL, *qn;
        snprintf(qb, sizeof qb, "%s", quants);
        for (qn = strtok_r(qb, ",", &qsave); qn; qn = strtok_r(NULL, ",", &qsave)) {
            size_t k;
            int known = strcmp(qn, "BF16") == 0 || strcmp(qn, "F16") == 0;
            for (k = 0; k < sizeof cli_quants / sizeof cli_quants[0]; k++) known |= strcmp(qn, cli_quants[k].name) == 0;
            if (!known)
                return cli_usage_error(cmd, "bad --quant '%s' (BF16, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K_M, Q5_K_M or Q6_K)", qn);
        }
    }
    if (!image) { fprintf(stderr, "amk bench: this amk was built without the device image (needs nvcc)\n"); return CLI_FAIL; }
    if (prefill_s) {
        int rows = 0;
        if (rows_s && (rc = cli_parse_prefill_rows(cmd, rows_s, &rows)) != CLI_OK) return rc;
        return cli_bench_prefill(shapes, quants, prefill_s, rows, iters_s ? iters : 5, trace, image, image_size);
    }
    printf("| shape | ctx | ms/token | weight GB | GB/s | %% of read ceiling | tasks |\n|---|---|---|---|---|---|---|\n");
    for (sh = strtok_r(shapes, ",", &save); sh; sh = strtok_r(NULL, ",", &save)) {
      char qbuf[128], *qsave = NULL, *qn;
      snprintf(qbuf, sizeof qbuf, "%s", quants);
      for (qn = strtok_r(qbuf, ",", &qsave); qn; qn = strtok_r(NULL, ",", &qsave)) {
        char ctxbuf[128], *save2 = NULL, *cs, label[96];
        amk_llama_config cfg;
        cli_quant quant;
        if (cli_random_config(sh, &cfg) != CLI_OK) { rc = CLI_BAD_INPUT; break; }
        if (quant_s) snprintf(label, sizeof label, "%s %s", sh, qn);
        else snprintf(label, sizeof label, "%s", sh);
        snprintf(ctxbuf, sizeof ctxbuf, "%s", ctxs);
        for (cs = strtok_r(ctxbuf, ",", &save2); cs; cs = strtok_r(NULL, ",", &save2)) {
            amk_llm_opts o;
            amk_llm *m = NULL;
            amk_diag d;
            double med = 0.0, wgb;
            int ctx, pos;
            char ctxcell[32];
            amk_diag_clear(&d);
            if (!cli_parse_u64(cs, &v) || v < 1 || v > (1u << 20)) { fprintf(stderr, "amk bench: bad context '%s'\n", cs); rc = CLI_BAD_INPUT; continue; }
            ctx = (int)v;
            pos = pos_opt >= 0 ? pos_opt : ctx;
            if (pos > ctx) { fprintf(stderr, "amk bench: --pos %d is past context %d\n", pos, ctx); rc = CLI_BAD_INPUT; continue; }
            if (pos < chain - 1) { fprintf(stderr, "amk bench: --chain %d needs a position of at least %d\n", chain, chain - 1); rc = CLI_BAD_INPUT; continue; }
            /* ctx tokens cached, the step decodes the next one */
            cli_bench_opts(&o, image, image_size, ctx + 1, qn, &cfg, &quant);
            o.build.kv_splits = splits;
            o.build.qkv_fold = fold;
            o.build.x_q8 = x8;
            if (amk_llm_open_random(&cfg, &o, &m, &d) != AMK_OK) {
                fprintf(stderr, "amk bench: %s ctx %d: %s\n", label, ctx, d.message);
                rc = CLI_FAIL;
                continue;
            }
            if (amk_llm_note(m)[0]) fprintf(stderr, "amk bench: %s ctx %d: note: %s\n", label, ctx, amk_llm_note(m));
            if (read_gbs == 0.0 && amk_cuda_read_bandwidth(amk_llm_cuda(m), (size_t)1 << 31, 20, &read_gbs, &copy_gbs, &d) != AMK_OK) {
                fprintf(stderr, "amk bench: read ceiling: %s\n", d.message);
                rc = CLI_FAIL;
            }
            /* one real step at position pos fixes the params (rows 0..pos-1 taken as zeros: amk_llm_seek);
               then time launches of that step */
            if (amk_llm_seek(m, pos, &d) != AMK_OK || amk_llm_step(m, 1, pos, NULL, NULL, &d) != AMK_OK ||
                amk_cuda_time_runs(amk_llm_cuda(m), 5, iters, &med, NULL, &d) != AMK_OK) {
                fprintf(stderr, "amk bench: %s ctx %d: %s\n", label, ctx, d.message);
                rc = CLI_FAIL;
                amk_llm_close(m);
                continue;
            }
            wgb = (double)amk_program_weight_bytes(amk_llm_program(m)) / 1e9;
            if (pos == ctx) snprintf(ctxcell, sizeof ctxcell, "%d", ctx);
            else snprintf(ctxcell, sizeof ctxcell, "%d, pos %d", ctx, pos);
            cli_bench_row(label, ctxcell, "", med, wgb, read_gbs, amk_llm_program(m)->n_tasks);
            if (chain > 1) { /* the same step chained: positions pos - chain + 1 .. pos, a launch's time / chain */
                amk_cuda *cu = amk_llm_cuda(m);
                amk_cuda_chain ch;
                int32_t *toks = (int32_t *)malloc((size_t)chain * sizeof(int32_t));
                double cmed = 0.0;
                ch.token_buf = amk_program_find_buffer(amk_llm_program(m), "token");
                ch.pos_buf = amk_program_find_buffer(amk_llm_program(m), "pos");
                ch.next_buf = amk_program_find_buffer(amk_llm_program(m), "next_token");
                ch.n_steps = chain;
                amk_result cr = toks ? amk_cuda_set_chain(cu, &ch, &d) : AMK_ERR_OUT_OF_MEMORY;
                if (cr == AMK_ERR_UNSUPPORTED) { /* a note, not a failure: the single step's row stands */
                    printf("    (%d chained: not available for this step: %s)\n", chain, d.message);
                } else if (cr != AMK_OK || amk_cuda_run_chain(cu, 1, pos - chain + 1, toks, 0.0, &d) != AMK_OK ||
                    amk_cuda_time_runs(cu, 5, iters, &cmed, NULL, &d) != AMK_OK) {
                    fprintf(stderr, "amk bench: %s ctx %d, chain %d: %s\n", label, ctx, chain, toks ? d.message : "out of memory");
                    rc = CLI_FAIL;
                } else {
                    char how[32];
                    snprintf(how, sizeof how, ", %d chained", chain);
                    cli_bench_row(label, ctxcell, how, cmed / chain, wgb, read_gbs, amk_llm_program(m)->n_tasks);
                }
                amk_cuda_set_chain(cu, NULL, NULL);
                free(toks);
            }
            { /* one timed run with the timeline on: where the time goes */
                amk_cuda_info info;
                amk_cuda_get_info(amk_llm_cuda(m), &info);
                printf("    launch: %d blocks x %d threads, %d registers a thread, %lld bytes of dynamic shared memory a block, "
                       "the %s build; device memory %.2f GB (weights %.2f GB)\n", info.grid, info.threads,
                       info.regs_per_thread, (long long)info.smem_bytes, AMK_IMAGE_KIND_NAME(info.image_kind),
                       (double)info.arena_bytes / 1e9, wgb);
                amk_cuda_set_timing(amk_llm_cuda(m), 1);
                if (amk_llm_step(m, 1, pos, NULL, NULL, &d) == AMK_OK) {
                    cli_print_op_times(amk_llm_cuda(m), amk_llm_program(m), med, info.grid);
                    if (trace) {
                        char path[512];
                        snprintf(path, sizeof path, "%s.%s%s%s.%d.json", trace, sh, quant_s ? "." : "", quant_s ? qn : "", ctx);
                        if (cli_write_trace(amk_llm_cuda(m), amk_llm_program(m), path) == CLI_OK) printf("    trace: %s\n", path);
                    }
                }
                amk_cuda_set_timing(amk_llm_cuda(m), 0);
            }
            fflush(stdout);
            amk_llm_close(m);
        }
      }
    }
    printf("read ceiling (same run): %.0f GB/s streaming read; device copy %.0f GB/s (read + write)\n", read_gbs, copy_gbs);
    return rc;
}

/* ---- the command table ------------------------------------------------------------------------- */

static const cli_cmd cli_cmds[] = {
    {"validate", "check a program; print every issue and a summary",
     "amk validate FILE.json",
     "Loads the program and runs every validation check (deadlock and race freedom, op shapes,\n"
     "params, pages, config). Prints each error and warning on its own line, then\n"
     "\"accepted: N errors, N warnings\" or \"rejected: ...\".\n"
     "Exit: 0 accepted, 1 rejected, 2 unreadable or malformed (FILE:LINE:COL: PATH: message).\n",
     cmd_validate},
    {"fmt", "print a program as canonical JSON",
     "amk fmt FILE.json [-o OUT.json]",
     "Writes the canonical JSON of the program (byte-stable: fmt of fmt output is identical) to\n"
     "stdout, or to OUT.json with -o. Does not validate.\n"
     "Exit: 0 ok, 1 cannot write, 2 unreadable or malformed.\n",
     cmd_fmt},
    {"info", "describe a program: counts, weight bytes, critical path, SMs, pages",
     "amk info FILE.json",
     "Prints one \"key: value\" line each: tasks (per opcode), buffers (per kind), counters,\n"
     "weight_bytes (the WEIGHT and CONST buffers tasks read), weight_bytes_read (what a run reads:\n"
     "those, but of a buffer only EMBED reads a row a task; a tied embedding counts whole, once),\n"
     "weight_dtypes (the WEIGHT buffers a dtype), critical_path, sms_used, pages and scratch_bytes when the program has a page\n"
     "table, and the validation summary.\n"
     "Exit: 0 described (even if rejected), 2 unreadable or malformed.\n",
     cmd_info},
    {"run", "run a program once on the CPU reference VM",
     "amk run FILE.json [--weights W.safetensors] [--inputs I.safetensors] [--kv K.safetensors]\n"
     "               [-o OUT.safetensors] [--random SEED] [--order-seed S] [--expect E.safetensors [--rtol R]]",
     "WEIGHT and CONST buffers are read from --weights by their source name (else their name),\n"
     "IO_INPUT buffers from --inputs and KV_CACHE buffers from --kv by name; dtype and shape must\n"
     "match the buffer exactly (an I4 buffer [..., L] also takes U8 [..., L/2], two values a byte,\n"
     "low nibble first). A KV cache not given starts at zero. A missing weight or input is\n"
     "an error unless --random SEED fills it (floats uniform in [-1, 1), integers in [0, 8) or\n"
     "fewer where they index an EMBED table). --order-seed S fires ready tasks in a seeded random\n"
     "order instead of list order. Every IO_OUTPUT and KV_CACHE buffer is written by name to\n"
     "OUT.safetensors (-o; feed it back with --kv for the next step), or summarised on stdout.\n"
     "--expect E.safetensors compares every tensor of E with the output or KV cache of its name:\n"
     "each must be within R (--rtol) of its largest value, max |got - want| <= R * max |want|;\n"
     "default R: 1e-4 for F32, 3e-2 for F16 and BF16, 0.25 for F8, 0 (exact) for integers.\n"
     "Exit: 0 ok, 1 rejected, failed at run time or differing from --expect, 2 bad arguments or\n"
     "input files.\n",
     cmd_run},
    {"build", "build a model's decode step as a program (JSON)",
     "amk build (-m MODEL | --random-weights SHAPE) [-o STEP.json] [--ctx N] [--dtype F32|BF16|F16]\n"
     "          [--act-dtype F32|BF16|F16] [--sms N] [--kv-splits N] [--spec-ops] [--mlp-steps 1|2]\n"
     "          [--attn-steps 1|2] [--qkv-fold 0|1] [--x-q8 0|1]\n"
     "          [--prefill M]",
     "Builds the Llama decode step of MODEL (a .gguf, a .safetensors with config.json, or a model\n"
     "directory) or of SHAPE (llama3-8b, llama3.2-1b, smollm2-135m, or a config.json), lowers it\n"
     "onto --sms SMs (default 132, an H100), validates it and writes its JSON to STEP.json or stdout.\n"
     "--ctx sets the KV cache rows (default min(model context, 4096)); --kv-splits the attention\n"
     "tiles along the KV length (1..8, or a multiple of 8 up to 64; default 0: one split up to 512\n"
     "rows, beyond that a task a kv head a split on each SM, splits of at least 128 rows).\n"
     "Weights: a MODEL's matrices stored in a GGUF block format (Q8_0, Q4_1, Q4_K, ...) stay in it,\n"
     "read as stored, where the step reads them row-major (a block down_proj or o_proj makes the\n"
     "default MLP or attention two steps); the other matrices are F32, and the activations and KV\n"
     "cache F32. --dtype F32|BF16|F16 converts every matrix to that dtype and runs the activations\n"
     "and KV cache in it too (the prompt's tensor-core paths take 16-bit ones). --act-dtype D runs\n"
     "the activations and KV cache in D and converts the matrices outside a block format to D,\n"
     "the block formats staying as stored: a prefill chunk then dequantizes each layer's block\n"
     "matrices into 16-bit copies for its tensor-core tiles (COPY tasks). The summary on\n"
     "stderr gives the weight bytes a token reads and the weight buffers a dtype.\n"
     "The step uses AMK's opcodes (20..35); --spec-ops builds it from the spec's opcodes\n"
     "0..18 only (a program any implementation of the spec runs; more dependent steps).\n"
     "--mlp-steps 1 builds each layer's MLP as one step (RMSNORM_MLP tiles adding into an F32\n"
     "residual), 2 as two (gate/up tiles, then down tiles); default: one where a tile's rows of\n"
     "down_proj fit in shared memory (SmolLM2-sized models), else two.\n"
     "--attn-steps 1 builds each layer's attention and O projection as one step (ATTENTION_O\n"
     "tasks, each recomputing a kv head's attention and adding a few rows of O into an F32 sum;\n"
     "one KV split only), 2 as two; default: one with the one-step MLP at one KV split where a\n"
     "task's rows of o_proj fit in shared memory, else two.\n"
     "--qkv-fold 1 folds each layer's Q/K/V projections into the MLP tiles of the layer before\n"
     "(with the one-step attention and MLP: two dependent steps a layer after the first; the\n"
     "loader derives a weight a layer, [ffn + hidden, q + 2 kv rows]), 0 does not; default: AMK's\n"
     "choice (AMK_LLAMA_QKV_FOLD 1: BF16 weights with the one-step attention and the SM sets).\n"
     "Where the step cannot fold, 1 builds it unfolded.\n"
     "--x-q8 1 (default): a tile whose matrices are in Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or\n"
     "Q6_K with rows of a multiple of 2048 rounds its x to 8 bits a 32-element unit (as llama.cpp's\n"
     "q8_1), which the GPU multiplies by integer dots; 0 keeps x in F32 everywhere.\n"
     "--prefill M builds the prefill program of a chunk of M prompt tokens instead (inputs token\n"
     "[M], pos [M] and last [1]: K and V of every row into the caches, ATTENTION_PREFILL, the\n"
     "logits of row last); AMK's opcodes only. amk generate runs one beside the decode step\n"
     "(--prefill-rows).\n"
     "Exit: 0 ok, 1 build or lowering failed, 2 bad arguments or model file.\n",
     cmd_build},
    {"generate", "generate text with a model",
     "amk generate (-m MODEL -p PROMPT | --random-weights SHAPE) [-n N] [--chat] [--system S]\n"
     "             [--temp T] [--top-k K] [--top-p P] [--seed S] [--ctx N] [--dtype D] [--act-dtype D]\n"
     "             [--cpu] [-q]\n"
     "             [--trace FILE.json] [--timeout MS] [--chain N] [--spec-ops] [--mlp-steps 1|2]\n"
     "             [--attn-steps 1|2] [--qkv-fold 0|1] [--x-q8 0|1] [--prefill-rows M|off]",
     "Loads MODEL, builds its decode step and a prefill program, runs the prompt in chunks through\n"
     "the prefill program, then\n"
     "generates up to N tokens (default 64; -n 0: the prompt alone), streaming the text, stopping\n"
     "at the end-of-sequence token. An empty prompt starts from the BOS token. Greedy by default;\n"
     "--temp T > 0 samples (with --top-k, --top-p, --seed). --chat wraps the prompt in the model's\n"
     "chat format (ChatML, Llama 3, Mistral or Llama 2, from its template or vocabulary; --system,\n"
     "only with --chat, replaces the template's default system prompt).\n"
     "Prints load time and prompt and decode tokens per second to stderr at the end.\n"
     "--random-weights SHAPE runs a shape with random weights and prints token ids. --ctx N sets\n"
     "the KV cache rows (at most the model's context); without it they fit the prompt plus N (up\n"
     "to min(model context, 4096)), so a short generation runs the smaller step. A prompt plus N\n"
     "longer than the context is an error, and so is a KV cache larger than the machine's memory\n"
     "on the reference VM. Runs on the GPU when there is one (and this amk holds the device\n"
     "image), else on the reference VM; --cpu forces the reference VM. Quantized matrices run as\n"
     "stored. The other matrices, the activations and the KV cache are BF16 on the GPU (the\n"
     "prompt on the tensor cores; a quantized model's chunks dequantize each layer for them) and\n"
     "F32 on the reference VM. --dtype D (F32, BF16, F16) converts every matrix and runs the\n"
     "activations in D, as for build; --act-dtype D keeps the quantized matrices stored and runs\n"
     "the rest in D (--act-dtype F32: the GPU's exact path); the first line on\n"
     "stderr gives the weight bytes a token reads and the weight buffers a dtype.\n"
     "--trace FILE.json writes the per-SM instruction timeline of one step (Chrome trace JSON;\n"
     "open it in Perfetto). --timeout MS is the GPU step watchdog (default 10000); --spec-ops,\n"
     "--mlp-steps, --attn-steps, --qkv-fold and --x-q8 as for build; on the GPU, --qkv-fold 1 where its\n"
     "forms do not take the folded step (past 256 cached rows, F32 weights) builds it unfolded,\n"
     "with a note.\n"
     "--chain N: greedy decoding on the GPU runs N steps a launch, the device feeding each token\n"
     "to the next step (default 16; 1: a launch a token).\n"
     "--prefill-rows M: the prompt runs in chunks of M tokens (a launch a chunk on the GPU, a run on\n"
     "the reference VM) through a prefill program that shares the decode step's weights and KV\n"
     "caches (default 2048 on the GPU, 32 on the reference VM, at most the context), beside smaller\n"
     "programs of M/4 and M/16 rows (those of 8 rows or more) for shorter prompts and a prompt's end\n"
     "(a padded chunk where the tokens fill 3/4 of the longest, half of the next, a quarter of the\n"
     "shortest; less than that goes a step a token); off: a token at a time through the decode step.\n"
     "Qwen2, Qwen3, --spec-ops and random weights on the reference VM run the prompt a token at a\n"
     "time.\n"
     "Exit: 0 ok, 1 failed at run time, 2 bad arguments or model file.\n",
     cmd_generate},
    {"bench", "time the decode step on the GPU against the read-bandwidth ceiling",
     "amk bench [--shapes A,B,...] [--ctx N,M,...] [--pos N] [--iters N] [--kv-splits N] [--chain N]\n"
     "          [--qkv-fold 0|1] [--x-q8 0|1] [--quant Q,...] [--trace PREFIX]\n"
     "amk bench [--shapes A,B,...] [--quant Q,...] --prefill N,M,... [--prefill-rows M] [--iters N]\n"
     "          [--trace PREFIX]",
     "For each shape (default llama3-8b,llama3.2-1b,smollm2-135m; random bf16 weights made on the\n"
     "GPU) and context (default 128,4096): builds, lowers and loads the decode step, runs one step\n"
     "at position ctx (--pos N: at N, the cache still ctx + 1 rows; N <= ctx), then times --iters\n"
     "launches of it (median, CUDA events). Prints ms/token, weight bytes, achieved bandwidth and\n"
     "its share of the streaming-read ceiling measured by a read kernel in the same run, then the\n"
     "launch (blocks, threads, registers, shared memory, the build, the device memory and its\n"
     "weights) and the per-opcode time from one timed run's timeline.\n"
     "--chain N adds a row for the same step run N steps a launch (amk generate's greedy decoding:\n"
     "the device feeds each token to the next step), positions pos - N + 1 .. pos: a launch's\n"
     "median time / N.\n"
     "--kv-splits N as for build (AMK's choice: one split up to 512 rows, else a task a kv head a split\n"
     "on each SM).\n"
     "--qkv-fold as for build (its folded weight random too: for timing only; unfolded, with a\n"
     "note, where the GPU's forms do not take the folded step). --x-q8 as for build.\n"
     "--quant Q,... runs each shape with its random weights in each quantization as llama.cpp\n"
     "quantizes a Llama model (the matrices' type, Q6_K or Q8_0 for the output and attn_v/ffn_down\n"
     "in some layers, its fallbacks where a block does not divide a row): BF16 (the default), Q8_0,\n"
     "Q4_0, Q4_1, Q5_0, Q4_K_M, Q5_K_M, Q6_K; random bytes a block with scales set (timing weights).\n"
     "F16 runs F16 weights and activations (BF16: both BF16; a recipe: BF16 activations).\n"
     "--trace PREFIX writes each timeline as Chrome trace JSON (PREFIX.SHAPE[.Q].CTX.json; Perfetto;\n"
     "with --prefill the relaunched chunk's, PREFIX.SHAPE.Q.prefillROWS.json).\n"
     "--prefill N,M,... times prompts instead: for each shape and --quant, a prompt of each length\n"
     "through amk_llm_prefill in chunks of --prefill-rows (default 2048, programs of 512 and 128\n"
     "beside it, as amk generate), the median of --iters (default 5) after a warm-up: the chunks it\n"
     "ran (\"512 x 2 + 128\"), ms, tok/s, TFLOP/s and their share of the tensor cores' rate measured\n"
     "in the same run (amk_cuda_tensor_peak), and on the first length the same prompt a\n"
     "token at a time; then the longest program's chunk launched again, its per-opcode time and its\n"
     "device memory. The activations are BF16 (F16 with --quant F16); a quantization's block\n"
     "matrices are dequantized a layer at a time for the tensor cores (as amk generate on the GPU).\n"
     "Needs a GPU and an amk built with the device image.\n",
     cmd_bench},
};
#define CLI_N_CMDS ((int)(sizeof cli_cmds / sizeof cli_cmds[0]))

static void cli_print_help(const cli_cmd *c) {
    printf("usage: %s\n\n%s", c->synopsis, c->details);
}

static void cli_print_main_usage(FILE *f) {
    int i;
    fprintf(f, "amk %s - AMK megakernel programs: check, format, describe, run\n\n"
               "usage: amk COMMAND [ARGS]   (amk COMMAND --help for details)\n\ncommands:\n",
            AMK_VERSION_STRING);
    for (i = 0; i < CLI_N_CMDS; i++) fprintf(f, "  %-10s %s\n", cli_cmds[i].name, cli_cmds[i].summary);
    fprintf(f, "\nexit codes: 0 ok, 1 rejected or failed, 2 bad usage or input\n");
}

static int cli_is_help(const char *s) { return strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0; }

int main(int argc, char **argv) {
    int i, j;
    if (argc < 2) { cli_print_main_usage(stderr); return CLI_BAD_INPUT; }
    if (cli_is_help(argv[1]) || strcmp(argv[1], "help") == 0) {
        if (argc > 2)
            for (i = 0; i < CLI_N_CMDS; i++)
                if (strcmp(argv[2], cli_cmds[i].name) == 0) { cli_print_help(&cli_cmds[i]); return CLI_OK; }
        cli_print_main_usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0) { printf("amk %s\n", AMK_VERSION_STRING); return CLI_OK; }
    for (i = 0; i < CLI_N_CMDS; i++) {
        if (strcmp(argv[1], cli_cmds[i].name) != 0) continue;
        for (j = 2; j < argc; j++)
            if (cli_is_help(argv[j])) { cli_print_help(&cli_cmds[i]); return CLI_OK; }
        return cli_cmds[i].run(&cli_cmds[i], argc - 1, argv + 1);
    }
    fprintf(stderr, "amk: unknown command '%s'\n\n", argv[1]);
    cli_print_main_usage(stderr);
    return CLI_BAD_INPUT;
}

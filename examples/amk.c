/* amk - the AMK command-line tool: check, format, describe and run megakernel programs.

     amk validate FILE.json      every validation issue, then "accepted: ..." / "rejected: ..."
     amk fmt FILE.json [-o OUT]  the canonical JSON of a program
     amk info FILE.json          counts, weight bytes, critical path, SMs, pages, validation
     amk run FILE.json [...]     one forward pass on the reference VM (safetensors in and out)

   Results go to stdout, diagnostics to stderr. Exit codes, the same for every subcommand:
   0 success, 1 rejected by validation or failed at run time, 2 bad usage or an unreadable or
   malformed input file. A new subcommand is one function and one row of cli_cmds[].

   Build: cc -std=c99 -O2 -o amk examples/amk.c -lm (the Makefile builds it as build/amk). The
   tool holds the library's implementation, so it also uses a few of its internal helpers
   (file reading, dtype load/store, the seeded RNG) instead of copies of them. */
#define AMK_IMPLEMENTATION
#include "../amk.h"
#include <stdio.h>

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

/* Reads and loads a program; on failure prints "FILE:LINE:COL: PATH: message" (or the I/O error)
   to stderr and returns NULL. */
static amk_program *cli_load(const char *path) {
    char *text = NULL;
    size_t len = 0;
    amk_program *p = NULL;
    amk_diag d;
    amk_diag_clear(&d);
    if (amk__read_file(path, &text, &len, &d) != AMK_OK) {
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
    amk__free(text);
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
        if (amk__write_file(out, text, len, &d) != AMK_OK) {
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
    sms = (int *)amk__malloc((size_t)p->n_tasks * sizeof(int));
    if (!sms) return -1;
    for (i = 0; i < p->n_tasks; i++)
        if (p->tasks[i].sm >= 0) sms[n++] = p->tasks[i].sm;
    qsort(sms, (size_t)n, sizeof(int), cli_int_cmp);
    for (i = 0; i < n; i++)
        if (i == 0 || sms[i] != sms[i - 1]) used++;
    amk__free(sms);
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
            ok = ok && amk__add_i64(total, pg->nbytes, &total) &&
                 (on ? amk__add_i64(onchip, pg->nbytes, &onchip) : amk__add_i64(scratch, pg->nbytes, &scratch));
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
    const char *program, *weights, *inputs, *kv, *out, *random, *order_seed;
    uint64_t random_seed, order;
    amk_safetensors w, in, kvst; /* zeroed when not given */
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

/* 1 if t holds exactly buffer b's dtype and shape; else prints the mismatch and returns 0. */
static int cli_tensor_fits(const amk_st_tensor *t, const amk_buffer *b, const char *key) {
    char have[192], want[192];
    int i, same = t->dtype == b->dtype && t->rank == b->rank;
    for (i = 0; same && i < b->rank; i++) same = t->shape[i] == b->shape[i];
    if (same) return 1;
    amk__st_fmt_shape(have, sizeof have, t->shape, t->rank);
    amk__st_fmt_shape(want, sizeof want, b->shape, b->rank);
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
    amk__rng rng;
    if (!mem || n < 0 || (int64_t)nbytes != amk__buffer_nbytes(b)) return 0;
    amk__rng_seed(&rng, seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(id + 1)));
    if (amk_dtype_is_float(b->dtype)) {
        for (i = 0; i < n; i++) amk__store_f32(mem, b->dtype, i, amk__rng_sym(&rng));
    } else {
        uint64_t bound = cli_int_bound(p, id);
        for (i = 0; i < n; i++) amk__store_i64(mem, b->dtype, i, (int64_t)amk__rng_below(&rng, bound));
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

/* "name: F32 [1, 16] = v0 v1 ... (+n more)" for one output. */
static void cli_print_summary(const amk_buffer *b, const void *mem) {
    char shape[192];
    int64_t n = amk_buffer_numel(b), i, shown = n < 8 ? n : 8; /* why: 8 values fit a line */
    amk__st_fmt_shape(shape, sizeof shape, b->shape, b->rank);
    printf("%s: %s %s =", b->name, amk_dtype_name(b->dtype), shape);
    for (i = 0; i < shown; i++) {
        if (amk_dtype_is_float(b->dtype)) printf(" %.6g", (double)amk__load_f32(mem, b->dtype, i));
        else printf(" %lld", (long long)amk__load_i64(mem, b->dtype, i));
    }
    if (n > shown) printf(" ... (%lld values)", (long long)n);
    if (n == 0) printf(" (empty)");
    printf("\n");
}

/* Writes (or prints) every IO_OUTPUT and KV_CACHE buffer. */
static int cli_emit_outputs(const cli_run *a, const amk_program *p, amk_refvm *vm) {
    amk_st_entry *e;
    int id, n = 0, rc = CLI_OK;
    e = (amk_st_entry *)amk__calloc((size_t)(p->n_buffers ? p->n_buffers : 1), sizeof(amk_st_entry));
    if (!e) { fprintf(stderr, "amk run: out of memory\n"); return CLI_FAIL; }
    for (id = 0; id < p->n_buffers; id++) {
        const amk_buffer *b = &p->buffers[id];
        size_t nbytes = 0;
        const void *mem;
        if (b->kind != AMK_KIND_IO_OUTPUT && b->kind != AMK_KIND_KV_CACHE) continue;
        mem = amk_refvm_buffer(vm, id, &nbytes);
        if (!mem || (int64_t)nbytes != amk__buffer_nbytes(b)) {
            fprintf(stderr, "amk run: the VM has no storage for output '%s' (buffer %d)\n", b->name, id);
            rc = CLI_FAIL;
            continue;
        }
        if (!a->out) { cli_print_summary(b, mem); continue; }
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
    amk__free(e);
    return rc;
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

    if (!(p = cli_load(a.program))) return CLI_BAD_INPUT;
    if (!cli_open_st(a.weights, &a.w) || !cli_open_st(a.inputs, &a.in) || !cli_open_st(a.kv, &a.kvst))
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
done:
    amk_refvm_free(vm); /* before the files: bound weights point into their maps */
    amk_safetensors_close(&a.w);
    amk_safetensors_close(&a.in);
    amk_safetensors_close(&a.kvst);
    amk_program_free(p);
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
     "weight_bytes, critical_path, sms_used, pages and scratch_bytes when the program has a page\n"
     "table, and the validation summary.\n"
     "Exit: 0 described (even if rejected), 2 unreadable or malformed.\n",
     cmd_info},
    {"run", "run a program once on the CPU reference VM",
     "amk run FILE.json [--weights W.safetensors] [--inputs I.safetensors] [--kv K.safetensors]\n"
     "               [-o OUT.safetensors] [--random SEED] [--order-seed S]",
     "WEIGHT and CONST buffers are read from --weights by their source name (else their name),\n"
     "IO_INPUT buffers from --inputs and KV_CACHE buffers from --kv by name; dtype and shape must\n"
     "match the buffer exactly. A KV cache not given starts at zero. A missing weight or input is\n"
     "an error unless --random SEED fills it (floats uniform in [-1, 1), integers in [0, 8) or\n"
     "fewer where they index an EMBED table). --order-seed S fires ready tasks in a seeded random\n"
     "order instead of list order. Every IO_OUTPUT and KV_CACHE buffer is written by name to\n"
     "OUT.safetensors (-o; feed it back with --kv for the next step), or summarised on stdout.\n"
     "Exit: 0 ok, 1 rejected or failed at run time, 2 bad arguments or input files.\n",
     cmd_run},
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

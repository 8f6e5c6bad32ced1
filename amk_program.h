/* amk_program.h - AMK's IR layer, part 1: programs. Part of AMK (amk.h has the library's manual).

   WHAT IT DOES
     The program data model of IR_SPEC.md §1 (buffers, counters, tasks with params, target,
     ScheduleConfig, pages), building programs in code (amk_program_add_*), the op registry made
     from the op table (amk_ir.h AMK_OPS: names, arity, required params, write semantics), and
     the program file of spec §6: a strict reader (every error with JSON line:col and a path like
     /tasks/17/waits/0) and a canonical, byte-stable writer.
   WHAT IT DOES NOT DO
     Judge a program (amk_validate.h) or run one (amk_refvm.h, amk_cuda.h).
   CONTENTS
     declarations >>ir >>json | implementation >>impl_program (and "program JSON" below it) */
#ifndef AMK_PROGRAM_H
#define AMK_PROGRAM_H

#include "amk_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== >>ir: the program data model (spec §1) ================================================== */

AMK_API const char *amk_op_name(int op);
AMK_API int amk_op_from_name(const char *name);
/* The opcode the device runs op as (the op table's AS rows: a variant of an op runs as its base
   op's form), with the form's bits (amk_instruction_t.params.flags) into *bits when bits is not
   NULL; op itself and 0 for every other op (an unknown one included). */
AMK_API int amk_op_device(int op, uint32_t *bits);
/* The variant of base whose form bits are exactly bits (amk_op_variant(AMK_OP_RMSNORM_GEMV,
   AMK_GEMV_FLAG_ROPE) is AMK_OP_RMSNORM_GEMV_ROPE); base itself for bits 0; -1 when base has no
   such variant. */
AMK_API int amk_op_variant(int base, uint32_t bits);
/* Param value types. Known keys have a fixed type (AMK_PARAM_FIELDS); unknown keys keep what the
   JSON had and only draw a warning. */
typedef enum amk_param_type {
    AMK_PARAM_INT = 0,  /* i */
    AMK_PARAM_REAL = 1, /* f */
    AMK_PARAM_BOOL = 2, /* b */
    AMK_PARAM_STRING = 3,
    AMK_PARAM_NULL = 4
} amk_param_type;

typedef struct amk_param {
    char *key;
    amk_param_type type;
    int64_t i;  /* INT, BOOL (0/1) */
    double f;   /* REAL */
    char *s;    /* STRING */
} amk_param;

/* The known param keys and their marshalled types ('i' = int32, 'f' = real). X(name, type). */
#define AMK_PARAM_FIELDS(X) \
    X(hidden, 'i') X(K, 'i') X(N_tile, 'i') X(n_off, 'i') X(M_tile, 'i') X(m_off, 'i') \
    X(head_dim, 'i') X(kv_start, 'i') X(kv_len, 'i') X(n_heads, 'i') X(n_kv_heads, 'i') \
    X(qdtype, 'i') X(group, 'i') X(pos, 'i') X(flags, 'i') X(dim, 'i') X(rope_orig_ctx, 'i') X(part, 'i') \
    X(eps, 'f') X(scale, 'f') X(theta, 'f') X(rope_factor, 'f') X(rope_low_freq_factor, 'f') \
    X(rope_high_freq_factor, 'f') X(sliding_window, 'i') X(rope_type, 'i') X(x_q8, 'i') X(k_off, 'i') X(K_tile, 'i')

/* One row of OP_REGISTRY (spec §7): arity and the params that make the op correct. */
typedef struct amk_op_spec {
    const char *name;
    int min_inputs, max_inputs, n_outputs; /* -1 = variadic (still capped by the ABI) */
    const char *required[12];              /* NULL-terminated param keys */
    const char *note;
    int write;                             /* amk_write_kind: how the op writes its outputs */
} amk_op_spec;
/* The registry row for op, or NULL if op is not a defined opcode. */
AMK_API const amk_op_spec *amk_op_spec_get(int op);
/* 1 when op adds into its output number `output` instead of overwriting it (the op table's write
   column: every output of an AMK_WRITE_ACCUM op, the first of an AMK_WRITE_ACCUM_FIRST one). */
AMK_API int amk_op_accumulates(int op, int output);

typedef struct amk_buffer {
    int id;           /* == its index in amk_program.buffers */
    char *name;
    int kind;         /* amk_buffer_kind */
    int dtype;        /* amk_dtype */
    int rank;         /* 0..AMK_MAX_RANK */
    int64_t shape[AMK_MAX_RANK];
    int space;        /* amk_memspace */
    char *source;     /* state-dict key for WEIGHT/CONST, NULL = none */
} amk_buffer;

typedef struct amk_counter {
    int id;           /* == its index in amk_program.counters */
    int64_t init;     /* must be 0 (validate); kept wide so a bad value can be reported */
    char *note;
} amk_counter;

typedef struct amk_wait {
    int counter;
    int64_t threshold; /* wide so out-of-range values reach validate */
} amk_wait;

typedef struct amk_task {
    int id;           /* unique; tasks are kept in list order (the per-SM queue order) */
    int op;           /* amk_opcode, or any other int for an unknown op (validate rejects) */
    char *op_name;    /* the JSON name when op is unknown, else NULL */
    int *inputs;   int n_inputs;   /* buffer ids read */
    int *outputs;  int n_outputs;  /* buffer ids written */
    int out_counter;               /* incremented once on completion */
    amk_wait *waits; int n_waits;
    amk_param *params; int n_params;
    int sm;           /* assigned SM, -1 = unassigned */
    int64_t est_bytes, est_flops;
    char *label;
} amk_task;

/* GpuTarget (spec §5.1): a GPU described as data. */
typedef struct amk_target {
    char name[64];
    int sm_arch, num_sms;
    int64_t smem_bytes_per_sm, smem_bytes_per_block_optin, regs_per_sm;
    int max_threads_per_sm, max_regs_per_thread;
    int64_t l2_bytes, hbm_bytes;
    double hbm_bandwidth_gbs, fp16_tflops, clock_ghz;
    int supports_cooperative, wddm_tdr;
    char note[128];
} amk_target;

/* Fills t with a built-in target ("h100", "h200"); AMK_ERR_NOT_FOUND otherwise. */
AMK_API amk_result amk_target_builtin(const char *name, amk_target *t);

typedef enum amk_sm_assignment {
    AMK_SM_LOAD_BALANCE = 0, /* by est_bytes, greedy least-loaded (spec default) */
    AMK_SM_ROUND_ROBIN = 1,
    AMK_SM_EXPLICIT = 2      /* {task_id: sm} in explicit_task / explicit_sm */
} amk_sm_assignment;

typedef enum amk_page_allocation {
    AMK_PAGES_GRAPH_COLOR = 0, /* reuse a page when live ranges are ordered (spec default) */
    AMK_PAGES_LINEAR = 1,      /* one page per activation */
    AMK_PAGES_NONE = 2         /* no pages */
} amk_page_allocation;

typedef struct amk_tile_param { char *key; int64_t value; } amk_tile_param;
typedef struct amk_tiling { char *archetype; amk_tile_param *items; int n_items; } amk_tiling;
typedef struct amk_fusion_group { char **names; int n_names; } amk_fusion_group;

/* ScheduleConfig (spec §5): the search point a lowering realises. */
typedef struct amk_config {
    amk_tiling *tiling; int n_tiling;
    amk_fusion_group *fusion; int n_fusion;
    amk_sm_assignment sm_assignment;
    int *explicit_task; int *explicit_sm; int n_explicit; /* for AMK_SM_EXPLICIT */
    int pipelining_depth;       /* default 2. The CUDA runtime: 0 = the VM issues no L2 prefetches of
                                   weights; any other value = its fixed scheme (AMK_VM_PREFETCH_BYTES
                                   while an instruction waits, amk_tune.h), not a look-ahead of that
                                   many instructions. The ops' own staging into shared memory is
                                   unaffected */
    amk_page_allocation page_allocation;
    int threads_per_block;      /* default 256 */
    int64_t smem_bytes_per_block; /* default 0 */
} amk_config;

/* Fills c with the spec defaults (owns no memory). */
AMK_API void amk_config_default(amk_config *c);

typedef struct amk_page {
    int id;           /* == its index */
    int space;        /* amk_memspace */
    int64_t nbytes;
    int64_t live_start, live_end; /* positions in task-list order, -1 = unknown */
} amk_page;

/* meta: a JSON object kept as (key, canonical JSON text of the value) pairs, in order. */
typedef struct amk_meta { char *key; char *json; } amk_meta;

typedef struct amk_program {
    amk_meta *meta; int n_meta;
    int has_target;  amk_target target;
    amk_buffer *buffers; int n_buffers;
    amk_counter *counters; int n_counters;
    amk_task *tasks; int n_tasks;
    int has_pages;   amk_page *pages; int n_pages;
    int *buffer_page;           /* [n_buffers] page id or -1; NULL when !has_pages */
    int has_config;  amk_config config;
    amk_result build_error;     /* sticky: first failure of a builder call, AMK_OK if none */
    int cap_buffers, cap_counters, cap_tasks, cap_meta; /* internal growth */
    int id_cache_max, id_cache_n; /* internal: max task id while n_tasks == id_cache_n */
} amk_program;

/* ---- building programs in code. Each add returns the new id (task: its index), or -1 and sets
   p->build_error (bad argument or out of memory). Strings are copied. */
AMK_API amk_program *amk_program_create(void);
AMK_API void amk_program_free(amk_program *p);
AMK_API int amk_program_add_buffer(amk_program *p, const char *name, amk_buffer_kind kind,
                                   amk_dtype dtype, int rank, const int64_t *shape,
                                   amk_memspace space, const char *source);
AMK_API int amk_program_add_counter(amk_program *p, const char *note);
AMK_API int amk_program_add_task(amk_program *p, int op, const int *inputs, int n_inputs,
                                 const int *outputs, int n_outputs, int out_counter,
                                 const char *label);
AMK_API amk_result amk_task_add_wait(amk_program *p, int task, int counter, int64_t threshold);
AMK_API amk_result amk_task_set_int(amk_program *p, int task, const char *key, int64_t v);
AMK_API amk_result amk_task_set_real(amk_program *p, int task, const char *key, double v);
/* The param of a task by key, or NULL. */
AMK_API const amk_param *amk_task_param(const amk_task *t, const char *key);
/* Sets meta[key] to a JSON string value (replacing an existing key). */
AMK_API amk_result amk_program_set_meta_string(amk_program *p, const char *key, const char *v);
/* The string value of meta[key], or NULL if absent or not a string. Points into p. */
AMK_API const char *amk_program_meta_string(const amk_program *p, const char *key, char *buf,
                                            size_t buf_size);
AMK_API amk_result amk_program_set_target(amk_program *p, const amk_target *t);
/* A deep copy of p (NULL on out of memory). */
AMK_API amk_program *amk_program_clone(const amk_program *p);
/* Index of the task with this id, or -1. */
AMK_API int amk_program_task_index(const amk_program *p, int task_id);
/* The index of the buffer named name, or -1. */
AMK_API int amk_program_find_buffer(const amk_program *p, const char *name);
/* Element count of a buffer; -1 on overflow. */
AMK_API int64_t amk_buffer_numel(const amk_buffer *b);
/* Sum of the bytes of the WEIGHT and CONST buffers some task reads (the bandwidth floor's
   numerator; a folded step keeps the Q/K/V weights its W_cat replaces, read by no task); -1 on
   overflow or out of memory. */
AMK_API int64_t amk_program_weight_bytes(const amk_program *p);
/* Marshals a task's params (with defaults filled) into the device POD; flags also holds the
   form bits of a variant's opcode (amk_op_device). */
AMK_API void amk_task_marshal_params(const amk_task *t, amk_params_t *out);
/* Task t's device instruction (amk_instruction_t): ids, waits and params marshalled, a variant
   as its base op's form (amk_op_device); form AMK_FORM_GENERAL and no prefetches (the runtime
   plans those). */
AMK_API void amk_task_instruction(const amk_task *t, amk_instruction_t *out);
/* Buffer b's device descriptor (amk_buffer_t) at device address ptr: strides row-major, in
   elements. */
AMK_API void amk_buffer_descriptor(const amk_buffer *b, uint64_t ptr, amk_buffer_t *out);
/* Task ti's context as the device would see it (amk_vm_ctx_t): its instruction and its buffers'
   descriptors at address 0 (aligned), no tensor maps. What the form planner (amk_plan.h) takes
   before a runtime has placed the buffers: the builder asks it so, and the runtime sizes its
   launch so. An id out of range leaves its descriptor zero. */
AMK_API void amk_task_context(const amk_program *p, int ti, amk_vm_ctx_t *out);

/* ==== >>json: the on-disk format (spec §6) ==================================================== */

/* Parses text (not necessarily NUL-terminated). Strict: a wrong type anywhere, a duplicate or out
   of range id, a major ir_version mismatch is an error with line:col and JSON path in d. Unknown
   fields in target, config and at top level are dropped; elsewhere they are errors. */
AMK_API amk_result amk_program_load_json(const char *text, size_t len, amk_program **out,
                                         amk_diag *d);
AMK_API amk_result amk_program_load_file(const char *path, amk_program **out, amk_diag *d);
/* Canonical JSON (byte-stable: write(read(write(p))) == write(p)). *out is freed with amk_free. */
AMK_API amk_result amk_program_write_json(const amk_program *p, char **out, size_t *out_len);
AMK_API amk_result amk_program_save(const amk_program *p, const char *path, amk_diag *d);


#ifdef __cplusplus
}
#endif
#endif /* AMK_PROGRAM_H */

#if defined(AMK_IMPLEMENTATION) && !defined(AMK_PROGRAM_IMPLEMENTATION_DONE)
#define AMK_PROGRAM_IMPLEMENTATION_DONE
/* ==== >>impl_program: the op registry, targets, building programs in code, the program file ==== */

/* OP_REGISTRY (spec §7), from the op table (amk_ir.h AMK_OPS), in row order. GEMV_TILE/GEMM_TILE
   also take a 4th input (zeros) when qdtype is set: validate handles that form (IR_SPEC_NOTES,
   weight-only quantized GEMV). */
#define AMK__UNPAREN(...) __VA_ARGS__
static const amk_op_spec amk__op_specs[AMK__OP_ROWS] = {
#define AMK__OP_SPEC(name, code, mi, ma, no, req, w, rg, ck, rf, dv, df, go, note) \
    {#name, mi, ma, no, {AMK__UNPAREN req NULL}, note, w},
    AMK_OPS(AMK__OP_SPEC)
#undef AMK__OP_SPEC
};

AMK_API const amk_op_spec *amk_op_spec_get(int op) {
    switch (op) {
#define AMK__OP_SPEC_CASE(name, code, mi, ma, no, req, w, rg, ck, rf, dv, df, go, note) \
    case code: return &amk__op_specs[AMK__OP_ROW_##name];
        AMK_OPS(AMK__OP_SPEC_CASE)
#undef AMK__OP_SPEC_CASE
    default: return NULL;
    }
}

/* How op writes its outputs (the op table's write column); AMK_WRITE_PLAIN for an unknown op. */
AMK__FN amk_write_kind amk__op_write(int op) {
    const amk_op_spec *s = amk_op_spec_get(op);
    return s ? (amk_write_kind)s->write : AMK_WRITE_PLAIN;
}
AMK_API int amk_op_accumulates(int op, int output) {
    const amk_write_kind w = amk__op_write(op);
    return w == AMK_WRITE_ACCUM || (w == AMK_WRITE_ACCUM_FIRST && output == 0);
}

AMK_API const char *amk_op_name(int op) {
    const amk_op_spec *s = amk_op_spec_get(op);
    return s ? s->name : "?";
}
AMK_API int amk_op_from_name(const char *name) {
    if (!name) return -1;
#define AMK__OP_FROM_NAME(name_, code, mi, ma, no, req, w, rg, ck, rf, dv, df, go, note) \
    if (strcmp(name, #name_) == 0) return code;
    AMK_OPS(AMK__OP_FROM_NAME)
#undef AMK__OP_FROM_NAME
    return -1;
}

AMK_API int amk_op_device(int op, uint32_t *bits) {
    int base = op;
    uint32_t b = 0;
    switch (op) {
#define AMK__AS(base_, bits_) base = AMK_OP_##base_; b = (bits_);
#define AMK__OP_AS_1(code, dv)
#define AMK__OP_AS_0(code, dv)
#define AMK__OP_AS_AS(code, dv) case code: dv break;
#define AMK__OP_AS(name, code, mi, ma, no, req, w, rg, ck, rf, dv, df, go, note) AMK__OP_AS_##df(code, dv)
        AMK_OPS(AMK__OP_AS)
#undef AMK__OP_AS
#undef AMK__OP_AS_AS
#undef AMK__OP_AS_0
#undef AMK__OP_AS_1
#undef AMK__AS
    default: break;
    }
    if (bits) *bits = b;
    return base;
}

AMK_API int amk_op_variant(int base, uint32_t bits) {
    uint32_t b;
    int op;
    if (!bits) return base;
    for (op = 0; op < AMK_OP_COUNT; op++)
        if (op != base && amk_op_device(op, &b) == base && b == bits) return op;
    return -1;
}
/* The union of the form bits of base's variants (0: base has none). */
AMK__FN uint32_t amk__op_form_bits(int base) {
    uint32_t b, all = 0;
    int op;
    for (op = 0; op < AMK_OP_COUNT; op++)
        if (op != base && amk_op_device(op, &b) == base) all |= b;
    return all;
}

/* The marshalled type of a known param key ('i' or 'f'), or 0 for an unknown key. */
AMK__FN char amk__param_field_type(const char *key) {
#define AMK__PF(name, ty) if (strcmp(key, #name) == 0) return ty;
    AMK_PARAM_FIELDS(AMK__PF)
#undef AMK__PF
    return 0;
}

/* ---- targets (spec §5.1) ------------------------------------------------------------------------ */

AMK_API amk_result amk_target_builtin(const char *name, amk_target *t) {
    int h200;
    if (!name || !t) return AMK_ERR_INVALID_ARG;
    h200 = strcmp(name, "h200") == 0;
    if (!h200 && strcmp(name, "h100") != 0) return AMK_ERR_NOT_FOUND;
    /* why: SXM datasheet values; the H200 is the same Hopper die with more, faster HBM.
       232448 B is the sm_90 dynamic shared-memory opt-in cap. */
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", h200 ? "h200" : "h100");
    t->sm_arch = 90; t->num_sms = 132;
    t->smem_bytes_per_sm = 233472; t->smem_bytes_per_block_optin = 232448;
    t->regs_per_sm = 65536; t->max_threads_per_sm = 2048; t->max_regs_per_thread = 255;
    t->l2_bytes = 52428800;
    t->hbm_bytes = h200 ? 151397597184LL : 85899345920LL;
    t->hbm_bandwidth_gbs = h200 ? 4800.0 : 3350.0;
    t->fp16_tflops = 989.4; t->clock_ghz = 1.98;
    t->supports_cooperative = 1; t->wddm_tdr = 0;
    snprintf(t->note, sizeof t->note, "datasheet values");
    return AMK_OK;
}

AMK_API void amk_config_default(amk_config *c) {
    memset(c, 0, sizeof *c);
    c->sm_assignment = AMK_SM_LOAD_BALANCE;
    c->pipelining_depth = 2;
    c->page_allocation = AMK_PAGES_GRAPH_COLOR;
    c->threads_per_block = 256;
    c->smem_bytes_per_block = 0;
}

AMK__FN void amk__config_free(amk_config *c) {
    int i, j;
    for (i = 0; i < c->n_tiling; i++) {
        for (j = 0; j < c->tiling[i].n_items; j++) amk__free(c->tiling[i].items[j].key);
        amk__free(c->tiling[i].items);
        amk__free(c->tiling[i].archetype);
    }
    amk__free(c->tiling);
    for (i = 0; i < c->n_fusion; i++) {
        for (j = 0; j < c->fusion[i].n_names; j++) amk__free(c->fusion[i].names[j]);
        amk__free(c->fusion[i].names);
    }
    amk__free(c->fusion);
    amk__free(c->explicit_task);
    amk__free(c->explicit_sm);
    amk_config_default(c);
}

/* Deep copy of a config; 0 on out of memory (dst then holds a partial copy to free). */
AMK__FN int amk__config_copy(amk_config *dst, const amk_config *src) {
    int i, j;
    *dst = *src;
    dst->tiling = NULL; dst->n_tiling = 0;
    dst->fusion = NULL; dst->n_fusion = 0;
    dst->explicit_task = dst->explicit_sm = NULL; dst->n_explicit = 0;
    if (src->n_tiling) {
        dst->tiling = (amk_tiling *)amk__calloc((size_t)src->n_tiling, sizeof(amk_tiling));
        if (!dst->tiling) return 0;
        for (i = 0; i < src->n_tiling; i++) {
            amk_tiling *t = &dst->tiling[i];
            dst->n_tiling = i + 1;
            t->archetype = amk__strdup(src->tiling[i].archetype);
            if (!t->archetype) return 0;
            if (src->tiling[i].n_items) {
                t->items = (amk_tile_param *)amk__calloc((size_t)src->tiling[i].n_items, sizeof(amk_tile_param));
                if (!t->items) return 0;
                for (j = 0; j < src->tiling[i].n_items; j++) {
                    t->n_items = j + 1;
                    t->items[j].value = src->tiling[i].items[j].value;
                    t->items[j].key = amk__strdup(src->tiling[i].items[j].key);
                    if (!t->items[j].key) return 0;
                }
            }
        }
    }
    if (src->n_fusion) {
        dst->fusion = (amk_fusion_group *)amk__calloc((size_t)src->n_fusion, sizeof(amk_fusion_group));
        if (!dst->fusion) return 0;
        for (i = 0; i < src->n_fusion; i++) {
            amk_fusion_group *g = &dst->fusion[i];
            dst->n_fusion = i + 1;
            if (src->fusion[i].n_names) {
                g->names = (char **)amk__calloc((size_t)src->fusion[i].n_names, sizeof(char *));
                if (!g->names) return 0;
                for (j = 0; j < src->fusion[i].n_names; j++) {
                    g->n_names = j + 1;
                    g->names[j] = amk__strdup(src->fusion[i].names[j]);
                    if (!g->names[j]) return 0;
                }
            }
        }
    }
    if (src->n_explicit) {
        dst->explicit_task = (int *)amk__calloc((size_t)src->n_explicit, sizeof(int));
        dst->explicit_sm = (int *)amk__calloc((size_t)src->n_explicit, sizeof(int));
        if (!dst->explicit_task || !dst->explicit_sm) return 0;
        memcpy(dst->explicit_task, src->explicit_task, (size_t)src->n_explicit * sizeof(int));
        memcpy(dst->explicit_sm, src->explicit_sm, (size_t)src->n_explicit * sizeof(int));
        dst->n_explicit = src->n_explicit;
    }
    return 1;
}

/* ---- programs ------------------------------------------------------------------------------------ */

AMK_API amk_program *amk_program_create(void) {
    amk_program *p = (amk_program *)amk__calloc(1, sizeof(amk_program));
    if (p) amk_config_default(&p->config);
    return p;
}

AMK__FN void amk__task_free(amk_task *t) {
    int i;
    amk__free(t->op_name);
    amk__free(t->inputs);
    amk__free(t->outputs);
    amk__free(t->waits);
    for (i = 0; i < t->n_params; i++) {
        amk__free(t->params[i].key);
        amk__free(t->params[i].s);
    }
    amk__free(t->params);
    amk__free(t->label);
    memset(t, 0, sizeof *t);
}

AMK_API void amk_program_free(amk_program *p) {
    int i;
    if (!p) return;
    for (i = 0; i < p->n_meta; i++) { amk__free(p->meta[i].key); amk__free(p->meta[i].json); }
    amk__free(p->meta);
    for (i = 0; i < p->n_buffers; i++) { amk__free(p->buffers[i].name); amk__free(p->buffers[i].source); }
    amk__free(p->buffers);
    for (i = 0; i < p->n_counters; i++) amk__free(p->counters[i].note);
    amk__free(p->counters);
    for (i = 0; i < p->n_tasks; i++) amk__task_free(&p->tasks[i]);
    amk__free(p->tasks);
    amk__free(p->pages);
    amk__free(p->buffer_page);
    amk__config_free(&p->config);
    amk__free(p);
}

AMK__FN int amk__build_fail(amk_program *p, amk_result r) {
    if (p && p->build_error == AMK_OK) p->build_error = r;
    return -1;
}

AMK_API int amk_program_add_buffer(amk_program *p, const char *name, amk_buffer_kind kind,
                                   amk_dtype dtype, int rank, const int64_t *shape,
                                   amk_memspace space, const char *source) {
    amk_buffer *b;
    int i;
    if (!p) return -1;
    if (!name || rank < 0 || rank > AMK_MAX_RANK || (rank && !shape))
        return amk__build_fail(p, AMK_ERR_INVALID_ARG);
    if (!amk__grow((void **)&p->buffers, &p->cap_buffers, p->n_buffers + 1, sizeof(amk_buffer)))
        return amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY);
    b = &p->buffers[p->n_buffers];
    memset(b, 0, sizeof *b);
    b->id = p->n_buffers;
    b->kind = (int)kind;
    b->dtype = (int)dtype;
    b->rank = rank;
    for (i = 0; i < rank; i++) b->shape[i] = shape[i];
    b->space = (int)space;
    b->name = amk__strdup(name);
    b->source = source ? amk__strdup(source) : NULL;
    if (!b->name || (source && !b->source)) {
        amk__free(b->name);
        amk__free(b->source);
        return amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY);
    }
    if (p->has_pages && p->buffer_page) { /* keep the page table sized n_buffers */
        int *np = (int *)amk__realloc(p->buffer_page, (size_t)(p->n_buffers + 1) * sizeof(int));
        if (!np) { amk__free(b->name); amk__free(b->source); return amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY); }
        p->buffer_page = np;
        np[p->n_buffers] = -1;
    }
    return p->n_buffers++;
}

AMK_API int amk_program_add_counter(amk_program *p, const char *note) {
    amk_counter *c;
    if (!p) return -1;
    if (!amk__grow((void **)&p->counters, &p->cap_counters, p->n_counters + 1, sizeof(amk_counter)))
        return amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY);
    c = &p->counters[p->n_counters];
    memset(c, 0, sizeof *c);
    c->id = p->n_counters;
    c->note = amk__strdup(note ? note : "");
    if (!c->note) return amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY);
    return p->n_counters++;
}

AMK__FN int *amk__dup_ints(const int *src, int n) {
    int *r;
    if (n <= 0) return NULL;
    r = (int *)amk__malloc((size_t)n * sizeof(int));
    if (r) memcpy(r, src, (size_t)n * sizeof(int));
    return r;
}

AMK_API int amk_program_add_task(amk_program *p, int op, const int *inputs, int n_inputs,
                                 const int *outputs, int n_outputs, int out_counter,
                                 const char *label) {
    amk_task *t;
    int i, max_id = -1;
    if (!p) return -1;
    if (n_inputs < 0 || n_outputs < 0 || (n_inputs && !inputs) || (n_outputs && !outputs))
        return amk__build_fail(p, AMK_ERR_INVALID_ARG);
    if (!amk__grow((void **)&p->tasks, &p->cap_tasks, p->n_tasks + 1, sizeof(amk_task)))
        return amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY);
    if (p->n_tasks > 0 && p->id_cache_n == p->n_tasks) {
        max_id = p->id_cache_max; /* why: a rescan per add made building 20k tasks quadratic */
    } else {
        for (i = 0; i < p->n_tasks; i++)
            if (p->tasks[i].id > max_id) max_id = p->tasks[i].id;
    }
    t = &p->tasks[p->n_tasks];
    memset(t, 0, sizeof *t);
    t->id = max_id + 1; /* why: unique even after the list was reordered by lowering */
    t->op = op;
    t->inputs = amk__dup_ints(inputs, n_inputs);
    t->outputs = amk__dup_ints(outputs, n_outputs);
    t->n_inputs = n_inputs;
    t->n_outputs = n_outputs;
    t->out_counter = out_counter;
    t->sm = -1;
    t->label = amk__strdup(label ? label : "");
    if ((n_inputs && !t->inputs) || (n_outputs && !t->outputs) || !t->label) {
        amk__task_free(t);
        return amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY);
    }
    p->id_cache_max = t->id;
    p->id_cache_n = ++p->n_tasks;
    return p->n_tasks - 1;
}

AMK_API amk_result amk_task_add_wait(amk_program *p, int task, int counter, int64_t threshold) {
    amk_task *t;
    amk_wait *nw;
    if (!p || task < 0 || task >= p->n_tasks) { amk__build_fail(p, AMK_ERR_INVALID_ARG); return AMK_ERR_INVALID_ARG; }
    t = &p->tasks[task];
    nw = (amk_wait *)amk__realloc(t->waits, (size_t)(t->n_waits + 1) * sizeof(amk_wait));
    if (!nw) { amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY); return AMK_ERR_OUT_OF_MEMORY; }
    t->waits = nw;
    nw[t->n_waits].counter = counter;
    nw[t->n_waits].threshold = threshold;
    t->n_waits++;
    return AMK_OK;
}

/* The param slot for key in t, created if absent; NULL on out of memory. */
AMK__FN amk_param *amk__task_param_slot(amk_task *t, const char *key) {
    int i;
    amk_param *np;
    for (i = 0; i < t->n_params; i++)
        if (strcmp(t->params[i].key, key) == 0) {
            amk__free(t->params[i].s);
            t->params[i].s = NULL;
            return &t->params[i];
        }
    np = (amk_param *)amk__realloc(t->params, (size_t)(t->n_params + 1) * sizeof(amk_param));
    if (!np) return NULL;
    t->params = np;
    memset(&np[t->n_params], 0, sizeof(amk_param));
    np[t->n_params].key = amk__strdup(key);
    if (!np[t->n_params].key) return NULL;
    return &np[t->n_params++];
}

AMK_API amk_result amk_task_set_int(amk_program *p, int task, const char *key, int64_t v) {
    amk_param *s;
    if (!p || !key || task < 0 || task >= p->n_tasks) { amk__build_fail(p, AMK_ERR_INVALID_ARG); return AMK_ERR_INVALID_ARG; }
    s = amk__task_param_slot(&p->tasks[task], key);
    if (!s) { amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY); return AMK_ERR_OUT_OF_MEMORY; }
    s->type = AMK_PARAM_INT;
    s->i = v;
    s->f = (double)v;
    return AMK_OK;
}

AMK_API amk_result amk_task_set_real(amk_program *p, int task, const char *key, double v) {
    amk_param *s;
    if (!p || !key || task < 0 || task >= p->n_tasks) { amk__build_fail(p, AMK_ERR_INVALID_ARG); return AMK_ERR_INVALID_ARG; }
    s = amk__task_param_slot(&p->tasks[task], key);
    if (!s) { amk__build_fail(p, AMK_ERR_OUT_OF_MEMORY); return AMK_ERR_OUT_OF_MEMORY; }
    s->type = AMK_PARAM_REAL;
    s->f = v;
    s->i = 0;
    return AMK_OK;
}

AMK_API const amk_param *amk_task_param(const amk_task *t, const char *key) {
    int i;
    if (!t || !key) return NULL;
    for (i = 0; i < t->n_params; i++)
        if (strcmp(t->params[i].key, key) == 0) return &t->params[i];
    return NULL;
}

AMK_API amk_result amk_program_set_meta_string(amk_program *p, const char *key, const char *v) {
    amk__sb sb;
    int i;
    if (!p || !key || !v) return AMK_ERR_INVALID_ARG;
    memset(&sb, 0, sizeof sb);
    amk__json_put_string(&sb, v, strlen(v));
    if (sb.oom) { amk__sb_free(&sb); return AMK_ERR_OUT_OF_MEMORY; }
    for (i = 0; i < p->n_meta; i++)
        if (strcmp(p->meta[i].key, key) == 0) {
            amk__free(p->meta[i].json);
            p->meta[i].json = sb.p;
            return AMK_OK;
        }
    if (!amk__grow((void **)&p->meta, &p->cap_meta, p->n_meta + 1, sizeof(amk_meta))) {
        amk__sb_free(&sb);
        return AMK_ERR_OUT_OF_MEMORY;
    }
    p->meta[p->n_meta].key = amk__strdup(key);
    if (!p->meta[p->n_meta].key) { amk__sb_free(&sb); return AMK_ERR_OUT_OF_MEMORY; }
    p->meta[p->n_meta].json = sb.p;
    p->n_meta++;
    return AMK_OK;
}

AMK_API const char *amk_program_meta_string(const amk_program *p, const char *key, char *buf,
                                            size_t buf_size) {
    int i;
    amk__jdoc doc;
    const char *r = NULL;
    if (!p || !key || !buf || !buf_size) return NULL;
    for (i = 0; i < p->n_meta; i++) {
        if (strcmp(p->meta[i].key, key) != 0) continue;
        if (amk__json_parse(p->meta[i].json, strlen(p->meta[i].json), 4, &doc, NULL) != AMK_OK) return NULL;
        if (doc.root->type == AMK__J_STRING) {
            snprintf(buf, buf_size, "%s", doc.root->s);
            r = buf;
        }
        amk__json_free(&doc);
        return r;
    }
    return NULL;
}

AMK_API amk_result amk_program_set_target(amk_program *p, const amk_target *t) {
    if (!p || !t) return AMK_ERR_INVALID_ARG;
    p->target = *t;
    p->has_target = 1;
    return AMK_OK;
}

AMK_API int amk_program_find_buffer(const amk_program *p, const char *name) {
    int i;
    if (!p || !name) return -1;
    for (i = 0; i < p->n_buffers; i++)
        if (strcmp(p->buffers[i].name, name) == 0) return i;
    return -1;
}

AMK_API int amk_program_task_index(const amk_program *p, int task_id) {
    int i;
    if (!p) return -1;
    for (i = 0; i < p->n_tasks; i++)
        if (p->tasks[i].id == task_id) return i;
    return -1;
}

AMK_API int64_t amk_buffer_numel(const amk_buffer *b) {
    int64_t n = 1;
    int i;
    if (!b || b->rank < 0 || b->rank > AMK_MAX_RANK) return -1;
    for (i = 0; i < b->rank; i++)
        if (!amk__mul_i64(n, b->shape[i], &n)) return -1;
    return n;
}

/* Bytes of a buffer in its dtype; -1 on overflow or a bad shape. */
AMK__FN int64_t amk__buffer_nbytes(const amk_buffer *b) {
    int64_t n = amk_buffer_numel(b);
    return n < 0 ? -1 : amk_dtype_nbytes(b->dtype, n);
}

AMK_API int64_t amk_program_weight_bytes(const amk_program *p) {
    int64_t total = 0, nb;
    int i, j;
    unsigned char *read; /* [n_buffers] some task reads it */
    if (!p || p->n_buffers <= 0) return 0;
    if (!(read = (unsigned char *)amk__calloc((size_t)p->n_buffers, 1))) return -1;
    for (i = 0; i < p->n_tasks; i++)
        for (j = 0; p->tasks && p->tasks[i].inputs && j < p->tasks[i].n_inputs; j++)
            if (p->tasks[i].inputs[j] >= 0 && p->tasks[i].inputs[j] < p->n_buffers) read[p->tasks[i].inputs[j]] = 1;
    for (i = 0; i < p->n_buffers; i++) {
        const amk_buffer *b = &p->buffers[i];
        if ((b->kind != AMK_KIND_WEIGHT && b->kind != AMK_KIND_CONST) || !read[i]) continue;
        nb = amk__buffer_nbytes(b);
        if (nb < 0 || !amk__add_i64(total, nb, &total)) { total = -1; break; }
    }
    amk__free(read);
    return total;
}

/* Param as int / real with a default (no type checking: validate did that). */
AMK__FN int64_t amk__param_i(const amk_task *t, const char *key, int64_t dflt) {
    const amk_param *pr = amk_task_param(t, key);
    if (!pr) return dflt;
    if (pr->type == AMK_PARAM_INT || pr->type == AMK_PARAM_BOOL) return pr->i;
    if (pr->type == AMK_PARAM_REAL) return (int64_t)pr->f;
    return dflt;
}
AMK__FN double amk__param_f(const amk_task *t, const char *key, double dflt) {
    const amk_param *pr = amk_task_param(t, key);
    if (!pr) return dflt;
    if (pr->type == AMK_PARAM_REAL) return pr->f;
    if (pr->type == AMK_PARAM_INT) return (double)pr->i;
    return dflt;
}

AMK_API void amk_task_marshal_params(const amk_task *t, amk_params_t *o) {
    memset(o, 0, sizeof *o);
#define AMK__MI(name, dflt) o->name = (int32_t)amk__param_i(t, #name, dflt)
#define AMK__MF(name, dflt) o->name = (float)amk__param_f(t, #name, dflt)
    AMK__MI(hidden, 0); AMK__MI(K, 0); AMK__MI(N_tile, 0); AMK__MI(n_off, 0);
    AMK__MI(M_tile, 0); AMK__MI(m_off, 0); AMK__MI(head_dim, 0); AMK__MI(kv_start, 0);
    AMK__MI(kv_len, 0); AMK__MI(n_heads, 0); AMK__MI(n_kv_heads, 0);
    AMK__MI(qdtype, -1);          /* -1: weights are not quantized */
    AMK__MI(group, o->K);         /* IR_SPEC_NOTES: group defaults to K */
    AMK__MI(pos, 0); AMK__MI(flags, 0);
    { /* a variant's form bits (the op table's AS rows) */
        uint32_t form;
        amk_op_device(t->op, &form);
        o->flags = (int32_t)((uint32_t)o->flags | form);
    }
    AMK__MI(dim, -1);             /* SOFTMAX: the last axis */
    AMK__MI(rope_orig_ctx, 0); AMK__MI(part, 0);
    AMK__MF(eps, 0.0); AMK__MF(scale, 1.0); AMK__MF(theta, 10000.0);
    AMK__MF(rope_factor, 0.0);    /* 0: no llama3 RoPE scaling */
    AMK__MF(rope_low_freq_factor, 1.0); AMK__MF(rope_high_freq_factor, 4.0);
    AMK__MI(sliding_window, 0);   /* 0: every row up to the position */
    AMK__MI(rope_type, AMK_ROPE_DEFAULT);
    AMK__MI(x_q8, 0);             /* 0: x stays f32 (AMK_X_Q8) */
    AMK__MI(k_off, 0); AMK__MI(K_tile, 0); /* 0: GEMM_TILE sums all of K */
#undef AMK__MI
#undef AMK__MF
    /* why the ramp here, once: RoPE's device tiles would otherwise pay YaRN's double logs a
       pair, and even unrun that code slowed the unscaled models' steps (bench/RESULTS.md run 354) */
    if (o->rope_type == AMK_ROPE_LINEAR) { /* a ramp every pair is past: each divided by rope_factor */
        o->rope_low_freq_factor = -2.0f;
        o->rope_high_freq_factor = -1.0f;
    } else if (o->rope_type == AMK_ROPE_YARN) { /* HF's range, in double, floored and ceiled */
        const double dim = (double)o->head_dim, lb = 2.0 * log((double)o->theta), two_pi = 6.283185307179586;
        double lo = floor(dim * log((double)o->rope_orig_ctx / ((double)o->rope_high_freq_factor * two_pi)) / lb);
        double hi = ceil(dim * log((double)o->rope_orig_ctx / ((double)o->rope_low_freq_factor * two_pi)) / lb);
        lo = lo > 0.0 ? lo : 0.0;
        hi = hi < dim - 1.0 ? hi : dim - 1.0;
        if (lo == hi) hi += 0.001;
        o->rope_low_freq_factor = (float)lo;
        o->rope_high_freq_factor = (float)hi;
    }
}

AMK_API void amk_task_instruction(const amk_task *t, amk_instruction_t *in) {
    int i;
    memset(in, 0, sizeof *in);
    in->op = amk_op_device(t->op, NULL); /* params.flags gets the form's bits */
    in->sm = t->sm;
    in->out_counter = t->out_counter;
    in->id = t->id;
    in->n_inputs = t->n_inputs;
    in->n_outputs = t->n_outputs;
    in->n_waits = t->n_waits;
    for (i = 0; i < AMK_MAX_INPUTS; i++) in->inputs[i] = i < t->n_inputs ? t->inputs[i] : -1;
    for (i = 0; i < AMK_MAX_OUTPUTS; i++) in->outputs[i] = i < t->n_outputs ? t->outputs[i] : -1;
    for (i = 0; i < AMK_MAX_WAITS; i++) {
        in->wait_counter[i] = i < t->n_waits ? t->waits[i].counter : -1;
        in->wait_threshold[i] = i < t->n_waits ? (uint32_t)t->waits[i].threshold : 0u;
    }
    amk_task_marshal_params(t, &in->params);
}

AMK_API void amk_buffer_descriptor(const amk_buffer *b, uint64_t ptr, amk_buffer_t *o) {
    int64_t stride = 1;
    int s;
    memset(o, 0, sizeof *o);
    o->ptr = ptr;
    o->numel = amk_buffer_numel(b);
    o->rank = b->rank;
    o->dtype = b->dtype;
    o->space = b->space;
    o->kind = b->kind;
    for (s = b->rank - 1; s >= 0 && s < AMK_MAX_RANK; s--) {
        o->shape[s] = b->shape[s];
        o->stride[s] = stride;
        stride *= b->shape[s] > 0 ? b->shape[s] : 1; /* why no overflow check: numel fits int64, so this does */
    }
}

AMK_API void amk_task_context(const amk_program *p, int ti, amk_vm_ctx_t *x) {
    const amk_task *t = &p->tasks[ti];
    int j;
    memset(x, 0, sizeof *x);
    amk_task_instruction(t, &x->ins);
    x->index = ti;
    for (j = 0; j < t->n_inputs && j < AMK_MAX_INPUTS; j++)
        if (t->inputs[j] >= 0 && t->inputs[j] < p->n_buffers) amk_buffer_descriptor(&p->buffers[t->inputs[j]], 0, &x->in[j]);
    for (j = 0; j < t->n_outputs && j < AMK_MAX_OUTPUTS; j++)
        if (t->outputs[j] >= 0 && t->outputs[j] < p->n_buffers) amk_buffer_descriptor(&p->buffers[t->outputs[j]], 0, &x->out[j]);
}

AMK__FN int amk__param_copy(amk_param *dst, const amk_param *src) {
    *dst = *src;
    dst->key = amk__strdup(src->key);
    dst->s = src->s ? amk__strdup(src->s) : NULL;
    return dst->key && (!src->s || dst->s);
}

AMK_API amk_program *amk_program_clone(const amk_program *src) {
    amk_program *p;
    int i, j;
    if (!src) return NULL;
    p = amk_program_create();
    if (!p) return NULL;
    for (i = 0; i < src->n_meta; i++) {
        if (!amk__grow((void **)&p->meta, &p->cap_meta, i + 1, sizeof(amk_meta))) goto oom;
        p->meta[i].key = amk__strdup(src->meta[i].key);
        p->meta[i].json = amk__strdup(src->meta[i].json);
        p->n_meta = i + 1;
        if (!p->meta[i].key || !p->meta[i].json) goto oom;
    }
    p->has_target = src->has_target;
    p->target = src->target;
    for (i = 0; i < src->n_buffers; i++) {
        const amk_buffer *b = &src->buffers[i];
        if (amk_program_add_buffer(p, b->name, (amk_buffer_kind)b->kind, (amk_dtype)b->dtype,
                                   b->rank, b->shape, (amk_memspace)b->space, b->source) < 0) goto oom;
    }
    for (i = 0; i < src->n_counters; i++) {
        if (amk_program_add_counter(p, src->counters[i].note) < 0) goto oom;
        p->counters[i].init = src->counters[i].init;
    }
    for (i = 0; i < src->n_tasks; i++) {
        const amk_task *s = &src->tasks[i];
        amk_task *t;
        if (amk_program_add_task(p, s->op, s->inputs, s->n_inputs, s->outputs, s->n_outputs,
                                 s->out_counter, s->label) < 0) goto oom;
        t = &p->tasks[i];
        t->id = s->id;
        if (t->id > p->id_cache_max) p->id_cache_max = t->id;
        t->sm = s->sm;
        t->est_bytes = s->est_bytes;
        t->est_flops = s->est_flops;
        if (s->op_name && !(t->op_name = amk__strdup(s->op_name))) goto oom;
        if (s->n_waits) {
            t->waits = (amk_wait *)amk__malloc((size_t)s->n_waits * sizeof(amk_wait));
            if (!t->waits) goto oom;
            memcpy(t->waits, s->waits, (size_t)s->n_waits * sizeof(amk_wait));
            t->n_waits = s->n_waits;
        }
        if (s->n_params) {
            t->params = (amk_param *)amk__calloc((size_t)s->n_params, sizeof(amk_param));
            if (!t->params) goto oom;
            for (j = 0; j < s->n_params; j++) {
                t->n_params = j + 1;
                if (!amk__param_copy(&t->params[j], &s->params[j])) goto oom;
            }
        }
    }
    if (src->has_pages) {
        p->has_pages = 1;
        p->n_pages = src->n_pages;
        if (src->n_pages) {
            p->pages = (amk_page *)amk__malloc((size_t)src->n_pages * sizeof(amk_page));
            if (!p->pages) goto oom;
            memcpy(p->pages, src->pages, (size_t)src->n_pages * sizeof(amk_page));
        }
        p->buffer_page = (int *)amk__malloc((size_t)(src->n_buffers ? src->n_buffers : 1) * sizeof(int));
        if (!p->buffer_page) goto oom;
        for (i = 0; i < src->n_buffers; i++) p->buffer_page[i] = src->buffer_page ? src->buffer_page[i] : -1;
    }
    p->has_config = src->has_config;
    amk__config_free(&p->config);
    if (!amk__config_copy(&p->config, &src->config)) goto oom;
    p->build_error = src->build_error;
    return p;
oom:
    amk_program_free(p);
    return NULL;
}

/* ==== program JSON (spec §6) =================================================================== */

/* why: 2^24 buffers, counters, tasks or pages is far beyond any model (Llama-3-70B lowers to about
   10^5 tasks) and keeps every count comfortably inside int. */
#define AMK__JSON_MAX_ITEMS (1 << 24)

/* Loader state: the diag and the JSON path of the value being read. */
typedef struct amk__jl {
    amk_diag *d;
    char path[sizeof(((amk_diag *)0)->path)];
} amk__jl;

AMK__FN size_t amk__jl_key(amk__jl *L, const char *key) {
    size_t old = strlen(L->path);
    amk__jpath_put(L->path, sizeof L->path, key, strlen(key));
    return old;
}
AMK__FN size_t amk__jl_idx(amk__jl *L, int64_t i) {
    size_t old = strlen(L->path);
    amk__jpath_put_index(L->path, sizeof L->path, i);
    return old;
}
AMK__FN void amk__jl_pop(amk__jl *L, size_t old) { L->path[old] = 0; }
/* Extends the path with the key of member i of obj. */
AMK__FN size_t amk__jl_member_key(amk__jl *L, const amk__jval *obj, int i) {
    size_t old = strlen(L->path);
    amk__jpath_put(L->path, sizeof L->path, obj->keys[i], obj->key_lens[i]);
    return old;
}

/* Reports an error about value `at` (its line:col) at the current path. */
AMK__FN amk_result amk__jl_fail(amk__jl *L, const amk__jval *at, amk_result r, const char *fmt, ...) {
    char msg[sizeof(((amk_diag *)0)->message)];
    va_list ap;
    if (!L->d) return r;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    L->d->line = at ? at->line : 0;
    L->d->col = at ? at->col : 0;
    memcpy(L->d->path, L->path, sizeof L->path);
    return amk__fail(L->d, r, "%s", msg);
}

AMK__FN amk_result amk__jl_oom(amk__jl *L, const amk__jval *at) {
    return amk__jl_fail(L, at, AMK_ERR_OUT_OF_MEMORY, "out of memory loading the program");
}

AMK__FN const char *amk__jl_tname(const amk__jval *v) {
    switch (v->type) {
    case AMK__J_NULL: return "null";
    case AMK__J_BOOL: return "a boolean";
    case AMK__J_INT: return "an integer";
    case AMK__J_REAL: return v->big ? "an integer outside int64" : "a real number";
    case AMK__J_STRING: return "a string";
    case AMK__J_ARRAY: return "an array";
    default: return "an object";
    }
}

AMK__FN amk_result amk__jl_type(amk__jl *L, const amk__jval *v, amk__jtype t, const char *what) {
    if (v->type == t) return AMK_OK;
    return amk__jl_fail(L, v, AMK_ERR_PARSE, "expected %s, found %s", what, amk__jl_tname(v));
}

/* An integer in [lo, hi] (a bool, a real such as 2.0 or a string is never an integer). */
AMK__FN amk_result amk__jl_int_value(amk__jl *L, const amk__jval *v, int64_t lo, int64_t hi, int64_t *out) {
    amk_result r = amk__jl_type(L, v, AMK__J_INT, "an integer");
    if (r != AMK_OK) return r;
    if (v->i < lo || v->i > hi)
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "expected an integer in [%lld, %lld], found %lld",
                            (long long)lo, (long long)hi, (long long)v->i);
    *out = v->i;
    return AMK_OK;
}

/* Looks up obj[key] and extends the path with key. NULL when absent: an error if required (the
   caller then returns *r), otherwise the path is restored. */
AMK__FN const amk__jval *amk__jl_member(amk__jl *L, const amk__jval *obj, const char *key, int required,
                                      size_t *old, amk_result *r) {
    const amk__jval *v = amk__json_get(obj, key);
    *old = amk__jl_key(L, key);
    *r = AMK_OK;
    if (v) return v;
    if (required) *r = amk__jl_fail(L, obj, AMK_ERR_PARSE, "missing required key \"%s\"", key);
    else amk__jl_pop(L, *old);
    return NULL;
}

/* obj[key] as an integer in [lo, hi]; *out keeps its value when an optional key is absent. */
AMK__FN amk_result amk__jl_int(amk__jl *L, const amk__jval *obj, const char *key, int required, int64_t lo,
                              int64_t hi, int64_t *out) {
    size_t old;
    amk_result r;
    const amk__jval *v = amk__jl_member(L, obj, key, required, &old, &r);
    if (!v) return r;
    if ((r = amk__jl_int_value(L, v, lo, hi, out)) != AMK_OK) return r;
    amk__jl_pop(L, old);
    return AMK_OK;
}
AMK__FN amk_result amk__jl_int32(amk__jl *L, const amk__jval *obj, const char *key, int required, int64_t lo,
                                int64_t hi, int *out) {
    int64_t v = *out;
    amk_result r = amk__jl_int(L, obj, key, required, lo, hi, &v);
    *out = (int)v;
    return r;
}

/* A string value without embedded NUL (the library keeps C strings). */
AMK__FN amk_result amk__jl_str_value(amk__jl *L, const amk__jval *v) {
    amk_result r = amk__jl_type(L, v, AMK__J_STRING, "a string");
    if (r != AMK_OK) return r;
    if (strlen(v->s) != v->slen) return amk__jl_fail(L, v, AMK_ERR_PARSE, "a string here must not contain \\u0000");
    return AMK_OK;
}

/* A heap copy of the key of member i of obj (keys become C strings, so no embedded NUL). */
AMK__FN amk_result amk__jl_key_copy(amk__jl *L, const amk__jval *obj, int i, char **out) {
    if (strlen(obj->keys[i]) != obj->key_lens[i])
        return amk__jl_fail(L, &obj->items[i], AMK_ERR_PARSE, "a key here must not contain \\u0000");
    if (!(*out = amk__strndup(obj->keys[i], obj->key_lens[i]))) return amk__jl_oom(L, obj);
    return AMK_OK;
}

/* obj[key] as a new heap string (nullable: JSON null gives NULL). *out keeps its value when an
   optional key is absent; a replaced value is freed. */
AMK__FN amk_result amk__jl_str(amk__jl *L, const amk__jval *obj, const char *key, int required, int nullable,
                              char **out) {
    size_t old;
    amk_result r;
    char *s = NULL;
    const amk__jval *v = amk__jl_member(L, obj, key, required, &old, &r);
    if (!v) return r;
    if (!(nullable && v->type == AMK__J_NULL)) {
        if (v->type != AMK__J_STRING)
            return amk__jl_fail(L, v, AMK_ERR_PARSE, "expected a string%s, found %s", nullable ? " or null" : "",
                                amk__jl_tname(v));
        if ((r = amk__jl_str_value(L, v)) != AMK_OK) return r;
        if (!(s = amk__strndup(v->s, v->slen))) return amk__jl_oom(L, v);
    }
    amk__free(*out);
    *out = s;
    amk__jl_pop(L, old);
    return AMK_OK;
}

/* obj[key] as one of names[0..n) (an enum by name); *out keeps its value when absent. */
AMK__FN amk_result amk__jl_enum(amk__jl *L, const amk__jval *obj, const char *key, int required,
                               const char *const *names, int n, int *out) {
    size_t old;
    amk_result r;
    int i;
    const amk__jval *v = amk__jl_member(L, obj, key, required, &old, &r);
    if (!v) return r;
    if ((r = amk__jl_str_value(L, v)) != AMK_OK) return r;
    for (i = 0; i < n; i++)
        if (strcmp(names[i], v->s) == 0) {
            *out = i;
            amk__jl_pop(L, old);
            return AMK_OK;
        }
    {
        char expect[160] = "";
        for (i = 0; i < n; i++) {
            size_t len = strlen(expect);
            snprintf(expect + len, sizeof expect - len, "%s%s", i ? ", " : "", names[i]);
        }
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "unknown %s \"%.64s\" (expected one of %s)", key, v->s, expect);
    }
}

/* Fails on a member of obj whose key is not in keys (NULL-terminated). */
AMK__FN amk_result amk__jl_known(amk__jl *L, const amk__jval *obj, const char *const *keys, const char *what) {
    int i, k;
    for (i = 0; i < obj->n; i++) {
        for (k = 0; keys[k]; k++)
            if (strlen(keys[k]) == obj->key_lens[i] && memcmp(keys[k], obj->keys[i], obj->key_lens[i]) == 0) break;
        if (!keys[k]) {
            amk__jl_member_key(L, obj, i);
            return amk__jl_fail(L, &obj->items[i], AMK_ERR_PARSE, "unknown key \"%.64s\" in %s", obj->keys[i], what);
        }
    }
    return AMK_OK;
}

/* Reads obj["id"] as a unique id in [0, n) (seen marks the ids taken). */
AMK__FN amk_result amk__jl_id(amk__jl *L, const amk__jval *obj, int n, amk__word *seen, const char *what,
                             int *out) {
    size_t old;
    amk_result r;
    const amk__jval *v = amk__jl_member(L, obj, "id", 1, &old, &r);
    if (!v) return r;
    if ((r = amk__jl_type(L, v, AMK__J_INT, "an integer")) != AMK_OK) return r;
    if (v->i < 0 || v->i >= n)
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "%s id %lld is out of range: ids are 0..%d", what, (long long)v->i,
                            n - 1);
    if (amk__bit_get(seen, (size_t)v->i))
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "duplicate %s id %lld", what, (long long)v->i);
    amk__bit_set(seen, (size_t)v->i);
    *out = (int)v->i;
    amk__jl_pop(L, old);
    return AMK_OK;
}

/* Checks an array's length against the cap and allocates n zeroed elements (NULL for n == 0). */
AMK__FN amk_result amk__jl_alloc(amk__jl *L, const amk__jval *arr, const char *what, size_t elem, void **out) {
    *out = NULL;
    if (arr->n > AMK__JSON_MAX_ITEMS)
        return amk__jl_fail(L, arr, AMK_ERR_PARSE, "too many %s (%d, the limit is %d)", what, arr->n,
                            AMK__JSON_MAX_ITEMS);
    if (arr->n && !(*out = amk__calloc((size_t)arr->n, elem))) return amk__jl_oom(L, arr);
    return AMK_OK;
}

/* One of the program's id-keyed tables (buffers, counters, tasks, pages): its arr->n elements
   allocated into *out, and *seen a zeroed bit per id (amk__jl_id marks them). */
AMK__FN amk_result amk__jl_table(amk__jl *L, const amk__jval *arr, const char *what, size_t elem, void **out,
                                amk__word **seen) {
    amk_result r;
    *seen = NULL;
    if ((r = amk__jl_alloc(L, arr, what, elem, out)) != AMK_OK) return r;
    if (!(*seen = (amk__word *)amk__calloc(AMK__WORDS(arr->n) + 1, sizeof(amk__word)))) return amk__jl_oom(L, arr);
    return AMK_OK;
}

/* An array of ids, each in [0, n) (what names them in messages). */
AMK__FN amk_result amk__jl_refs(amk__jl *L, const amk__jval *obj, const char *key, int n, const char *what,
                               int **out, int *n_out) {
    size_t old, old2;
    amk_result r;
    int i;
    const amk__jval *v = amk__jl_member(L, obj, key, 1, &old, &r);
    if (!v) return r;
    if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of ids")) != AMK_OK) return r;
    if ((r = amk__jl_alloc(L, v, what, sizeof(int), (void **)out)) != AMK_OK) return r;
    *n_out = v->n;
    for (i = 0; i < v->n; i++) {
        const amk__jval *e = &v->items[i];
        old2 = amk__jl_idx(L, i);
        if ((r = amk__jl_type(L, e, AMK__J_INT, "an integer id")) != AMK_OK) return r;
        if (e->i < 0 || e->i >= n)
            return amk__jl_fail(L, e, AMK_ERR_PARSE, "%s id %lld does not exist (there are %d)", what,
                                (long long)e->i, n);
        (*out)[i] = (int)e->i;
        amk__jl_pop(L, old2);
    }
    amk__jl_pop(L, old);
    return AMK_OK;
}

/* A decimal object key naming an id in [0, n) ("0", "17"; no sign, no leading zeros). */
AMK__FN int amk__jl_key_id(const char *s, size_t len, int64_t n, int64_t *out) {
    int64_t v = 0;
    size_t i;
    /* why: 10 digits exceed every id bound (2^31) without overflowing int64 */
    if (len == 0 || len > 10 || (len > 1 && s[0] == '0')) return 0;
    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    if (v >= n) return 0;
    *out = v;
    return 1;
}

static const char *const amk__jl_buffer_keys[] = {"id", "name", "kind", "dtype", "shape", "space", "source", NULL};
static const char *const amk__jl_counter_keys[] = {"id", "init", "note", NULL};
static const char *const amk__jl_task_keys[] = {"id", "op", "inputs", "outputs", "out_counter", "waits", "params",
                                               "sm", "est_bytes", "est_flops", "label", NULL};
static const char *const amk__jl_wait_keys[] = {"counter", "threshold", NULL};
static const char *const amk__jl_pages_keys[] = {"buffer_to_page", "pages", NULL};
static const char *const amk__jl_page_keys[] = {"id", "space", "nbytes", "live_start", "live_end", NULL};

AMK__FN amk_result amk__jl_buffers(amk__jl *L, const amk__jval *arr, amk_program *p) {
    amk__word *seen;
    amk_result r;
    int i, k;
    r = amk__jl_table(L, arr, "buffers", sizeof(amk_buffer), (void **)&p->buffers, &seen);
    if (p->buffers) p->n_buffers = p->cap_buffers = arr->n;
    if (r != AMK_OK) return r;
    for (i = 0; i < arr->n && r == AMK_OK; i++) {
        const amk__jval *e = &arr->items[i], *shape;
        size_t old = amk__jl_idx(L, i), old2;
        amk_buffer *b;
        int id = 0;
        if ((r = amk__jl_type(L, e, AMK__J_OBJECT, "a buffer object")) != AMK_OK) break;
        if ((r = amk__jl_known(L, e, amk__jl_buffer_keys, "a buffer")) != AMK_OK) break;
        if ((r = amk__jl_id(L, e, arr->n, seen, "buffer", &id)) != AMK_OK) break;
        b = &p->buffers[id];
        b->id = id;
        b->space = AMK_SPACE_HBM;
        if ((r = amk__jl_str(L, e, "name", 1, 0, &b->name)) != AMK_OK) break;
        if ((r = amk__jl_enum(L, e, "kind", 1, amk__kind_names, AMK_KIND_COUNT, &b->kind)) != AMK_OK) break;
        if ((r = amk__jl_enum(L, e, "dtype", 1, amk__dtype_names, AMK_DTYPE_COUNT, &b->dtype)) != AMK_OK) break;
        if ((r = amk__jl_enum(L, e, "space", 0, amk__space_names, AMK_SPACE_COUNT, &b->space)) != AMK_OK) break;
        if ((r = amk__jl_str(L, e, "source", 0, 1, &b->source)) != AMK_OK) break;
        if (!(shape = amk__jl_member(L, e, "shape", 1, &old2, &r))) break;
        if ((r = amk__jl_type(L, shape, AMK__J_ARRAY, "a shape array")) != AMK_OK) break;
        if (shape->n > AMK_MAX_RANK) {
            r = amk__jl_fail(L, shape, AMK_ERR_PARSE, "rank %d is above the maximum %d", shape->n, AMK_MAX_RANK);
            break;
        }
        b->rank = shape->n;
        for (k = 0; k < shape->n && r == AMK_OK; k++) {
            size_t old3 = amk__jl_idx(L, k);
            r = amk__jl_int_value(L, &shape->items[k], 0, INT64_MAX, &b->shape[k]);
            if (r == AMK_OK) amk__jl_pop(L, old3);
        }
        if (r != AMK_OK) break;
        if (amk__buffer_nbytes(b) < 0) {
            r = amk__jl_fail(L, shape, AMK_ERR_PARSE, "the shape's element or byte count overflows int64");
            break;
        }
        amk__jl_pop(L, old2);
        amk__jl_pop(L, old);
    }
    amk__free(seen);
    return r;
}

AMK__FN amk_result amk__jl_counters(amk__jl *L, const amk__jval *arr, amk_program *p) {
    amk__word *seen;
    amk_result r;
    int i;
    r = amk__jl_table(L, arr, "counters", sizeof(amk_counter), (void **)&p->counters, &seen);
    if (p->counters) p->n_counters = p->cap_counters = arr->n;
    if (r != AMK_OK) return r;
    for (i = 0; i < arr->n && r == AMK_OK; i++) {
        const amk__jval *e = &arr->items[i];
        size_t old = amk__jl_idx(L, i);
        amk_counter *c;
        int id = 0;
        if ((r = amk__jl_type(L, e, AMK__J_OBJECT, "a counter object")) != AMK_OK) break;
        if ((r = amk__jl_known(L, e, amk__jl_counter_keys, "a counter")) != AMK_OK) break;
        if ((r = amk__jl_id(L, e, arr->n, seen, "counter", &id)) != AMK_OK) break;
        c = &p->counters[id];
        c->id = id;
        /* why: a counter is a uint32 on the device (amk_counter_t) */
        if ((r = amk__jl_int(L, e, "init", 0, 0, 4294967295LL, &c->init)) != AMK_OK) break;
        if ((r = amk__jl_str(L, e, "note", 0, 0, &c->note)) != AMK_OK) break;
        if (!c->note && !(c->note = amk__strdup(""))) { r = amk__jl_oom(L, e); break; }
        amk__jl_pop(L, old);
    }
    amk__free(seen);
    return r;
}

AMK__FN amk_result amk__jl_params(amk__jl *L, const amk__jval *obj, amk_task *t) {
    amk_result r;
    int i;
    if ((r = amk__jl_type(L, obj, AMK__J_OBJECT, "a params object")) != AMK_OK) return r;
    if (!obj->n) return AMK_OK;
    if (!(t->params = (amk_param *)amk__calloc((size_t)obj->n, sizeof(amk_param)))) return amk__jl_oom(L, obj);
    t->n_params = obj->n;
    for (i = 0; i < obj->n; i++) {
        const amk__jval *v = &obj->items[i];
        amk_param *pr = &t->params[i];
        size_t old = amk__jl_member_key(L, obj, i);
        if ((r = amk__jl_key_copy(L, obj, i, &pr->key)) != AMK_OK) return r;
        switch (v->type) {
        case AMK__J_INT: pr->type = AMK_PARAM_INT; pr->i = v->i; pr->f = (double)v->i; break;
        case AMK__J_REAL:
            if (v->big) return amk__jl_fail(L, v, AMK_ERR_PARSE, "integer param outside int64");
            pr->type = AMK_PARAM_REAL; pr->f = v->f; break;
        case AMK__J_BOOL: pr->type = AMK_PARAM_BOOL; pr->i = v->i; break;
        case AMK__J_NULL: pr->type = AMK_PARAM_NULL; break;
        case AMK__J_STRING:
            if ((r = amk__jl_str_value(L, v)) != AMK_OK) return r;
            pr->type = AMK_PARAM_STRING;
            if (!(pr->s = amk__strndup(v->s, v->slen))) return amk__jl_oom(L, v);
            break;
        default:
            return amk__jl_fail(L, v, AMK_ERR_PARSE, "a param must be a number, boolean, string or null, found %s",
                                amk__jl_tname(v));
        }
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

/* A task of a program written when the variants of RMSNORM_GEMV, RMSNORM_MLP and ATTENTION_O
   were their flags (IR 0.2.0 before opcode 29): flags holding exactly a variant's form bits
   becomes that variant's opcode, and the bits leave flags (the param, when nothing is left).
   Other bits stay, for validate to name. */
AMK__FN void amk__task_variant_from_flags(amk_task *t) {
    int i, v;
    uint32_t fl, form;
    for (i = 0; i < t->n_params; i++)
        if (strcmp(t->params[i].key, "flags") == 0 && t->params[i].type == AMK_PARAM_INT) break;
    if (i == t->n_params || t->params[i].i < 0 || t->params[i].i > INT32_MAX) return;
    fl = (uint32_t)t->params[i].i;
    form = fl & amk__op_form_bits(t->op);
    if (!form || (v = amk_op_variant(t->op, form)) < 0) return;
    t->op = v;
    t->params[i].i = (int64_t)(fl & ~form);
    t->params[i].f = (double)t->params[i].i;
    if (t->params[i].i) return;
    amk__free(t->params[i].key);
    amk__free(t->params[i].s);
    memmove(&t->params[i], &t->params[i + 1], (size_t)(t->n_params - i - 1) * sizeof(amk_param));
    t->n_params--;
}

AMK__FN amk_result amk__jl_task(amk__jl *L, const amk__jval *e, amk_program *p, amk__word *seen, amk_task *t) {
    const amk__jval *v;
    amk_result r;
    size_t old;
    char *op = NULL;
    int i;
    t->sm = -1;
    if ((r = amk__jl_type(L, e, AMK__J_OBJECT, "a task object")) != AMK_OK) return r;
    if ((r = amk__jl_known(L, e, amk__jl_task_keys, "a task")) != AMK_OK) return r;
    if ((r = amk__jl_id(L, e, p->n_tasks, seen, "task", &t->id)) != AMK_OK) return r;
    if ((r = amk__jl_str(L, e, "op", 1, 0, &op)) != AMK_OK) return r;
    t->op = amk_op_from_name(op);
    if (t->op < 0) t->op_name = op; /* validate rejects it (OP_UNKNOWN) */
    else amk__free(op);
    if ((r = amk__jl_refs(L, e, "inputs", p->n_buffers, "buffer", &t->inputs, &t->n_inputs)) != AMK_OK) return r;
    if ((r = amk__jl_refs(L, e, "outputs", p->n_buffers, "buffer", &t->outputs, &t->n_outputs)) != AMK_OK) return r;
    if (!(v = amk__jl_member(L, e, "out_counter", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, v, AMK__J_INT, "an integer counter id")) != AMK_OK) return r;
    if (v->i < 0 || v->i >= p->n_counters)
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "counter id %lld does not exist (there are %d)", (long long)v->i,
                            p->n_counters);
    t->out_counter = (int)v->i;
    amk__jl_pop(L, old);
    if ((v = amk__jl_member(L, e, "waits", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of waits")) != AMK_OK) return r;
        if ((r = amk__jl_alloc(L, v, "waits", sizeof(amk_wait), (void **)&t->waits)) != AMK_OK) return r;
        t->n_waits = v->n;
        for (i = 0; i < v->n; i++) {
            const amk__jval *w = &v->items[i], *c;
            size_t old2 = amk__jl_idx(L, i), old3;
            if ((r = amk__jl_type(L, w, AMK__J_OBJECT, "a wait object {counter, threshold}")) != AMK_OK) return r;
            if ((r = amk__jl_known(L, w, amk__jl_wait_keys, "a wait")) != AMK_OK) return r;
            if (!(c = amk__jl_member(L, w, "counter", 1, &old3, &r))) return r;
            if ((r = amk__jl_type(L, c, AMK__J_INT, "an integer counter id")) != AMK_OK) return r;
            if (c->i < 0 || c->i >= p->n_counters)
                return amk__jl_fail(L, c, AMK_ERR_PARSE, "counter id %lld does not exist (there are %d)",
                                    (long long)c->i, p->n_counters);
            t->waits[i].counter = (int)c->i;
            amk__jl_pop(L, old3);
            /* any int64: validate checks the range (WAIT_UNSATISFIABLE) */
            r = amk__jl_int(L, w, "threshold", 1, INT64_MIN, INT64_MAX, &t->waits[i].threshold);
            if (r != AMK_OK) return r;
            amk__jl_pop(L, old2);
        }
        amk__jl_pop(L, old);
    } else if (r != AMK_OK) {
        return r;
    }
    if ((v = amk__jl_member(L, e, "params", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_params(L, v, t)) != AMK_OK) return r;
        amk__task_variant_from_flags(t);
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_member(L, e, "sm", 0, &old, &r)) != NULL) {
        if (v->type != AMK__J_NULL) {
            int64_t sm;
            if (v->type == AMK__J_INT && v->i < 0)
                return amk__jl_fail(L, v, AMK_ERR_PARSE, "sm %lld is negative (use null for unassigned)",
                                    (long long)v->i);
            if ((r = amk__jl_int_value(L, v, 0, INT_MAX, &sm)) != AMK_OK) return r;
            t->sm = (int)sm;
        }
        amk__jl_pop(L, old);
    }
    if ((r = amk__jl_int(L, e, "est_bytes", 0, 0, INT64_MAX, &t->est_bytes)) != AMK_OK) return r;
    if ((r = amk__jl_int(L, e, "est_flops", 0, 0, INT64_MAX, &t->est_flops)) != AMK_OK) return r;
    if ((r = amk__jl_str(L, e, "label", 0, 0, &t->label)) != AMK_OK) return r;
    if (!t->label && !(t->label = amk__strdup(""))) return amk__jl_oom(L, e);
    return AMK_OK;
}

AMK__FN amk_result amk__jl_tasks(amk__jl *L, const amk__jval *arr, amk_program *p) {
    amk__word *seen;
    amk_result r;
    int i;
    r = amk__jl_table(L, arr, "tasks", sizeof(amk_task), (void **)&p->tasks, &seen);
    if (p->tasks) p->n_tasks = p->cap_tasks = arr->n;
    if (r != AMK_OK) return r;
    for (i = 0; i < arr->n && r == AMK_OK; i++) {
        size_t old = amk__jl_idx(L, i);
        if ((r = amk__jl_task(L, &arr->items[i], p, seen, &p->tasks[i])) == AMK_OK) amk__jl_pop(L, old);
    }
    amk__free(seen);
    return r;
}

AMK__FN amk_result amk__jl_pages(amk__jl *L, const amk__jval *obj, amk_program *p) {
    const amk__jval *arr, *map;
    amk__word *seen;
    amk_result r;
    size_t old;
    int i;
    if ((r = amk__jl_type(L, obj, AMK__J_OBJECT, "a page allocation object or null")) != AMK_OK) return r;
    if ((r = amk__jl_known(L, obj, amk__jl_pages_keys, "the page allocation")) != AMK_OK) return r;
    if (!(arr = amk__jl_member(L, obj, "pages", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, arr, AMK__J_ARRAY, "an array of pages")) != AMK_OK) return r;
    r = amk__jl_table(L, arr, "pages", sizeof(amk_page), (void **)&p->pages, &seen);
    if (p->pages) p->n_pages = arr->n;
    if (r != AMK_OK) return r;
    p->has_pages = 1;
    if (!(p->buffer_page = (int *)amk__malloc((size_t)p->n_buffers * sizeof(int)))) { amk__free(seen); return amk__jl_oom(L, obj); }
    for (i = 0; i < p->n_buffers; i++) p->buffer_page[i] = -1;
    for (i = 0; i < arr->n && r == AMK_OK; i++) {
        const amk__jval *e = &arr->items[i];
        size_t old2 = amk__jl_idx(L, i);
        amk_page *pg;
        int id = 0;
        if ((r = amk__jl_type(L, e, AMK__J_OBJECT, "a page object")) != AMK_OK) break;
        if ((r = amk__jl_known(L, e, amk__jl_page_keys, "a page")) != AMK_OK) break;
        if ((r = amk__jl_id(L, e, arr->n, seen, "page", &id)) != AMK_OK) break;
        pg = &p->pages[id];
        pg->id = id;
        pg->live_start = pg->live_end = -1;
        if ((r = amk__jl_enum(L, e, "space", 1, amk__space_names, AMK_SPACE_COUNT, &pg->space)) != AMK_OK) break;
        if ((r = amk__jl_int(L, e, "nbytes", 1, 0, INT64_MAX, &pg->nbytes)) != AMK_OK) break;
        if ((r = amk__jl_int(L, e, "live_start", 0, -1, INT64_MAX, &pg->live_start)) != AMK_OK) break;
        if ((r = amk__jl_int(L, e, "live_end", 0, -1, INT64_MAX, &pg->live_end)) != AMK_OK) break;
        amk__jl_pop(L, old2);
    }
    amk__free(seen);
    if (r != AMK_OK) return r;
    amk__jl_pop(L, old);
    if (!(map = amk__jl_member(L, obj, "buffer_to_page", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, map, AMK__J_OBJECT, "an object {buffer id: page id}")) != AMK_OK) return r;
    for (i = 0; i < map->n; i++) {
        const amk__jval *v = &map->items[i];
        size_t old2 = amk__jl_member_key(L, map, i);
        int64_t b, pg;
        if (!amk__jl_key_id(map->keys[i], map->key_lens[i], p->n_buffers, &b))
            return amk__jl_fail(L, v, AMK_ERR_PARSE, "key \"%.32s\" is not the decimal id of a buffer (there are %d)",
                                map->keys[i], p->n_buffers);
        if ((r = amk__jl_type(L, v, AMK__J_INT, "an integer page id")) != AMK_OK) return r;
        pg = v->i;
        if (pg < 0 || pg >= p->n_pages)
            return amk__jl_fail(L, v, AMK_ERR_PARSE, "page id %lld does not exist (there are %d)", (long long)pg,
                                p->n_pages);
        p->buffer_page[b] = (int)pg;
        amk__jl_pop(L, old2);
    }
    amk__jl_pop(L, old);
    return AMK_OK;
}

/* amk_target's fields in spec order (§5.1): one table drives both reading and writing.
   Types: 's' char array, 'i' int, 'l' int64_t, 'f' double, 'b' int written as true/false. */
typedef struct amk__jfield {
    const char *name;
    char type;
    size_t offset, size;
} amk__jfield;

#define AMK__JT(name, type) {#name, type, offsetof(amk_target, name), sizeof(((amk_target *)0)->name)}
static const amk__jfield amk__jl_target_fields[] = {
    AMK__JT(name, 's'), AMK__JT(sm_arch, 'i'), AMK__JT(num_sms, 'i'), AMK__JT(smem_bytes_per_sm, 'l'),
    AMK__JT(smem_bytes_per_block_optin, 'l'), AMK__JT(regs_per_sm, 'l'), AMK__JT(max_threads_per_sm, 'i'),
    AMK__JT(max_regs_per_thread, 'i'), AMK__JT(l2_bytes, 'l'), AMK__JT(hbm_bytes, 'l'),
    AMK__JT(hbm_bandwidth_gbs, 'f'), AMK__JT(fp16_tflops, 'f'), AMK__JT(clock_ghz, 'f'),
    AMK__JT(supports_cooperative, 'b'), AMK__JT(wddm_tdr, 'b'), AMK__JT(note, 's')};
#undef AMK__JT
#define AMK__JT_COUNT ((int)(sizeof amk__jl_target_fields / sizeof amk__jl_target_fields[0]))

/* Missing fields are 0 or ""; unknown fields are dropped (forward compatibility, spec §6). */
AMK__FN amk_result amk__jl_target(amk__jl *L, const amk__jval *obj, amk_target *t) {
    amk_result r;
    int k;
    if ((r = amk__jl_type(L, obj, AMK__J_OBJECT, "a target object or null")) != AMK_OK) return r;
    memset(t, 0, sizeof *t);
    for (k = 0; k < AMK__JT_COUNT; k++) {
        const amk__jfield *f = &amk__jl_target_fields[k];
        const amk__jval *v = amk__json_get(obj, f->name);
        char *dst = (char *)t + f->offset;
        size_t old;
        int64_t iv;
        if (!v) continue;
        old = amk__jl_key(L, f->name);
        switch (f->type) {
        case 's':
            if ((r = amk__jl_str_value(L, v)) != AMK_OK) return r;
            if (v->slen >= f->size)
                return amk__jl_fail(L, v, AMK_ERR_PARSE, "%s is longer than %d bytes", f->name, (int)f->size - 1);
            memcpy(dst, v->s, v->slen + 1);
            break;
        case 'i':
            if ((r = amk__jl_int_value(L, v, INT_MIN, INT_MAX, &iv)) != AMK_OK) return r;
            *(int *)(void *)dst = (int)iv;
            break;
        case 'l':
            if ((r = amk__jl_int_value(L, v, INT64_MIN, INT64_MAX, (int64_t *)(void *)dst)) != AMK_OK) return r;
            break;
        case 'f':
            if (v->type != AMK__J_INT && v->type != AMK__J_REAL)
                return amk__jl_fail(L, v, AMK_ERR_PARSE, "expected a number, found %s", amk__jl_tname(v));
            *(double *)(void *)dst = v->f;
            break;
        default:
            if ((r = amk__jl_type(L, v, AMK__J_BOOL, "true or false")) != AMK_OK) return r;
            *(int *)(void *)dst = (int)v->i;
            break;
        }
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

static const char *const amk__jl_page_alloc_names[] = {"graph_color", "linear", "none"};

/* config.tiling: {archetype: {key: int}}. */
AMK__FN amk_result amk__jl_tiling(amk__jl *L, const amk__jval *v, amk_config *c) {
    amk_result r;
    int i, j;
    if ((r = amk__jl_type(L, v, AMK__J_OBJECT, "an object {archetype: {key: int}}")) != AMK_OK) return r;
    if ((r = amk__jl_alloc(L, v, "tiling archetypes", sizeof(amk_tiling), (void **)&c->tiling)) != AMK_OK) return r;
    c->n_tiling = v->n;
    for (i = 0; i < v->n; i++) {
        const amk__jval *a = &v->items[i];
        amk_tiling *t = &c->tiling[i];
        size_t old = amk__jl_member_key(L, v, i);
        if ((r = amk__jl_key_copy(L, v, i, &t->archetype)) != AMK_OK) return r;
        if ((r = amk__jl_type(L, a, AMK__J_OBJECT, "an object {key: int}")) != AMK_OK) return r;
        if ((r = amk__jl_alloc(L, a, "tile params", sizeof(amk_tile_param), (void **)&t->items)) != AMK_OK) return r;
        t->n_items = a->n;
        for (j = 0; j < a->n; j++) {
            size_t old2 = amk__jl_member_key(L, a, j);
            if ((r = amk__jl_key_copy(L, a, j, &t->items[j].key)) != AMK_OK) return r;
            r = amk__jl_int_value(L, &a->items[j], INT64_MIN, INT64_MAX, &t->items[j].value);
            if (r != AMK_OK) return r;
            amk__jl_pop(L, old2);
        }
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

/* config.fusion_grouping: [[op name, ...], ...]. */
AMK__FN amk_result amk__jl_fusion(amk__jl *L, const amk__jval *v, amk_config *c) {
    amk_result r;
    int i, j;
    if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of arrays of op names")) != AMK_OK) return r;
    if ((r = amk__jl_alloc(L, v, "fusion groups", sizeof(amk_fusion_group), (void **)&c->fusion)) != AMK_OK) return r;
    c->n_fusion = v->n;
    for (i = 0; i < v->n; i++) {
        const amk__jval *g = &v->items[i];
        amk_fusion_group *fg = &c->fusion[i];
        size_t old = amk__jl_idx(L, i);
        if ((r = amk__jl_type(L, g, AMK__J_ARRAY, "an array of op names")) != AMK_OK) return r;
        if ((r = amk__jl_alloc(L, g, "op names", sizeof(char *), (void **)&fg->names)) != AMK_OK) return r;
        fg->n_names = g->n;
        for (j = 0; j < g->n; j++) {
            size_t old2 = amk__jl_idx(L, j);
            if ((r = amk__jl_str_value(L, &g->items[j])) != AMK_OK) return r;
            if (!(fg->names[j] = amk__strndup(g->items[j].s, g->items[j].slen))) return amk__jl_oom(L, g);
            amk__jl_pop(L, old2);
        }
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

/* config.sm_assignment: "load_balance", "round_robin" or {"<task id>": sm} (spec §5). */
AMK__FN amk_result amk__jl_sm_assignment(amk__jl *L, const amk__jval *v, amk_config *c) {
    amk_result r;
    int i;
    if (v->type == AMK__J_STRING && strcmp(v->s, "load_balance") == 0 && v->slen == 12) {
        c->sm_assignment = AMK_SM_LOAD_BALANCE;
        return AMK_OK;
    }
    if (v->type == AMK__J_STRING && strcmp(v->s, "round_robin") == 0 && v->slen == 11) {
        c->sm_assignment = AMK_SM_ROUND_ROBIN;
        return AMK_OK;
    }
    if (v->type != AMK__J_OBJECT)
        return amk__jl_fail(L, v, AMK_ERR_PARSE,
                            "expected \"round_robin\", \"load_balance\" or an object {task id: sm}, found %s",
                            v->type == AMK__J_STRING ? "another string" : amk__jl_tname(v));
    c->sm_assignment = AMK_SM_EXPLICIT;
    if ((r = amk__jl_alloc(L, v, "sm_assignment entries", sizeof(int), (void **)&c->explicit_task)) != AMK_OK ||
        (r = amk__jl_alloc(L, v, "sm_assignment entries", sizeof(int), (void **)&c->explicit_sm)) != AMK_OK)
        return r;
    c->n_explicit = v->n;
    for (i = 0; i < v->n; i++) {
        size_t old = amk__jl_member_key(L, v, i);
        int64_t task, sm;
        if (!amk__jl_key_id(v->keys[i], v->key_lens[i], INT_MAX, &task))
            return amk__jl_fail(L, &v->items[i], AMK_ERR_PARSE, "key \"%.32s\" is not a decimal task id", v->keys[i]);
        if ((r = amk__jl_int_value(L, &v->items[i], 0, INT_MAX, &sm)) != AMK_OK) return r;
        c->explicit_task[i] = (int)task;
        c->explicit_sm[i] = (int)sm;
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

/* Missing fields keep amk_config_default's values; unknown fields are dropped. */
AMK__FN amk_result amk__jl_config(amk__jl *L, const amk__jval *obj, amk_config *c) {
    const amk__jval *v;
    amk_result r;
    size_t old;
    int pa = (int)c->page_allocation;
    if ((r = amk__jl_type(L, obj, AMK__J_OBJECT, "a config object or null")) != AMK_OK) return r;
    if ((v = amk__jl_member(L, obj, "tiling", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_tiling(L, v, c)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_member(L, obj, "fusion_grouping", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_fusion(L, v, c)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_member(L, obj, "sm_assignment", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_sm_assignment(L, v, c)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    r = amk__jl_int32(L, obj, "pipelining_depth", 0, INT_MIN, INT_MAX, &c->pipelining_depth);
    if (r != AMK_OK) return r;
    if ((r = amk__jl_enum(L, obj, "page_allocation", 0, amk__jl_page_alloc_names, 3, &pa)) != AMK_OK) return r;
    c->page_allocation = (amk_page_allocation)pa;
    r = amk__jl_int32(L, obj, "threads_per_block", 0, INT_MIN, INT_MAX, &c->threads_per_block);
    if (r != AMK_OK) return r;
    return amk__jl_int(L, obj, "smem_bytes_per_block", 0, INT64_MIN, INT64_MAX, &c->smem_bytes_per_block);
}

AMK__FN amk_result amk__jl_meta(amk__jl *L, const amk__jval *obj, amk_program *p) {
    amk_result r;
    int i;
    if ((r = amk__jl_type(L, obj, AMK__J_OBJECT, "a meta object")) != AMK_OK) return r;
    if ((r = amk__jl_alloc(L, obj, "meta keys", sizeof(amk_meta), (void **)&p->meta)) != AMK_OK) return r;
    p->n_meta = p->cap_meta = obj->n;
    for (i = 0; i < obj->n; i++) {
        amk__sb sb;
        size_t old = amk__jl_member_key(L, obj, i);
        if ((r = amk__jl_key_copy(L, obj, i, &p->meta[i].key)) != AMK_OK) return r;
        memset(&sb, 0, sizeof sb);
        amk__json_put_value(&sb, &obj->items[i]);
        if (sb.oom) { amk__sb_free(&sb); return amk__jl_oom(L, obj); }
        p->meta[i].json = sb.p;
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

/* "MAJOR.MINOR.PATCH", each 1-9 decimal digits; 0 if malformed. */
AMK__FN int amk__jl_version(const char *s, size_t len, long *major) {
    size_t i = 0;
    int part;
    long v[3];
    for (part = 0; part < 3; part++) {
        size_t start = i;
        v[part] = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9' && i - start < 9) v[part] = v[part] * 10 + (s[i++] - '0');
        if (i == start) return 0;
        if (part < 2) {
            if (i >= len || s[i] != '.') return 0;
            i++;
        }
    }
    if (i != len) return 0;
    *major = v[0];
    return 1;
}

/* An optional member that may be null (= absent): returns it with the path extended, or NULL. */
AMK__FN const amk__jval *amk__jl_nullable(amk__jl *L, const amk__jval *obj, const char *key, size_t *old) {
    amk_result r;
    const amk__jval *v = amk__jl_member(L, obj, key, 0, old, &r);
    if (v && v->type == AMK__J_NULL) { amk__jl_pop(L, *old); return NULL; }
    return v;
}

AMK__FN amk_result amk__jl_program(amk__jl *L, const amk__jval *root, amk_program *p) {
    const amk__jval *v;
    amk_result r;
    size_t old;
    long major = 0;
    if (root->type != AMK__J_OBJECT)
        return amk__jl_fail(L, root, AMK_ERR_PARSE, "the top level must be a program object, found %s",
                            amk__jl_tname(root));
    /* the version first: a newer major may change everything after it */
    if (!(v = amk__jl_member(L, root, "ir_version", 1, &old, &r))) return r;
    if ((r = amk__jl_str_value(L, v)) != AMK_OK) return r;
    if (!amk__jl_version(v->s, v->slen, &major))
        return amk__jl_fail(L, v, AMK_ERR_PARSE, "ir_version \"%.32s\" is not of the form MAJOR.MINOR.PATCH", v->s);
    if (major != AMK_IR_VERSION_MAJOR)
        return amk__jl_fail(L, v, AMK_ERR_VERSION, "ir_version %.32s is not supported (this is %s)", v->s,
                            AMK_IR_VERSION);
    amk__jl_pop(L, old);
    if ((v = amk__jl_member(L, root, "abi_version", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_type(L, v, AMK__J_STRING, "a string")) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if (!(v = amk__jl_member(L, root, "buffers", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of buffers")) != AMK_OK) return r;
    if ((r = amk__jl_buffers(L, v, p)) != AMK_OK) return r;
    amk__jl_pop(L, old);
    if (!(v = amk__jl_member(L, root, "counters", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of counters")) != AMK_OK) return r;
    if ((r = amk__jl_counters(L, v, p)) != AMK_OK) return r;
    amk__jl_pop(L, old);
    if (!(v = amk__jl_member(L, root, "tasks", 1, &old, &r))) return r;
    if ((r = amk__jl_type(L, v, AMK__J_ARRAY, "an array of tasks")) != AMK_OK) return r;
    if ((r = amk__jl_tasks(L, v, p)) != AMK_OK) return r;
    amk__jl_pop(L, old);
    if ((v = amk__jl_member(L, root, "meta", 0, &old, &r)) != NULL) {
        if ((r = amk__jl_meta(L, v, p)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_nullable(L, root, "target", &old)) != NULL) {
        if ((r = amk__jl_target(L, v, &p->target)) != AMK_OK) return r;
        p->has_target = 1;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_nullable(L, root, "pages", &old)) != NULL) {
        if ((r = amk__jl_pages(L, v, p)) != AMK_OK) return r;
        amk__jl_pop(L, old);
    }
    if ((v = amk__jl_nullable(L, root, "config", &old)) != NULL) {
        if ((r = amk__jl_config(L, v, &p->config)) != AMK_OK) return r;
        p->has_config = 1;
        amk__jl_pop(L, old);
    }
    return AMK_OK;
}

AMK_API amk_result amk_program_load_json(const char *text, size_t len, amk_program **out, amk_diag *d) {
    amk__jdoc doc;
    amk__jl L;
    amk_program *p;
    amk_result r;
    amk_diag_clear(d);
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_program_load_json: out is NULL");
    *out = NULL;
    if (!text && len) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_program_load_json: text is NULL");
    r = amk__json_parse(text, len, AMK_JSON_MAX_DEPTH, &doc, d);
    if (r != AMK_OK) return r;
    if (!(p = amk_program_create())) {
        amk__json_free(&doc);
        return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory loading the program");
    }
    memset(&L, 0, sizeof L);
    L.d = d;
    r = amk__jl_program(&L, doc.root, p);
    amk__json_free(&doc);
    if (r != AMK_OK) {
        amk_program_free(p);
        return r;
    }
    *out = p;
    return AMK_OK;
}

AMK_API amk_result amk_program_load_file(const char *path, amk_program **out, amk_diag *d) {
    void *map;
    size_t size;
    amk_result r;
    amk_diag_clear(d);
    if (!out) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_program_load_file: out is NULL");
    *out = NULL;
    if (!path) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_program_load_file: path is NULL");
    /* why: mapping refuses what is not a regular file (a directory, a FIFO) before sizing it */
    if ((r = amk__map_file(path, &map, &size, d)) != AMK_OK) return r;
    r = amk_program_load_json((const char *)map, size, out, d);
    amk__unmap_file(map, size);
    if (r != AMK_OK && d) { /* prefix the message with file:line:col (the path stays JSON) */
        char prefix[128];
        size_t pl, ml = strlen(d->message);
        if (d->line) snprintf(prefix, sizeof prefix, "%s:%d:%d: ", path, d->line, d->col);
        else snprintf(prefix, sizeof prefix, "%s: ", path);
        pl = strlen(prefix);
        if (pl + ml + 1 > sizeof d->message) ml = sizeof d->message - pl - 1;
        memmove(d->message + pl, d->message, ml);
        memcpy(d->message, prefix, pl);
        d->message[pl + ml] = 0;
    }
    return r;
}

/* ---- writing ------------------------------------------------------------------------------------ */

/* Writer state. bad is set when p holds something the loader would refuse (a dangling id, an
   enum code without a name, a non-finite real, invalid UTF-8): the writer then fails rather than
   emit a file that does not load. */
typedef struct amk__jw {
    amk__sb sb;
    int bad;
} amk__jw;

AMK__FN void amk__jw_str(amk__jw *w, const char *s) {
    size_t i = 0, n;
    if (!s) s = "";
    n = strlen(s);
    while (i < n) {
        int k = amk__utf8_seq_len((const unsigned char *)s + i, n - i);
        if (!k) { w->bad = 1; break; }
        i += (size_t)k;
    }
    amk__json_put_string(&w->sb, s, n);
}

AMK__FN void amk__jw_real(amk__jw *w, double v) {
    char num[40];
    if (!(v <= DBL_MAX && v >= -DBL_MAX)) w->bad = 1;
    amk__fmt_double(num, sizeof num, v);
    amk__sb_puts(&w->sb, num);
}

AMK__FN void amk__jw_i64(amk__jw *w, int64_t v) { amk__sb_printf(&w->sb, "%lld", (long long)v); }

/* A name from a table, or bad for a code outside it. */
AMK__FN void amk__jw_enum(amk__jw *w, const char *const *names, int n, int code) {
    if (code < 0 || code >= n) { w->bad = 1; amk__sb_puts(&w->sb, "null"); return; }
    amk__jw_str(w, names[code]);
}

/* An id that must lie in [0, n). */
AMK__FN void amk__jw_ref(amk__jw *w, int64_t id, int64_t n) {
    if (id < 0 || id >= n) w->bad = 1;
    amk__jw_i64(w, id);
}

AMK__FN void amk__jw_key(amk__jw *w, const char *key) {
    amk__jw_str(w, key);
    amk__sb_puts(&w->sb, ": ");
}

/* A stored meta value, re-read so the file always holds canonical JSON. */
AMK__FN void amk__jw_meta_value(amk__jw *w, const char *json) {
    amk__jdoc doc;
    if (!json || amk__json_parse(json, strlen(json), AMK_JSON_MAX_DEPTH, &doc, NULL) != AMK_OK) {
        w->bad = 1;
        amk__sb_puts(&w->sb, "null");
        return;
    }
    amk__json_put_value_sep(&w->sb, doc.root, 1);
    amk__json_free(&doc);
}

AMK__FN void amk__jw_target(amk__jw *w, const amk_target *t) {
    int k;
    amk__sb_putc(&w->sb, '{');
    for (k = 0; k < AMK__JT_COUNT; k++) {
        const amk__jfield *f = &amk__jl_target_fields[k];
        const char *src = (const char *)t + f->offset;
        if (k) amk__sb_puts(&w->sb, ", ");
        amk__jw_key(w, f->name);
        switch (f->type) {
        case 's':
            if (!memchr(src, 0, f->size)) { w->bad = 1; amk__sb_puts(&w->sb, "\"\""); }
            else amk__jw_str(w, src);
            break;
        case 'i': amk__jw_i64(w, *(const int *)(const void *)src); break;
        case 'l': amk__jw_i64(w, *(const int64_t *)(const void *)src); break;
        case 'f': amk__jw_real(w, *(const double *)(const void *)src); break;
        default: amk__sb_puts(&w->sb, *(const int *)(const void *)src ? "true" : "false"); break;
        }
    }
    amk__sb_putc(&w->sb, '}');
}

AMK__FN void amk__jw_buffer(amk__jw *w, const amk_buffer *b, int id) {
    int k;
    amk__sb_printf(&w->sb, "{\"id\": %d, \"name\": ", id);
    amk__jw_str(w, b->name);
    amk__sb_puts(&w->sb, ", \"kind\": ");
    amk__jw_enum(w, amk__kind_names, AMK_KIND_COUNT, b->kind);
    amk__sb_puts(&w->sb, ", \"dtype\": ");
    amk__jw_enum(w, amk__dtype_names, AMK_DTYPE_COUNT, b->dtype);
    amk__sb_puts(&w->sb, ", \"shape\": [");
    if (b->rank < 0 || b->rank > AMK_MAX_RANK || amk__buffer_nbytes(b) < 0) w->bad = 1;
    for (k = 0; k < b->rank && k < AMK_MAX_RANK; k++) {
        if (k) amk__sb_puts(&w->sb, ", ");
        amk__jw_i64(w, b->shape[k]);
    }
    amk__sb_puts(&w->sb, "], \"space\": ");
    amk__jw_enum(w, amk__space_names, AMK_SPACE_COUNT, b->space);
    amk__sb_puts(&w->sb, ", \"source\": ");
    if (b->source) amk__jw_str(w, b->source);
    else amk__sb_puts(&w->sb, "null");
    amk__sb_putc(&w->sb, '}');
}

AMK__FN void amk__jw_task(amk__jw *w, const amk_program *p, const amk_task *t) {
    int k;
    amk__sb_printf(&w->sb, "{\"id\": %d, \"op\": ", t->id);
    if (amk_op_spec_get(t->op)) amk__jw_str(w, amk_op_name(t->op));
    else if (t->op_name) amk__jw_str(w, t->op_name);
    else { w->bad = 1; amk__sb_puts(&w->sb, "null"); }
    amk__sb_puts(&w->sb, ", \"inputs\": [");
    for (k = 0; k < t->n_inputs; k++) {
        if (k) amk__sb_puts(&w->sb, ", ");
        amk__jw_ref(w, t->inputs[k], p->n_buffers);
    }
    amk__sb_puts(&w->sb, "], \"outputs\": [");
    for (k = 0; k < t->n_outputs; k++) {
        if (k) amk__sb_puts(&w->sb, ", ");
        amk__jw_ref(w, t->outputs[k], p->n_buffers);
    }
    amk__sb_puts(&w->sb, "], \"out_counter\": ");
    amk__jw_ref(w, t->out_counter, p->n_counters);
    amk__sb_puts(&w->sb, ", \"waits\": [");
    for (k = 0; k < t->n_waits; k++) {
        amk__sb_puts(&w->sb, k ? ", {\"counter\": " : "{\"counter\": ");
        amk__jw_ref(w, t->waits[k].counter, p->n_counters);
        amk__sb_printf(&w->sb, ", \"threshold\": %lld}", (long long)t->waits[k].threshold);
    }
    amk__sb_puts(&w->sb, "], \"params\": {");
    for (k = 0; k < t->n_params; k++) {
        const amk_param *pr = &t->params[k];
        if (k) amk__sb_puts(&w->sb, ", ");
        amk__jw_key(w, pr->key);
        switch (pr->type) {
        case AMK_PARAM_INT: amk__jw_i64(w, pr->i); break;
        case AMK_PARAM_REAL: amk__jw_real(w, pr->f); break;
        case AMK_PARAM_BOOL: amk__sb_puts(&w->sb, pr->i ? "true" : "false"); break;
        case AMK_PARAM_STRING: amk__jw_str(w, pr->s); break;
        case AMK_PARAM_NULL: amk__sb_puts(&w->sb, "null"); break;
        default: w->bad = 1; amk__sb_puts(&w->sb, "null"); break;
        }
    }
    amk__sb_puts(&w->sb, "}, \"sm\": ");
    if (t->sm == -1) amk__sb_puts(&w->sb, "null");
    else amk__jw_ref(w, t->sm, (int64_t)INT_MAX + 1);
    if (t->est_bytes < 0 || t->est_flops < 0) w->bad = 1;
    amk__sb_printf(&w->sb, ", \"est_bytes\": %lld, \"est_flops\": %lld, \"label\": ", (long long)t->est_bytes,
                   (long long)t->est_flops);
    amk__jw_str(w, t->label);
    amk__sb_putc(&w->sb, '}');
}

AMK__FN void amk__jw_pages(amk__jw *w, const amk_program *p) {
    int i, first = 1;
    amk__sb_puts(&w->sb, "{\n    \"buffer_to_page\": {");
    for (i = 0; i < p->n_buffers && p->buffer_page; i++) {
        if (p->buffer_page[i] == -1) continue;
        amk__sb_printf(&w->sb, "%s\"%d\": ", first ? "" : ", ", i);
        amk__jw_ref(w, p->buffer_page[i], p->n_pages);
        first = 0;
    }
    amk__sb_puts(&w->sb, "},\n    \"pages\": [");
    for (i = 0; i < p->n_pages; i++) {
        const amk_page *pg = &p->pages[i];
        amk__sb_printf(&w->sb, "%s\n      {\"id\": %d, \"space\": ", i ? "," : "", i);
        amk__jw_enum(w, amk__space_names, AMK_SPACE_COUNT, pg->space);
        if (pg->nbytes < 0 || pg->live_start < -1 || pg->live_end < -1) w->bad = 1;
        amk__sb_printf(&w->sb, ", \"nbytes\": %lld, \"live_start\": %lld, \"live_end\": %lld}", (long long)pg->nbytes,
                       (long long)pg->live_start, (long long)pg->live_end);
    }
    amk__sb_puts(&w->sb, p->n_pages ? "\n    ]\n  }" : "]\n  }");
}

AMK__FN void amk__jw_config(amk__jw *w, const amk_config *c) {
    int i, j;
    amk__sb_puts(&w->sb, "{\n    \"tiling\": {");
    for (i = 0; i < c->n_tiling; i++) {
        if (i) amk__sb_puts(&w->sb, ", ");
        amk__jw_key(w, c->tiling[i].archetype);
        amk__sb_putc(&w->sb, '{');
        for (j = 0; j < c->tiling[i].n_items; j++) {
            if (j) amk__sb_puts(&w->sb, ", ");
            amk__jw_key(w, c->tiling[i].items[j].key);
            amk__jw_i64(w, c->tiling[i].items[j].value);
        }
        amk__sb_putc(&w->sb, '}');
    }
    amk__sb_puts(&w->sb, "},\n    \"fusion_grouping\": [");
    for (i = 0; i < c->n_fusion; i++) {
        amk__sb_puts(&w->sb, i ? ", [" : "[");
        for (j = 0; j < c->fusion[i].n_names; j++) {
            if (j) amk__sb_puts(&w->sb, ", ");
            amk__jw_str(w, c->fusion[i].names[j]);
        }
        amk__sb_putc(&w->sb, ']');
    }
    amk__sb_puts(&w->sb, "],\n    \"sm_assignment\": ");
    if (c->sm_assignment == AMK_SM_LOAD_BALANCE) amk__sb_puts(&w->sb, "\"load_balance\"");
    else if (c->sm_assignment == AMK_SM_ROUND_ROBIN) amk__sb_puts(&w->sb, "\"round_robin\"");
    else if (c->sm_assignment == AMK_SM_EXPLICIT) {
        amk__sb_putc(&w->sb, '{');
        for (i = 0; i < c->n_explicit; i++) {
            if (c->explicit_task[i] < 0 || c->explicit_sm[i] < 0) w->bad = 1;
            amk__sb_printf(&w->sb, "%s\"%d\": %d", i ? ", " : "", c->explicit_task[i], c->explicit_sm[i]);
        }
        amk__sb_putc(&w->sb, '}');
    } else {
        w->bad = 1;
        amk__sb_puts(&w->sb, "null");
    }
    amk__sb_printf(&w->sb, ",\n    \"pipelining_depth\": %d,\n    \"page_allocation\": ", c->pipelining_depth);
    amk__jw_enum(w, amk__jl_page_alloc_names, 3, (int)c->page_allocation);
    amk__sb_printf(&w->sb, ",\n    \"threads_per_block\": %d,\n    \"smem_bytes_per_block\": %lld\n  }",
                   c->threads_per_block, (long long)c->smem_bytes_per_block);
}

AMK_API amk_result amk_program_write_json(const amk_program *p, char **out, size_t *out_len) {
    amk__jw w;
    amk__word *ids;
    int i;
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!p || !out) return AMK_ERR_INVALID_ARG;
    memset(&w, 0, sizeof w);
    amk__sb_puts(&w.sb, "{\n  \"ir_version\": \"" AMK_IR_VERSION "\",\n  \"abi_version\": \"" AMK_ABI_VERSION
                        "\",\n  \"meta\": {");
    for (i = 0; i < p->n_meta; i++) {
        if (i) amk__sb_puts(&w.sb, ", ");
        amk__jw_key(&w, p->meta[i].key);
        amk__jw_meta_value(&w, p->meta[i].json);
    }
    amk__sb_puts(&w.sb, "},\n  \"target\": ");
    if (p->has_target) amk__jw_target(&w, &p->target);
    else amk__sb_puts(&w.sb, "null");
    amk__sb_puts(&w.sb, ",\n  \"buffers\": [");
    for (i = 0; i < p->n_buffers; i++) {
        amk__sb_puts(&w.sb, i ? ",\n    " : "\n    ");
        amk__jw_buffer(&w, &p->buffers[i], i);
    }
    amk__sb_puts(&w.sb, p->n_buffers ? "\n  ],\n  \"counters\": [" : "],\n  \"counters\": [");
    for (i = 0; i < p->n_counters; i++) {
        const amk_counter *c = &p->counters[i];
        if (c->init < 0 || c->init > 4294967295LL) w.bad = 1;
        amk__sb_printf(&w.sb, "%s{\"id\": %d, \"init\": %lld, \"note\": ", i ? ",\n    " : "\n    ", i,
                       (long long)c->init);
        amk__jw_str(&w, c->note);
        amk__sb_putc(&w.sb, '}');
    }
    amk__sb_puts(&w.sb, p->n_counters ? "\n  ],\n  \"tasks\": [" : "],\n  \"tasks\": [");
    /* task ids must be unique and in [0, n_tasks) to load again */
    ids = (amk__word *)amk__calloc(AMK__WORDS(p->n_tasks) + 1, sizeof(amk__word));
    if (!ids) { amk__sb_free(&w.sb); return AMK_ERR_OUT_OF_MEMORY; }
    for (i = 0; i < p->n_tasks; i++) {
        const amk_task *t = &p->tasks[i];
        if (t->id < 0 || t->id >= p->n_tasks || amk__bit_get(ids, (size_t)t->id)) w.bad = 1;
        else amk__bit_set(ids, (size_t)t->id);
        amk__sb_puts(&w.sb, i ? ",\n    " : "\n    ");
        amk__jw_task(&w, p, t);
    }
    amk__free(ids);
    amk__sb_puts(&w.sb, p->n_tasks ? "\n  ],\n  \"pages\": " : "],\n  \"pages\": ");
    if (p->has_pages) amk__jw_pages(&w, p);
    else amk__sb_puts(&w.sb, "null");
    amk__sb_puts(&w.sb, ",\n  \"config\": ");
    if (p->has_config) amk__jw_config(&w, &p->config);
    else amk__sb_puts(&w.sb, "null");
    amk__sb_puts(&w.sb, "\n}\n");
    if (w.sb.oom) { amk__sb_free(&w.sb); return AMK_ERR_OUT_OF_MEMORY; }
    if (w.bad) { amk__sb_free(&w.sb); return AMK_ERR_INVALID_ARG; }
    if (out_len) *out_len = w.sb.len;
    *out = w.sb.p;
    return AMK_OK;
}

AMK_API amk_result amk_program_save(const amk_program *p, const char *path, amk_diag *d) {
    char *text;
    size_t len;
    amk_result r;
    amk_diag_clear(d);
    if (!p || !path) return amk__fail(d, AMK_ERR_INVALID_ARG, "amk_program_save: NULL argument");
    r = amk_program_write_json(p, &text, &len);
    if (r == AMK_ERR_INVALID_ARG)
        return amk__fail(d, r, "the program holds a value the JSON format cannot express or would not load "
                               "(a dangling id, an unnamed enum code, a non-finite real or invalid UTF-8)");
    if (r != AMK_OK) return amk__fail(d, r, "out of memory writing the program");
    r = amk__write_file(path, text, len, d);
    amk__free(text);
    return r;
}

#endif /* AMK_IMPLEMENTATION */

/* MIT License, Copyright (c) 2026 the AMK authors: the text is at the end of amk.h. */

/* amk_validate.h - AMK's IR layer, part 2: checking and lowering. Part of AMK (amk.h has the
   library's manual).

   WHAT IT DOES
     - What each opcode accepts (amk__op_check): the preconditions every op shares (references,
       arity, param types), then the op's check function from the op table (shapes, dtypes,
       param values). The validator, the reference VM and the CUDA runtime all ask it.
     - amk_program_validate (spec §3 and IR_SPEC_NOTES): passes that record every failure with a
       stable check id (AMK_CHECKS) and the task, buffer or counter concerned; deadlock freedom by
       counter simulation (spec §3.4), race freedom by happens-before over the written regions
       (the op table's write and region columns: accumulating writers commute, disjoint tiles of
       one output may share a counter).
     - amk_program_lower (spec §5): a ScheduleConfig realised on a target: SM assignment, per-SM
       queue order, page allocation; the result validated.
   WHAT IT DOES NOT DO
     Run a program, or choose a device form (the CUDA runtime does, amk_cuda.h).
   CONTENTS
     declarations >>validate >>lower | implementation >>impl_opshape >>impl_validate >>impl_lower */
#ifndef AMK_VALIDATE_H
#define AMK_VALIDATE_H

#include "amk_program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== >>validate: spec §3 and IR_SPEC_NOTES =================================================== */

/* Every check, with its stable id and severity (E = error, W = warning). Tests assert these ids. */
#define AMK_CHECKS(X) \
    X(REF_BUFFER,          'E', "a task names a buffer id that does not exist") \
    X(REF_COUNTER,         'E', "a task names a counter id that does not exist") \
    X(OP_UNKNOWN,          'E', "the opcode is not in the registry") \
    X(OP_ARITY,            'E', "input or output count outside the opcode's registry arity") \
    X(OP_UNSUPPORTED,      'E', "a form of the opcode this implementation does not run") \
    X(ABI_CAP,             'E', "more inputs, outputs or waits than the ABI holds (8/4/8)") \
    X(PARAM_MISSING,       'E', "a required param of the opcode is missing") \
    X(PARAM_TYPE,          'E', "a known param has the wrong type (int32 or real)") \
    X(PARAM_VALUE,         'E', "a param value is out of its range") \
    X(PARAM_UNKNOWN,       'W', "a param key no opcode knows (it will not marshal)") \
    X(BUFFER_SHAPE,        'E', "a buffer shape is negative, too large, or of rank > 4") \
    X(BUFFER_ENUM,         'E', "a buffer kind, dtype or space code is out of range") \
    X(OP_SHAPE,            'E', "buffer shapes do not fit the opcode") \
    X(OP_DTYPE,            'E', "a buffer dtype cannot serve the opcode") \
    X(COUNTER_INIT,        'E', "a counter init is not 0") \
    X(TASK_ID,             'E', "task ids are not unique") \
    X(WAIT_UNSATISFIABLE,  'E', "a wait threshold is < 1 or above the counter's producer count") \
    X(WAIT_PARTIAL_JOIN,   'E', "a wait on a shared counter does not wait for all producers") \
    X(WAIT_SELF,           'E', "a task waits on its own out_counter") \
    X(CYCLE,               'E', "the producer-consumer graph has a cycle") \
    X(SM_RANGE,            'E', "an assigned SM is outside [0, target.num_sms)") \
    X(SM_MIXED,            'W', "some tasks have an SM and others do not (the GPU needs lowering first)") \
    X(SM_QUEUE_ORDER,      'E', "a task precedes its own producer in one SM's queue") \
    X(SM_QUEUE_DEADLOCK,   'E', "queue order plus dependencies form a cycle across SMs") \
    X(RACE_READ,           'E', "a read is not ordered after every writer of the buffer") \
    X(READ_UNWRITTEN,      'E', "a transient buffer is read but nothing writes it") \
    X(RACE_KV,             'E', "a KV cache is read unordered with its KV_APPEND") \
    X(RACE_WAW,            'E', "two writers of one buffer may clobber each other") \
    X(WRITE_READONLY,      'E', "a task writes a WEIGHT, CONST or IO_INPUT buffer") \
    X(ONCHIP_SM,           'E', "an SMEM/REGISTER buffer is used on more than one SM") \
    X(ONCHIP_UNASSIGNED,   'W', "an SMEM/REGISTER buffer is used by tasks not yet on an SM") \
    X(PAGE_REF,            'E', "the page table names a missing page or buffer, or a buffer not an activation") \
    X(PAGE_ALIAS,          'E', "two buffers share a page with unordered live ranges") \
    X(OUTPUT_UNREACHED,    'E', "an IO_OUTPUT buffer is never written") \
    X(CONFIG_VALUE,        'E', "a ScheduleConfig value is out of range for the target") \
    X(NAME_DUP,            'W', "two buffers share a name (binding by name is ambiguous)") \
    X(GPU_LABEL,           'W', "meta.gpu differs from target.name") \
    X(OP_LENIENT,          'W', "a form the spec's reference accepts that AMK runs with a caveat") \
    X(PAGE_MISMATCH,       'W', "a buffer's space or size differs from its page's") \
    X(BUILD_ERROR,         'E', "a builder call failed, so the program is incomplete")

typedef enum amk_check {
#define AMK__CHECK_ENUM(id, sev, msg) AMK_CHECK_##id,
    AMK_CHECKS(AMK__CHECK_ENUM)
#undef AMK__CHECK_ENUM
    AMK_CHECK_COUNT
} amk_check;

AMK_API const char *amk_check_id(amk_check c);          /* "RACE_READ" */
AMK_API const char *amk_check_description(amk_check c);
AMK_API int amk_check_is_error(amk_check c);

typedef struct amk_issue {
    amk_check check;
    int is_error;     /* 1 error, 0 warning */
    int task;         /* task index or -1 */
    int buffer;       /* buffer id or -1 */
    int counter;      /* counter id or -1 */
    char message[256];
} amk_issue;

typedef struct amk_report {
    amk_issue *items; int n_items, cap_items;
    int n_errors, n_warnings;
    int truncated;          /* 1 if more issues were found than were kept */
} amk_report;

/* Checks everything of spec §3 and IR_SPEC_NOTES, records every failure and continues. Returns
   AMK_OK when accepted (warnings allowed), AMK_ERR_REJECTED when any error was found,
   AMK_ERR_OUT_OF_MEMORY if it could not finish. report may be NULL; else free it with
   amk_report_free. Never aborts on a malformed program. */
AMK_API amk_result amk_program_validate(const amk_program *p, amk_report *report);
AMK_API void amk_report_free(amk_report *r);
/* Writes the report as one line per issue ("error RACE_READ task 3 'x': ...") into buf. */
AMK_API void amk_report_format_issue(const amk_program *p, const amk_issue *is, char *buf,
                                     size_t size);

/* Static counter simulation (spec §3.4): fires tasks in list order whenever ready. order gets the
   fired task indices (may be NULL), stuck gets the tasks never fired (may be NULL); both sized
   n_tasks. Returns AMK_OK if all fired, AMK_ERR_STUCK otherwise. */
AMK_API amk_result amk_program_simulate(const amk_program *p, int *order, int *n_fired,
                                        int *stuck, int *n_stuck);
/* Adversarial simulation: n_orders random interleavings of ready tasks (seeded), each checked so
   every transient read follows its writers. Returns the number of violations found (0 = none),
   or -1 on out of memory; the first is described in d. */
AMK_API int amk_program_simulate_adversarial(const amk_program *p, uint64_t seed, int n_orders,
                                             amk_diag *d);

/* Longest dependency chain in tasks (0 for an empty or cyclic program). */
AMK_API int amk_program_critical_path(const amk_program *p);

/* ==== >>lower: ScheduleConfig -> assigned, ordered, paged program ============================= */

/* Lowers p in place for target t under config c: assigns every task an SM, reorders the task list
   into a stable topological order (so every per-SM queue is a linear extension of the DAG),
   allocates pages for activations, stores c and t in p. It validates p once, before it lowers
   (every check but a schedule's), and checks the schedule it made after (SMs, queues, on-chip
   buffers, pages; lowering changes nothing else). Returns AMK_ERR_REJECTED (with the first error
   in d) if either fails; after the second, p is lowered but unusable. */
AMK_API amk_result amk_program_lower(amk_program *p, const amk_config *c, const amk_target *t,
                                     amk_diag *d);
/* amk_program_lower with n_pins tasks pinned: task id pin_task[i] on SM pin_sm[i], the others
   where c's sm_assignment puts them (weighing every task as it would without the pins). The
   lowered program's config records the whole assignment as explicit, so lowering it again
   reproduces it. What a builder that steers some tasks onto SMs of its choosing (amk_arch.h)
   lowers with, in one pass. AMK_ERR_INVALID_ARG for a pin naming no task, a task twice or an SM
   outside the target. */
AMK_API amk_result amk_program_lower_pinned(amk_program *p, const amk_config *c, const amk_target *t, int n_pins,
                                            const int *pin_task, const int *pin_sm, amk_diag *d);


#ifdef __cplusplus
}
#endif
#endif /* AMK_VALIDATE_H */

#if defined(AMK_IMPLEMENTATION) && !defined(AMK_VALIDATE_IMPLEMENTATION_DONE)
#define AMK_VALIDATE_IMPLEMENTATION_DONE
/* ---- checks table ------------------------------------------------------------------------------ */

static const char *const amk__check_ids[AMK_CHECK_COUNT] = {
#define AMK__CK(id, sev, msg) #id,
    AMK_CHECKS(AMK__CK)
#undef AMK__CK
};
static const char amk__check_sev[AMK_CHECK_COUNT] = {
#define AMK__CK(id, sev, msg) sev,
    AMK_CHECKS(AMK__CK)
#undef AMK__CK
};
static const char *const amk__check_msgs[AMK_CHECK_COUNT] = {
#define AMK__CK(id, sev, msg) msg,
    AMK_CHECKS(AMK__CK)
#undef AMK__CK
};
AMK_API const char *amk_check_id(amk_check c) { return (int)c >= 0 && c < AMK_CHECK_COUNT ? amk__check_ids[c] : "?"; }
AMK_API const char *amk_check_description(amk_check c) { return (int)c >= 0 && c < AMK_CHECK_COUNT ? amk__check_msgs[c] : "?"; }
AMK_API int amk_check_is_error(amk_check c) { return (int)c >= 0 && c < AMK_CHECK_COUNT && amk__check_sev[c] == 'E'; }

/* ==== >>impl_opshape: what each opcode accepts (shared by validate and the reference VM) ===== */
/* (part of amk.h's implementation; included once from amk.h)

   One place defines which buffers (shapes, dtypes) and param values each opcode accepts, so the
   validator and the reference VM can never disagree. Buffers are flat row-major arrays of numel
   elements; "last dim" is shape[rank-1] (1 for a rank-0 scalar). Params are read with their
   marshalled defaults (amk_task_marshal_params), exactly what the device sees. */

typedef struct amk__opshape {
    amk_check *which;
    char *msg;
    size_t msg_size;
    const char *op; /* opcode name, the prefix of every message */
    /* the task being checked, its buffers and element counts, its marshalled params */
    const amk_task *t;
    const amk_buffer *in[AMK_MAX_INPUTS], *out, *out2; /* out2: the second output, or NULL */
    int64_t n_in[AMK_MAX_INPUTS], n_out, n_out2;
    int ni;    /* t's input count */
    int quant; /* a GEMV/GEMM tile with qdtype (the weight-only quantized form, 4 inputs) */
    amk_params_t P;
} amk__opshape;

/* Records check c and "OP: message" in the caller's slots; returns 0 (the "rejected" value). */
AMK__FN int amk__opshape_fail(const amk__opshape *c, amk_check check, const char *fmt, ...) {
    int n;
    va_list ap;
    if (c->which) *c->which = check;
    if (!c->msg || !c->msg_size) return 0;
    n = snprintf(c->msg, c->msg_size, "%s: ", c->op);
    if (n < 0 || (size_t)n >= c->msg_size) return 0;
    va_start(ap, fmt);
    vsnprintf(c->msg + n, c->msg_size - (size_t)n, fmt, ap);
    va_end(ap);
    return 0;
}

AMK__FN const char *amk__opshape_name(const amk_buffer *b) { return b->name ? b->name : "?"; }
AMK__FN int64_t amk__opshape_last(const amk_buffer *b) { return b->rank ? b->shape[b->rank - 1] : 1; }
/* Token ids and positions: integer dtypes that hold a plain index. */
AMK__FN int amk__opshape_is_index(int dt) {
    return dt == AMK_DTYPE_I32 || dt == AMK_DTYPE_I8 || dt == AMK_DTYPE_U8;
}
/* Token ids and positions of the spec's EMBED and ROPE: an index dtype, or a float one, which the
   reference implementation truncates to an integer (amk__op_caveat warns). */
AMK__FN int amk__opshape_is_index_or_float(int dt) {
    return amk__opshape_is_index(dt) || amk_dtype_is_float(dt);
}
/* The batch of a KV cache: shape[0] of a rank-4 cache [B, max_seq, n_kv_heads, head_dim] (at
   least 1), else 1. */
AMK__FN int64_t amk__opshape_batch(const amk_buffer *cache) {
    return cache->rank == 4 && cache->shape[0] > 1 ? cache->shape[0] : 1;
}
/* A real param that converts to a finite float. */
AMK__FN int amk__opshape_finite(double v) { return v == v && fabs(v) <= (double)FLT_MAX; }

/* The output of an accumulating op (RMSNORM_MLP, ATTENTION_O), out [M, H] of n_out elements: F32
   (the device adds with F32 atomics) in a kind written during a launch; resid (the op's last input
   when it takes one, or NULL), n_resid elements, a float of out's size. 0 and the failure in c. */
AMK__FN int amk__opshape_accum_out(const amk__opshape *c, const amk_buffer *out, int64_t n_out, int64_t M, int64_t H,
                                   const amk_buffer *resid, int64_t n_resid) {
    int64_t mh;
    if (out->dtype != AMK_DTYPE_F32)
        return amk__opshape_fail(c, AMK_CHECK_OP_DTYPE, "out '%s' accumulates, so it must be F32, not %s",
                                 amk__opshape_name(out), amk_dtype_name(out->dtype));
    if (out->kind != AMK_KIND_ACTIVATION && out->kind != AMK_KIND_IO_OUTPUT)
        return amk__opshape_fail(c, AMK_CHECK_OP_UNSUPPORTED, "out '%s' accumulates, so it must be an "
                                 "ACTIVATION or IO_OUTPUT", amk__opshape_name(out));
    if (!amk__mul_i64(M, H, &mh) || n_out != mh || amk__opshape_last(out) != H)
        return amk__opshape_fail(c, AMK_CHECK_OP_SHAPE, "out '%s' has %lld elements, needs [M, H] = [%lld, %lld]",
                                 amk__opshape_name(out), (long long)n_out, (long long)M, (long long)H);
    if (resid && (n_resid != mh || !amk_dtype_is_float(resid->dtype)))
        return amk__opshape_fail(c, AMK_CHECK_OP_SHAPE, "resid '%s' must be float with %lld elements (out's)",
                                 amk__opshape_name(resid), (long long)mh);
    return 1;
}

/* RoPE's frequency params (ROPE, RMSNORM_GEMV_ROPE and _ROPE_KV, ATTENTION_O_PRENORM): 0 and the failure in c. */
AMK__FN int amk__opshape_rope(const amk__opshape *c, const amk_task *t, const amk_params_t *P) {
    double theta = amk__param_f(t, "theta", 10000.0), factor = amk__param_f(t, "rope_factor", 0.0);
    double lo = amk__param_f(t, "rope_low_freq_factor", 1.0);
    double hi = amk__param_f(t, "rope_high_freq_factor", 4.0);
    if (!amk__opshape_finite(theta) || theta <= 0)
        return amk__opshape_fail(c, AMK_CHECK_PARAM_VALUE, "theta = %g must be finite and > 0", theta);
    if (!amk__opshape_finite(factor))
        return amk__opshape_fail(c, AMK_CHECK_PARAM_VALUE, "rope_factor = %g must be finite", factor);
    if (P->rope_type < AMK_ROPE_DEFAULT || P->rope_type > AMK_ROPE_YARN)
        return amk__opshape_fail(c, AMK_CHECK_PARAM_VALUE, "rope_type = %d is none of 0 (default, llama3), "
                                 "1 (linear), 2 (yarn)", P->rope_type);
    if (P->rope_type != AMK_ROPE_DEFAULT && !(factor > 0))
        return amk__opshape_fail(c, AMK_CHECK_PARAM_VALUE, "rope_type %d needs rope_factor = %g > 0",
                                 P->rope_type, factor);
    if (P->rope_type != AMK_ROPE_LINEAR && factor > 0 &&
        (P->rope_orig_ctx < 1 || !amk__opshape_finite(lo) || !amk__opshape_finite(hi) || !(lo > 0) || !(lo < hi)))
        return amk__opshape_fail(c, AMK_CHECK_PARAM_VALUE, "%s scaling needs rope_orig_ctx = %d >= 1 "
                                 "and 0 < low_freq_factor = %g < high_freq_factor = %g",
                                 P->rope_type == AMK_ROPE_YARN ? "yarn" : "llama3", P->rope_orig_ctx, lo, hi);
    return 1;
}

/* A GEMV-family tile's output out [M, N_out] (n_out elements) holds its columns [n_off, end). */
AMK__FN int amk__opshape_tile_out(const amk__opshape *c, const amk_buffer *out, int64_t n_out, int64_t M,
                                  int64_t end) {
    int64_t last = amk__opshape_last(out), v;
    if (last < end)
        return amk__opshape_fail(c, AMK_CHECK_OP_SHAPE, "out '%s' last dim %lld < n_off+N_tile = %lld",
                                 amk__opshape_name(out), (long long)last, (long long)end);
    if (!amk__mul_i64(M, last, &v) || n_out != v)
        return amk__opshape_fail(c, AMK_CHECK_OP_SHAPE, "out '%s' has %lld elements, M*N_out = %lld*%lld",
                                 amk__opshape_name(out), (long long)n_out, (long long)M, (long long)last);
    return 1;
}

/* An argmax partials buffer out [rows, 2P] (n_out elements, F32) that holds the pair `part`
   (ARGMAX_PARTIAL's output, RMSNORM_GEMV_ARGMAX's second). */
AMK__FN int amk__opshape_pairs_out(const amk__opshape *c, const amk_buffer *out, int64_t n_out, int64_t rows,
                                   int part) {
    const int64_t W = amk__opshape_last(out);
    if (out->dtype != AMK_DTYPE_F32)
        return amk__opshape_fail(c, AMK_CHECK_OP_DTYPE, "partials '%s' must be F32, not %s", amk__opshape_name(out),
                                 amk_dtype_name(out->dtype));
    if (out->rank < 1 || W < 2 || W % 2 || n_out / W != rows)
        return amk__opshape_fail(c, AMK_CHECK_OP_SHAPE, "partials '%s' needs one row per logits row (%lld) of an "
                                 "even number of columns, got %lld elements", amk__opshape_name(out),
                                 (long long)rows, (long long)n_out);
    if (part < 0 || 2 * (int64_t)part + 2 > W)
        return amk__opshape_fail(c, AMK_CHECK_PARAM_VALUE, "part = %d is not one of the %lld pairs of '%s'", part,
                                 (long long)(W / 2), amk__opshape_name(out));
    return 1;
}

/* Records the failure in c's slots and returns 0 from the check function. */
#define AMK__OPS_FAIL(check, ...) return amk__opshape_fail(c, AMK_CHECK_##check, __VA_ARGS__)

/* NOP */
AMK__FN int amk__check_nop(const amk__opshape *c) {
    AMK__UNUSED(c);
    return 1;
}

/* GELU (and COPY's first check) */
AMK__FN int amk__check_same(const amk__opshape *c) {
    if (c->n_out != c->n_in[0])
        AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, x '%s' has %lld",
                      amk__opshape_name(c->out), (long long)c->n_out, amk__opshape_name(c->in[0]),
                      (long long)c->n_in[0]);
    return 1;
}

/* EMBED: ids select rows of the table [V, ...] (a row: numel/V elements), written one after another
   in out, whatever out's shape. The row length is the table's, not `hidden`: the reference
   implementation gathers with index_select and views the result as out, and its lowering reshapes a
   flat [1, n*d] activation into n rows of d that way (ids [0], hidden = d). `hidden` is not read.
   With M_tile (an AMK prefill chunk's embedding spread over the SMs): ids [m_off, m_off+M_tile)
   into the same rows of out, whose first axis is then one row an id (amk__check_rows). */
AMK__FN int amk__check_rows(const amk__opshape *c, int64_t row); /* below */
AMK__FN int amk__check_embed(const amk__opshape *c) {
    int64_t v, R;
    const amk_buffer *tab = c->in[1];
    if (!amk__opshape_is_index_or_float(c->in[0]->dtype))
        AMK__OPS_FAIL(OP_DTYPE, "ids '%s' must be I32, I8, U8 or a float dtype, not %s",
                      amk__opshape_name(c->in[0]), amk_dtype_name(c->in[0]->dtype));
    if (tab->rank < 1 || tab->shape[0] < 1)
        AMK__OPS_FAIL(OP_SHAPE, "table '%s' must be [V, ...] with V >= 1", amk__opshape_name(tab));
    R = c->n_in[1] / tab->shape[0];
    if (amk_dtype_is_block(tab->dtype) && R % amk_dtype_block(tab->dtype, NULL))
        AMK__OPS_FAIL(OP_SHAPE, "table '%s' is %s: its rows of %lld elements must be whole blocks of %d",
                      amk__opshape_name(tab), amk_dtype_name(tab->dtype), (long long)R,
                      amk_dtype_block(tab->dtype, NULL));
    if (!amk__mul_i64(c->n_in[0], R, &v) || c->n_out != v)
        AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, ids*row = %lld*%lld (table '%s' rows of %lld)",
                      amk__opshape_name(c->out), (long long)c->n_out, (long long)c->n_in[0], (long long)R,
                      amk__opshape_name(tab), (long long)R);
    if (amk_task_param(c->t, "M_tile") && (c->out->rank < 1 || c->out->shape[0] != c->n_in[0]))
        AMK__OPS_FAIL(OP_SHAPE, "out '%s': with M_tile its first axis must be one row an id (%lld ids)",
                      amk__opshape_name(c->out), (long long)c->n_in[0]);
    return amk__check_rows(c, R);
}

/* ADD, SILU_MUL, ALLREDUCE_SHARD, RMSNORM, COPY and EMBED with the params M_tile (and m_off, default
   0): rows [m_off, m_off+M_tile) of the output's first axis, a row being numel / shape[0] elements
   (RMSNORM: one row of hidden; EMBED: one id's row of the table). Other ops take no rows (m_off, M_tile are other ops' params). 1
   when c's task is well formed so (or has neither param). */
AMK__FN int amk__check_rows(const amk__opshape *c, int64_t row) {
    const amk_param *moff = amk_task_param(c->t, "m_off"), *mw = amk_task_param(c->t, "M_tile");
    const int op = c->t->op;
    int64_t rows;
    if (!mw && !moff) return 1;
    if (op != AMK_OP_ADD && op != AMK_OP_SILU_MUL && op != AMK_OP_ALLREDUCE_SHARD && op != AMK_OP_RMSNORM &&
        op != AMK_OP_COPY && op != AMK_OP_EMBED)
        AMK__OPS_FAIL(PARAM_VALUE, "%s", "m_off and M_tile (rows) are ADD's, SILU_MUL's, ALLREDUCE_SHARD's, RMSNORM's, "
                      "COPY's and EMBED's, not this op's");
    if (!mw) AMK__OPS_FAIL(PARAM_VALUE, "%s", "m_off without M_tile");
    if (c->out->rank < 1 || c->out->shape[0] < 1 || c->n_out % c->out->shape[0])
        AMK__OPS_FAIL(OP_SHAPE, "out '%s' has no rows to take", amk__opshape_name(c->out));
    rows = c->out->shape[0];
    if (row > 0 && c->n_out / rows != row)
        AMK__OPS_FAIL(OP_SHAPE, "out '%s': a row of its first axis is %lld elements, not hidden = %lld",
                      amk__opshape_name(c->out), (long long)(c->n_out / rows), (long long)row);
    if (c->P.M_tile < 1 || c->P.m_off < 0 || (int64_t)c->P.m_off + c->P.M_tile > rows)
        AMK__OPS_FAIL(PARAM_VALUE, "rows m_off = %d, M_tile = %d are outside out '%s''s %lld rows", c->P.m_off,
                      c->P.M_tile, amk__opshape_name(c->out), (long long)rows);
    return 1;
}

/* COPY: out = x cast, element for element. x may be a matrix in a block format (a weight
   dequantized, as a prefill chunk's tensor-core tiles read it): out is then F32, BF16 or F16.
   With M_tile, rows [m_off, m_off+M_tile) of out's first axis (amk__check_rows), which for a
   block x must be whole blocks. */
AMK__FN int amk__check_copy(const amk__opshape *c) {
    const int xt = c->in[0]->dtype, ot = c->out->dtype;
    if (!amk__check_same(c)) return 0;
    if (amk_dtype_is_block(xt) && ot != AMK_DTYPE_F32 && ot != AMK_DTYPE_BF16 && ot != AMK_DTYPE_F16)
        AMK__OPS_FAIL(OP_DTYPE, "out '%s' is %s: x '%s' in %s dequantizes to F32, BF16 or F16", amk__opshape_name(c->out),
                      amk_dtype_name(ot), amk__opshape_name(c->in[0]), amk_dtype_name(xt));
    if (!amk__check_rows(c, 0)) return 0;
    if (amk_dtype_is_block(xt) && amk_task_param(c->t, "M_tile") &&
        (c->n_out / c->out->shape[0]) % amk_dtype_block(xt, NULL))
        AMK__OPS_FAIL(OP_SHAPE, "out '%s': a row of %lld elements is not whole blocks of %s (%d elements)",
                      amk__opshape_name(c->out), (long long)(c->n_out / c->out->shape[0]), amk_dtype_name(xt),
                      amk_dtype_block(xt, NULL));
    return 1;
}

/* RMSNORM, LAYERNORM: x is rows of hidden; w (and b) hold k rows of hidden, k dividing x's rows,
   and row r of x takes their row r % k (k = 1: one weight for every row; the reference
   implementation broadcasts a [k, hidden] weight over x [..., k, hidden] so). RMSNORM with M_tile:
   rows [m_off, m_off+M_tile) only (amk__check_rows). */
AMK__FN int amk__check_norm(const amk__opshape *c) {
    int i;
    double eps = amk__param_f(c->t, "eps", 0.0);
    if (c->P.hidden < 1) AMK__OPS_FAIL(PARAM_VALUE, "hidden = %d must be >= 1", c->P.hidden);
    if (c->n_in[0] % c->P.hidden)
        AMK__OPS_FAIL(OP_SHAPE, "x '%s' has %lld elements, not a multiple of hidden = %d",
                      amk__opshape_name(c->in[0]), (long long)c->n_in[0], c->P.hidden);
    for (i = 1; i < c->ni; i++)
        if (c->n_in[i] < c->P.hidden || c->n_in[i] % c->P.hidden ||
            (c->n_in[0] / c->P.hidden) % (c->n_in[i] / c->P.hidden))
            AMK__OPS_FAIL(OP_SHAPE, "%s '%s' has %lld elements; it needs k rows of hidden = %d, k dividing "
                          "x's %lld rows", i == 1 ? "w" : "b", amk__opshape_name(c->in[i]),
                          (long long)c->n_in[i], c->P.hidden, (long long)(c->n_in[0] / c->P.hidden));
    if (c->n_out != c->n_in[0])
        AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, x '%s' has %lld",
                      amk__opshape_name(c->out), (long long)c->n_out, amk__opshape_name(c->in[0]),
                      (long long)c->n_in[0]);
    if (!amk__opshape_finite(eps) || eps < 0)
        AMK__OPS_FAIL(PARAM_VALUE, "eps = %g must be finite and >= 0", eps);
    return amk__check_rows(c, c->P.hidden);
}

/* Param x_q8 (AMK_X_Q8): 0, or 1 on a tile that multiplies x by a matrix in a GGUF block format
   (blk). */
AMK__FN int amk__check_x_q8(const amk__opshape *c, int blk) {
    if (c->P.x_q8 != 0 && (c->P.x_q8 != 1 || !blk))
        AMK__OPS_FAIL(PARAM_VALUE, "x_q8 = %d must be 0, or 1 on a tile whose W is in a GGUF block format", c->P.x_q8);
    return 1;
}

/* GEMM_TILE's K range (k_off, K_tile): absent, or K_tile >= 1 and [k_off, k_off + K_tile) inside
   [0, K), with a float W and no bias (a split-K tile's partial sums are added by another task:
   which of them would take the bias is a choice the program makes there). GEMV_TILE takes none. */
AMK__FN int amk__check_k_range(const amk__opshape *c) {
    const amk_param *ko = amk_task_param(c->t, "k_off"), *kt = amk_task_param(c->t, "K_tile");
    if (!ko && !kt) return 1;
    if (c->t->op != AMK_OP_GEMM_TILE)
        AMK__OPS_FAIL(PARAM_VALUE, "%s", "k_off and K_tile (a K range) are GEMM_TILE's, not this op's");
    if (!kt) AMK__OPS_FAIL(PARAM_VALUE, "%s", "k_off without K_tile");
    if (c->P.K_tile < 1 || c->P.k_off < 0 || (int64_t)c->P.k_off + c->P.K_tile > c->P.K)
        AMK__OPS_FAIL(PARAM_VALUE, "the K range k_off = %d, K_tile = %d is outside [0, K = %d)", c->P.k_off, c->P.K_tile,
                      c->P.K);
    if (c->quant || !amk_dtype_is_float(c->in[1]->dtype))
        AMK__OPS_FAIL(OP_DTYPE, "W '%s' is %s: a K range (K_tile) takes a float W",
                      amk__opshape_name(c->in[1]), c->quant ? "quantized" : amk_dtype_name(c->in[1]->dtype));
    if (c->ni > 2)
        AMK__OPS_FAIL(OP_SHAPE, "%s", "a tile of a K range (K_tile) takes no bias: its sums are partial");
    return 1;
}

/* GEMV_TILE, GEMM_TILE */
AMK__FN int amk__check_gemv(const amk__opshape *c) {
    int64_t v;
    int64_t K = c->P.K, M, N, end;
    const amk_buffer *W = c->in[1];
    if (K < 1) AMK__OPS_FAIL(PARAM_VALUE, "K = %lld must be >= 1", (long long)K);
    if (c->n_in[0] % K || c->n_in[0] / K < 1)
        AMK__OPS_FAIL(OP_SHAPE, "x '%s' has %lld elements, not a positive multiple of K = %lld",
                      amk__opshape_name(c->in[0]), (long long)c->n_in[0], (long long)K);
    M = c->n_in[0] / K;
    if (c->P.n_off < 0 || c->P.N_tile < 1)
        AMK__OPS_FAIL(PARAM_VALUE, "n_off = %d must be >= 0 and N_tile = %d >= 1", c->P.n_off,
                      c->P.N_tile);
    if (c->quant) {
        int64_t group = c->P.group, G;
        if (c->P.qdtype != AMK_DTYPE_I8 && c->P.qdtype != AMK_DTYPE_I4)
            AMK__OPS_FAIL(PARAM_VALUE, "qdtype = %d must be 6 (I8) or 7 (I4)", c->P.qdtype);
        if (c->ni < 3)
            AMK__OPS_FAIL(OP_SHAPE, "the quantized form takes x, qW, scales[, zeros], got %d inputs", c->ni);
        if (c->P.qdtype == AMK_DTYPE_I8 ? W->dtype != AMK_DTYPE_I8
                                     : W->dtype != AMK_DTYPE_I4 && W->dtype != AMK_DTYPE_U8)
            AMK__OPS_FAIL(OP_DTYPE, "qW '%s' is %s, qdtype %d needs %s", amk__opshape_name(W),
                          amk_dtype_name(W->dtype), c->P.qdtype,
                          c->P.qdtype == AMK_DTYPE_I8 ? "I8" : "I4 or U8 (packed)");
        if (W->dtype == AMK_DTYPE_U8) {
            if (W->rank != 2 || K % 2 || W->shape[1] != K / 2)
                AMK__OPS_FAIL(OP_SHAPE, "packed qW '%s' must be U8 [N, K/2] with K = %lld even",
                              amk__opshape_name(W), (long long)K);
        } else if (W->rank != 2 || W->shape[1] != K) {
            AMK__OPS_FAIL(OP_SHAPE, "qW '%s' must be [N, K = %lld]", amk__opshape_name(W),
                          (long long)K);
        }
        N = W->shape[0];
        if (group < 1 || K % group)
            AMK__OPS_FAIL(PARAM_VALUE, "group = %lld must be >= 1 and divide K = %lld",
                          (long long)group, (long long)K);
        G = K / group;
        if (!amk_dtype_is_float(c->in[2]->dtype))
            AMK__OPS_FAIL(OP_DTYPE, "scales '%s' must be a float dtype, not %s",
                          amk__opshape_name(c->in[2]), amk_dtype_name(c->in[2]->dtype));
        if (!amk__mul_i64(N, G, &v) || c->n_in[2] != v)
            AMK__OPS_FAIL(OP_SHAPE, "scales '%s' has %lld elements, N*(K/group) = %lld*%lld",
                          amk__opshape_name(c->in[2]), (long long)c->n_in[2], (long long)N, (long long)G);
        if (c->ni == 4 && c->n_in[3] != c->n_in[2])
            AMK__OPS_FAIL(OP_SHAPE, "zeros '%s' has %lld elements, scales has %lld",
                          amk__opshape_name(c->in[3]), (long long)c->n_in[3], (long long)c->n_in[2]);
    } else {
        if (W->rank != 2 || W->shape[1] != K)
            AMK__OPS_FAIL(OP_SHAPE, "W '%s' must be [N, K = %lld]", amk__opshape_name(W),
                          (long long)K);
        N = W->shape[0];
        if (c->ni == 3 && c->n_in[2] != N)
            AMK__OPS_FAIL(OP_SHAPE, "bias '%s' has %lld elements, W has %lld rows",
                          amk__opshape_name(c->in[2]), (long long)c->n_in[2], (long long)N);
    }
    end = (int64_t)c->P.n_off + c->P.N_tile;
    if (end > N)
        AMK__OPS_FAIL(PARAM_VALUE, "n_off+N_tile = %lld exceeds W rows %lld", (long long)end,
                      (long long)N);
    if (!amk__opshape_tile_out(c, c->out, c->n_out, M, end)) return 0;
    if (!amk__check_x_q8(c, !c->quant && amk_dtype_is_block(W->dtype))) return 0;
    if (!amk__check_k_range(c)) return 0;
    if (c->t->op == AMK_OP_GEMM_TILE) {
        if (c->P.M_tile < 1 || c->P.m_off < 0)
            AMK__OPS_FAIL(PARAM_VALUE, "m_off = %d must be >= 0 and M_tile = %d >= 1", c->P.m_off,
                          c->P.M_tile);
        if ((int64_t)c->P.m_off + c->P.M_tile > M)
            AMK__OPS_FAIL(PARAM_VALUE, "m_off+M_tile = %lld exceeds x rows %lld",
                          (long long)c->P.m_off + c->P.M_tile, (long long)M);
    }
    return 1;
}

/* ATTENTION_TILE, ATTENTION_DECODE, ATTENTION_O, ATTENTION_O_PRENORM */
AMK__FN int amk__check_attention(const amk__opshape *c) {
    const int op = amk_op_device(c->t->op, NULL);
    const int fo = op == AMK_OP_ATTENTION_O, decode = op == AMK_OP_ATTENTION_DECODE || fo;
    const int prenorm = c->t->op == AMK_OP_ATTENTION_O_PRENORM; /* input 0 is qkv */
    const int64_t B = amk__opshape_batch(c->in[1]); /* caches [B, max_seq, n_kv_heads, head_dim]: B queries */
    int64_t row, max_seq, want;
    double scale = amk__param_f(c->t, "scale", 1.0);
    if (c->ni == 4 && !decode) AMK__OPS_FAIL(OP_UNSUPPORTED, "4th ATTENTION_TILE input is not supported");
    if (prenorm && c->t->n_outputs != 1 && c->t->n_outputs != 3)
        AMK__OPS_FAIL(OP_ARITY, "takes 1 or 3 outputs, got %d", c->t->n_outputs);
    if (c->P.head_dim < 1 || c->P.n_heads < 1 || c->P.n_kv_heads < 1 || c->P.n_heads % c->P.n_kv_heads)
        AMK__OPS_FAIL(PARAM_VALUE,
                      "head_dim = %d, n_heads = %d, n_kv_heads = %d: each must be >= 1 and "
                      "n_kv_heads must divide n_heads", c->P.head_dim, c->P.n_heads, c->P.n_kv_heads);
    if (decode && (c->P.n_off < 0 || c->P.N_tile < 1 || (int64_t)c->P.n_off + c->P.N_tile > c->P.n_kv_heads))
        AMK__OPS_FAIL(PARAM_VALUE, "kv heads n_off = %d, N_tile = %d are outside [0, n_kv_heads = %d)",
                      c->P.n_off, c->P.N_tile, c->P.n_kv_heads);
    if (prenorm) { /* qkv [1, F]: the Q rows, then K, then V */
        if (!amk__mul_i64((int64_t)c->P.n_heads + 2 * (int64_t)c->P.n_kv_heads, c->P.head_dim, &want) || c->n_in[0] != want)
            AMK__OPS_FAIL(OP_SHAPE, "qkv '%s' has %lld elements, (n_heads + 2*n_kv_heads)*head_dim = "
                          "(%d + 2*%d)*%d", amk__opshape_name(c->in[0]), (long long)c->n_in[0], c->P.n_heads,
                          c->P.n_kv_heads, c->P.head_dim);
        if (c->in[0]->dtype != AMK_DTYPE_F32)
            AMK__OPS_FAIL(OP_DTYPE, "qkv '%s' (a sum RMSNORM_MLP_FOLD builds) must be F32, not %s",
                          amk__opshape_name(c->in[0]), amk_dtype_name(c->in[0]->dtype));
    } else if (c->n_in[0] != B * c->P.n_heads * c->P.head_dim) {
        AMK__OPS_FAIL(OP_SHAPE, "q '%s' has %lld elements, B*n_heads*head_dim = %lld*%d*%d",
                      amk__opshape_name(c->in[0]), (long long)c->n_in[0], (long long)B, c->P.n_heads,
                      c->P.head_dim);
    }
    if (B > 1 && (decode || ((uint32_t)c->P.flags & AMK_ATTN_FLAG_PARTIAL)))
        AMK__OPS_FAIL(OP_UNSUPPORTED, "a batch of %lld caches (rank 4) takes the normalised ATTENTION_TILE only",
                      (long long)B);
    row = (int64_t)c->P.n_kv_heads * c->P.head_dim;
    if (c->n_in[1] % (row * B) || c->n_in[2] != c->n_in[1] || c->in[2]->rank != c->in[1]->rank ||
        (B > 1 && (c->in[1]->shape[2] * c->in[1]->shape[3] != row || c->in[2]->shape[0] != B)))
        AMK__OPS_FAIL(OP_SHAPE, "k '%s' (%lld) and v '%s' (%lld) must hold equal whole rows of "
                      "n_kv_heads*head_dim = %lld", amk__opshape_name(c->in[1]), (long long)c->n_in[1],
                      amk__opshape_name(c->in[2]), (long long)c->n_in[2], (long long)row);
    max_seq = c->n_in[1] / (row * B);
    if (c->P.kv_start < 0 || c->P.kv_len < 0 || (int64_t)c->P.kv_start + c->P.kv_len > max_seq)
        AMK__OPS_FAIL(PARAM_VALUE, "window kv_start = %d, kv_len = %d is outside the %lld cache rows",
                      c->P.kv_start, c->P.kv_len, (long long)max_seq);
    if (decode && (!amk__opshape_is_index(c->in[3]->dtype) || c->n_in[3] != 1))
        AMK__OPS_FAIL(OP_SHAPE, "pos '%s' must be one I32, I8 or U8", amk__opshape_name(c->in[3]));
    if (c->P.sliding_window < 0 || (c->P.sliding_window > 0 && !decode))
        AMK__OPS_FAIL(PARAM_VALUE, "sliding_window = %d must be >= 0, and 0 without the position input "
                      "(ATTENTION_TILE: its kv window is the host's to set)", c->P.sliding_window);
    if (!amk__opshape_finite(scale)) AMK__OPS_FAIL(PARAM_VALUE, "scale = %g must be finite", scale);
    if (!fo && decode && ((uint32_t)c->P.flags & ~AMK_ATTN_FLAG_PARTIAL))
        AMK__OPS_FAIL(PARAM_VALUE, "flags = %d has bits other than PARTIAL (2)", c->P.flags);
    if (c->P.part < 0 || (c->P.part > 0 && !(decode && !fo && ((uint32_t)c->P.flags & AMK_ATTN_FLAG_PARTIAL))))
        AMK__OPS_FAIL(PARAM_VALUE, "part = %d: only ATTENTION_DECODE's partials take a set (>= 0)", c->P.part);
    if (fo) { /* W_oT [n_heads*head_dim, H]: its rows [m_off, m_off+M_tile) among the kv heads' */
        const amk_buffer *Wo = c->in[4];
        const int64_t grp = c->P.n_heads / c->P.n_kv_heads, a0 = (int64_t)c->P.n_off * grp * c->P.head_dim;
        const int64_t a1 = ((int64_t)c->P.n_off + c->P.N_tile) * grp * c->P.head_dim, H = Wo->shape[1];
        const int r = 5 + prenorm; /* the resid's input, when given */
        if (Wo->rank != 2 || Wo->shape[0] != (int64_t)c->P.n_heads * c->P.head_dim || !amk_dtype_is_float(Wo->dtype))
            AMK__OPS_FAIL(OP_SHAPE, "W_oT '%s' must be a float [n_heads*head_dim = %lld, H]",
                          amk__opshape_name(Wo), (long long)c->P.n_heads * c->P.head_dim);
        if (c->P.M_tile < 1 || c->P.m_off < a0 || (int64_t)c->P.m_off + c->P.M_tile > a1)
            AMK__OPS_FAIL(PARAM_VALUE, "rows m_off = %d, M_tile = %d are outside the kv heads' [%lld, %lld)",
                          c->P.m_off, c->P.M_tile, (long long)a0, (long long)a1);
        if (!amk__opshape_accum_out(c, c->out, c->n_out, 1, H, c->ni > r ? c->in[r] : NULL, c->ni > r ? c->n_in[r] : 0)) return 0;
        if (prenorm) { /* x [1, H], its rms; eps and RoPE's params; the cache outputs */
            double eps = amk__param_f(c->t, "eps", 0.0);
            if (c->n_in[5] != H || !amk_dtype_is_float(c->in[5]->dtype))
                AMK__OPS_FAIL(OP_SHAPE, "x '%s' must be float with H = %lld elements", amk__opshape_name(c->in[5]),
                              (long long)H);
            if (!amk__opshape_finite(eps) || eps < 0)
                AMK__OPS_FAIL(PARAM_VALUE, "eps = %g must be finite and >= 0", eps);
            if (c->P.head_dim % 2)
                AMK__OPS_FAIL(PARAM_VALUE, "head_dim = %d must be even (RoPE's pairs)", c->P.head_dim);
            if (!amk__opshape_rope(c, c->t, &c->P)) return 0;
            if (c->t->n_outputs == 3 && (c->t->outputs[1] != c->t->inputs[1] || c->t->outputs[2] != c->t->inputs[2] ||
                                      c->t->inputs[1] == c->t->inputs[2] || c->t->outputs[0] == c->t->inputs[1] ||
                                      c->t->outputs[0] == c->t->inputs[2]))
                AMK__OPS_FAIL(OP_SHAPE, "outputs 2 and 3 (buffers %d, %d) must be the k and v caches (inputs "
                              "%d, %d): two buffers, neither out", c->t->outputs[1], c->t->outputs[2], c->t->inputs[1],
                              c->t->inputs[2]);
        }
        return 1;
    }
    want = B * c->P.n_heads * c->P.head_dim;
    if ((uint32_t)c->P.flags & AMK_ATTN_FLAG_PARTIAL) { /* ATTENTION_TILE: F32 advised (amk__op_caveat) */
        if (decode ? c->out->dtype != AMK_DTYPE_F32 : !amk_dtype_is_float(c->out->dtype))
            AMK__OPS_FAIL(OP_DTYPE, "partial out '%s' must be %s, not %s", amk__opshape_name(c->out),
                          decode ? "F32" : "a float dtype", amk_dtype_name(c->out->dtype));
        want = (int64_t)c->P.n_heads * (c->P.head_dim + 2);
        if (decode && c->n_out != want) { /* stacked sets (AMK_ATTN_FLAG_PARTIAL): set part of several */
            if (c->n_out % want || c->n_out / want <= c->P.part)
                AMK__OPS_FAIL(OP_SHAPE, "partial out '%s' has %lld elements, not sets of n_heads*(head_dim+2) = "
                              "%lld with a set part = %d", amk__opshape_name(c->out), (long long)c->n_out,
                              (long long)want, c->P.part);
            want = c->n_out;
        }
    }
    if (c->n_out != want)
        AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, needs %lld", amk__opshape_name(c->out),
                      (long long)c->n_out, (long long)want);
    return 1;
}

/* ROPE */
AMK__FN int amk__check_rope(const amk__opshape *c) {
    int64_t v;
    int64_t S = c->n_in[1];
    if (!amk__opshape_is_index_or_float(c->in[1]->dtype))
        AMK__OPS_FAIL(OP_DTYPE, "positions '%s' must be I32, I8, U8 or a float dtype, not %s",
                      amk__opshape_name(c->in[1]), amk_dtype_name(c->in[1]->dtype));
    if (S < 1) AMK__OPS_FAIL(OP_SHAPE, "positions '%s' is empty", amk__opshape_name(c->in[1]));
    if (c->P.head_dim < 2 || c->P.head_dim % 2)
        AMK__OPS_FAIL(PARAM_VALUE, "head_dim = %d must be even and >= 2", c->P.head_dim);
    if (!amk__mul_i64(S, c->P.head_dim, &v) || c->n_in[0] % v)
        AMK__OPS_FAIL(OP_SHAPE, "x '%s' has %lld elements, not a multiple of positions*head_dim "
                      "= %lld*%d", amk__opshape_name(c->in[0]), (long long)c->n_in[0], (long long)S,
                      c->P.head_dim);
    if (c->n_out != c->n_in[0])
        AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, x '%s' has %lld",
                      amk__opshape_name(c->out), (long long)c->n_out, amk__opshape_name(c->in[0]),
                      (long long)c->n_in[0]);
    if (!amk__opshape_rope(c, c->t, &c->P)) return 0;
    return 1;
}

/* SILU_MUL, ADD, ALLREDUCE_SHARD; with M_tile rows of the output only (amk__check_rows). */
AMK__FN int amk__check_elementwise(const amk__opshape *c) {
    int i;
    for (i = 0; i < c->ni; i++)
        if (c->n_in[i] != c->n_out)
            AMK__OPS_FAIL(OP_SHAPE, "input %d '%s' has %lld elements, out '%s' has %lld", i,
                          amk__opshape_name(c->in[i]), (long long)c->n_in[i], amk__opshape_name(c->out),
                          (long long)c->n_out);
    return amk__check_rows(c, 0);
}

/* MUL */
AMK__FN int amk__check_mul(const amk__opshape *c) {
    if (c->n_out != c->n_in[0])
        AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, a '%s' has %lld",
                      amk__opshape_name(c->out), (long long)c->n_out, amk__opshape_name(c->in[0]),
                      (long long)c->n_in[0]);
    if (c->ni == 2 && c->n_in[1] != c->n_in[0] && c->n_in[1] != 1)
        AMK__OPS_FAIL(OP_SHAPE, "b '%s' has %lld elements, needs %lld or 1 (broadcast)",
                      amk__opshape_name(c->in[1]), (long long)c->n_in[1], (long long)c->n_in[0]);
    return 1;
}

/* DEQUANT */
AMK__FN int amk__check_dequant(const amk__opshape *c) {
    int i;
    const amk_buffer *q = c->in[0];
    int64_t logical = c->n_in[0], last = amk__opshape_last(q);
    if (c->P.qdtype != AMK_DTYPE_I8 && c->P.qdtype != AMK_DTYPE_I4)
        AMK__OPS_FAIL(PARAM_VALUE, "qdtype = %d must be 6 (I8) or 7 (I4)", c->P.qdtype);
    if (c->P.qdtype == AMK_DTYPE_I8 ? q->dtype != AMK_DTYPE_I8
                                 : q->dtype != AMK_DTYPE_I4 && q->dtype != AMK_DTYPE_U8)
        AMK__OPS_FAIL(OP_DTYPE, "q '%s' is %s, qdtype %d needs %s", amk__opshape_name(q),
                      amk_dtype_name(q->dtype), c->P.qdtype,
                      c->P.qdtype == AMK_DTYPE_I8 ? "I8" : "I4 or U8 (packed)");
    if (q->dtype == AMK_DTYPE_U8) { /* two 4-bit values per byte */
        if (!amk__mul_i64(logical, 2, &logical) || !amk__mul_i64(last, 2, &last))
            AMK__OPS_FAIL(OP_SHAPE, "q '%s' is too large", amk__opshape_name(q));
    }
    if (c->P.group < 1 || last % c->P.group)
        AMK__OPS_FAIL(PARAM_VALUE, "group = %d must be >= 1 and divide the last dim %lld",
                      c->P.group, (long long)last);
    for (i = 1; i < c->ni; i++)
        if (c->n_in[i] != logical / c->P.group)
            AMK__OPS_FAIL(OP_SHAPE, "%s '%s' has %lld elements, needs %lld/group = %lld",
                          i == 1 ? "scales" : "zeros", amk__opshape_name(c->in[i]),
                          (long long)c->n_in[i], (long long)logical, (long long)(logical / c->P.group));
    if (!amk_dtype_is_float(c->out->dtype))
        AMK__OPS_FAIL(OP_DTYPE, "out '%s' must be a float dtype, not %s", amk__opshape_name(c->out),
                      amk_dtype_name(c->out->dtype));
    if (c->n_out != logical)
        AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, q holds %lld values",
                      amk__opshape_name(c->out), (long long)c->n_out, (long long)logical);
    return 1;
}

/* SOFTMAX */
AMK__FN int amk__check_softmax(const amk__opshape *c) {
    if (c->P.dim < -c->in[0]->rank || c->P.dim >= c->in[0]->rank)
        AMK__OPS_FAIL(PARAM_VALUE, "dim = %d is outside [%d, %d) for x '%s'", c->P.dim,
                      -c->in[0]->rank, c->in[0]->rank, amk__opshape_name(c->in[0]));
    if (c->n_out != c->n_in[0])
        AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, x '%s' has %lld",
                      amk__opshape_name(c->out), (long long)c->n_out, amk__opshape_name(c->in[0]),
                      (long long)c->n_in[0]);
    return 1;
}

/* KV_APPEND: new holds one row of the cache, written at row pos; a cache of rank 4 is a batch
   [B, max_seq, ...] and new holds a row for each of the B (IR_SPEC_NOTES). */
AMK__FN int amk__check_kv_append(const amk__opshape *c) {
    const int64_t B = amk__opshape_batch(c->in[1]);
    int64_t R = c->n_in[0] / B;
    if (R < 1 || c->n_in[0] % B)
        AMK__OPS_FAIL(OP_SHAPE, "new '%s' has %lld elements, not a row for each of the %lld caches",
                      amk__opshape_name(c->in[0]), (long long)c->n_in[0], (long long)B);
    if (c->n_in[1] % (R * B) || (B > 1 && R != c->in[1]->shape[2] * c->in[1]->shape[3]))
        AMK__OPS_FAIL(OP_SHAPE, "cache '%s' has %lld elements, not whole rows of %lld",
                      amk__opshape_name(c->in[1]), (long long)c->n_in[1], (long long)R);
    if (c->P.pos < 0 || c->P.pos >= c->n_in[1] / (R * B))
        AMK__OPS_FAIL(PARAM_VALUE, "pos = %d is outside the %lld rows of cache '%s'", c->P.pos,
                      (long long)(c->n_in[1] / (R * B)), amk__opshape_name(c->in[1]));
    if (c->t->outputs[0] != c->t->inputs[1])
        AMK__OPS_FAIL(OP_SHAPE, "the output (buffer %d) must be the cache input (buffer %d)",
                      c->t->outputs[0], c->t->inputs[1]);
    return 1;
}

/* SAMPLE_ARGMAX, ARGMAX_PARTIAL, ARGMAX_COMBINE */
AMK__FN int amk__check_argmax(const amk__opshape *c) {
    /* L: the logits' last axis, or the combine's (value, index) pairs, two columns each */
    const int combine = c->t->op == AMK_OP_ARGMAX_COMBINE;
    const int64_t L = amk__opshape_last(c->in[0]);
    const char *what = combine ? "partials" : "logits";
    if (combine && c->in[0]->dtype != AMK_DTYPE_F32)
        AMK__OPS_FAIL(OP_DTYPE, "partials '%s' must be F32, not %s", amk__opshape_name(c->in[0]),
                      amk_dtype_name(c->in[0]->dtype));
    if (c->in[0]->rank < 1 || L < 1 || (combine && L % 2))
        AMK__OPS_FAIL(OP_SHAPE, "%s '%s' needs rank >= 1 and a last dim >= 1%s", what,
                      amk__opshape_name(c->in[0]), combine ? ", even ((value, index) pairs)" : "");
    if (c->t->op == AMK_OP_ARGMAX_PARTIAL) {
        if (L > (1LL << 24)) /* why: the index travels as an F32 beside its value */
            AMK__OPS_FAIL(OP_SHAPE, "logits '%s' has %lld columns; at most 2^24", amk__opshape_name(c->in[0]),
                          (long long)L);
        if (c->P.n_off < 0 || c->P.N_tile < 1 || (int64_t)c->P.n_off + c->P.N_tile > L)
            AMK__OPS_FAIL(PARAM_VALUE, "columns [%d, %d + %d) are not inside the %lld of '%s'", c->P.n_off,
                          c->P.n_off, c->P.N_tile, (long long)L, amk__opshape_name(c->in[0]));
        if (!amk__opshape_pairs_out(c, c->out, c->n_out, c->n_in[0] / L, c->P.part)) return 0;
        return 1;
    }
    if (!amk__opshape_is_index(c->out->dtype))
        AMK__OPS_FAIL(OP_DTYPE, "out '%s' must be I32, I8 or U8, not %s", amk__opshape_name(c->out),
                      amk_dtype_name(c->out->dtype));
    if (c->n_out != c->n_in[0] / L)
        AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, %s have %lld rows", amk__opshape_name(c->out),
                      (long long)c->n_out, what, (long long)(c->n_in[0] / L));
    return 1;
}

/* ATTENTION_COMBINE: out [n_heads*head_dim]; each input k >= 1 sets of [n_heads, head_dim+2], all
   inputs alike (AMK_ATTN_FLAG_PARTIAL's stacked sets); N_tile >= 1: heads [n_off, n_off+N_tile). */
AMK__FN int amk__check_attention_combine(const amk__opshape *c) {
    int i;
    const int64_t row = (int64_t)c->P.head_dim + 2;
    int64_t nh;
    if (c->P.head_dim < 1) AMK__OPS_FAIL(PARAM_VALUE, "head_dim = %d must be >= 1", c->P.head_dim);
    nh = c->n_out / c->P.head_dim;
    if (c->n_out < 1 || c->n_out % c->P.head_dim)
        AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, not n_heads*head_dim (head_dim %d)",
                      amk__opshape_name(c->out), (long long)c->n_out, c->P.head_dim);
    for (i = 0; i < c->ni; i++) {
        if (!amk_dtype_is_float(c->in[i]->dtype)) /* F32 advised (amk__op_caveat) */
            AMK__OPS_FAIL(OP_DTYPE, "partial %d '%s' must be a float dtype, not %s", i,
                          amk__opshape_name(c->in[i]), amk_dtype_name(c->in[i]->dtype));
        if (c->n_in[i] != c->n_in[0] || c->n_in[i] < 1 || c->n_in[i] % (nh * row))
            AMK__OPS_FAIL(OP_SHAPE, "partial %d '%s' has %lld elements; every partial needs %lld, whole sets "
                          "of n_heads*(head_dim+2) = %lld*%lld (n_heads from out '%s')", i,
                          amk__opshape_name(c->in[i]), (long long)c->n_in[i], (long long)c->n_in[0],
                          (long long)nh, (long long)row, amk__opshape_name(c->out));
    }
    if (c->P.N_tile < 0 || c->P.n_off < 0 || (c->P.N_tile == 0 && c->P.n_off != 0) ||
        (int64_t)c->P.n_off + c->P.N_tile > nh)
        AMK__OPS_FAIL(PARAM_VALUE, "heads n_off = %d, N_tile = %d are outside [0, n_heads = %lld) (N_tile 0: all)",
                      c->P.n_off, c->P.N_tile, (long long)nh);
    return 1;
}

/* ATTENTION_PREFILL: q and out [M, n_heads*head_dim] (float), the caches whole rows of
   n_kv_heads*head_dim, pos an index buffer whose first element is row 0's position (a prefill
   program's positions [M], or one); its kv heads and query rows inside them. Whether pos + M rows
   fit the cache is the run's to check (pos is data). */
AMK__FN int amk__check_attention_prefill(const amk__opshape *c) {
    const amk_buffer *q = c->in[0], *o = c->out;
    int64_t qw, row;
    double scale = amk__param_f(c->t, "scale", 1.0);
    if (c->P.head_dim < 1 || c->P.n_heads < 1 || c->P.n_kv_heads < 1 || c->P.n_heads % c->P.n_kv_heads)
        AMK__OPS_FAIL(PARAM_VALUE,
                      "head_dim = %d, n_heads = %d, n_kv_heads = %d: each must be >= 1 and "
                      "n_kv_heads must divide n_heads", c->P.head_dim, c->P.n_heads, c->P.n_kv_heads);
    qw = (int64_t)c->P.n_heads * c->P.head_dim;
    row = (int64_t)c->P.n_kv_heads * c->P.head_dim;
    if (q->rank != 2 || q->shape[1] != qw || o->rank != 2 || o->shape[0] != q->shape[0] || o->shape[1] != qw)
        AMK__OPS_FAIL(OP_SHAPE, "q '%s' and out '%s' must both be [M, n_heads*head_dim = %lld]", amk__opshape_name(q),
                      amk__opshape_name(o), (long long)qw);
    if (!amk_dtype_is_float(q->dtype) || !amk_dtype_is_float(o->dtype) || !amk_dtype_is_float(c->in[1]->dtype) ||
        !amk_dtype_is_float(c->in[2]->dtype))
        AMK__OPS_FAIL(OP_DTYPE, "q, the caches and out must be float dtypes (%s, %s, %s, %s)", amk_dtype_name(q->dtype),
                      amk_dtype_name(c->in[1]->dtype), amk_dtype_name(c->in[2]->dtype), amk_dtype_name(o->dtype));
    if (amk__opshape_batch(c->in[1]) != 1 || c->n_in[1] % row || c->n_in[1] < row || c->n_in[2] != c->n_in[1])
        AMK__OPS_FAIL(OP_SHAPE, "k '%s' (%lld) and v '%s' (%lld) must hold equal whole rows of "
                      "n_kv_heads*head_dim = %lld", amk__opshape_name(c->in[1]), (long long)c->n_in[1],
                      amk__opshape_name(c->in[2]), (long long)c->n_in[2], (long long)row);
    if (!amk__opshape_is_index(c->in[3]->dtype) || c->n_in[3] < 1)
        AMK__OPS_FAIL(OP_SHAPE, "pos '%s' must be I32, I8 or U8 with at least one element", amk__opshape_name(c->in[3]));
    if (c->P.n_off < 0 || c->P.N_tile < 1 || (int64_t)c->P.n_off + c->P.N_tile > c->P.n_kv_heads)
        AMK__OPS_FAIL(PARAM_VALUE, "kv heads n_off = %d, N_tile = %d are outside [0, n_kv_heads = %d)",
                      c->P.n_off, c->P.N_tile, c->P.n_kv_heads);
    if (c->P.m_off < 0 || c->P.M_tile < 1 || (int64_t)c->P.m_off + c->P.M_tile > q->shape[0])
        AMK__OPS_FAIL(PARAM_VALUE, "query rows m_off = %d, M_tile = %d are outside q's %lld rows", c->P.m_off,
                      c->P.M_tile, (long long)q->shape[0]);
    if (c->P.sliding_window < 0)
        AMK__OPS_FAIL(PARAM_VALUE, "sliding_window = %d must be >= 0", c->P.sliding_window);
    if (!amk__opshape_finite(scale)) AMK__OPS_FAIL(PARAM_VALUE, "scale = %g must be finite", scale);
    if (c->P.flags) AMK__OPS_FAIL(PARAM_VALUE, "flags = %d: ATTENTION_PREFILL takes none", c->P.flags);
    return 1;
}

/* FILL */
AMK__FN int amk__check_fill(const amk__opshape *c) {
    double value = amk__param_f(c->t, "scale", 1.0);
    if (!amk__opshape_finite(value))
        AMK__OPS_FAIL(PARAM_VALUE, "scale = %g (the value) must be finite", value);
    if (!amk_dtype_is_float(c->out->dtype))
        AMK__OPS_FAIL(OP_DTYPE, "out '%s' must be a float dtype, not %s", amk__opshape_name(c->out),
                      amk_dtype_name(c->out->dtype));
    return 1;
}

/* The rows of x a fused tile takes: every row, or with M_tile [m_off, m_off + M_tile) (RMSNORM_GEMV
   and its RoPE and KV forms only). 1 when c's task is well formed so. */
AMK__FN int amk__check_norm_gemv_rows(const amk__opshape *c, int64_t M) {
    const amk_param *moff = amk_task_param(c->t, "m_off"), *mw = amk_task_param(c->t, "M_tile");
    const int op = c->t->op;
    if (!mw && !moff) return 1;
    if (op != AMK_OP_RMSNORM_GEMV && op != AMK_OP_RMSNORM_GEMV_ROPE && op != AMK_OP_RMSNORM_GEMV_KV &&
        op != AMK_OP_RMSNORM_GEMV_ROPE_KV)
        AMK__OPS_FAIL(PARAM_VALUE, "%s", "m_off and M_tile (rows) are RMSNORM_GEMV's and its RoPE and KV forms', "
                      "not this op's");
    if (!mw) AMK__OPS_FAIL(PARAM_VALUE, "%s", "m_off without M_tile");
    if (c->P.M_tile < 1 || c->P.m_off < 0 || (int64_t)c->P.m_off + c->P.M_tile > M)
        AMK__OPS_FAIL(PARAM_VALUE, "rows m_off = %d, M_tile = %d are outside x's %lld rows", c->P.m_off, c->P.M_tile,
                      (long long)M);
    return 1;
}

/* RMSNORM_GEMV and its variants (_ROPE, _KV, _ROPE_KV, _ARGMAX), RMSNORM_SWIGLU, RMSNORM_MLP and
   RMSNORM_MLP_FOLD. The arity is the op table's; the forms' bits come with the opcode (P.flags). */
AMK__FN int amk__check_norm_gemv(const amk__opshape *c) {
    int i;
    const int op = amk_op_device(c->t->op, NULL);
    const int mlp = op == AMK_OP_RMSNORM_MLP, swiglu = op == AMK_OP_RMSNORM_SWIGLU || mlp;
    const uint32_t flags = swiglu ? 0u : (uint32_t)c->P.flags; /* RMSNORM_GEMV's forms */
    const int fold = c->t->op == AMK_OP_RMSNORM_MLP_FOLD; /* W_cat input 5, qkv output 1 */
    const int64_t K = c->P.K;
    double eps = amk__param_f(c->t, "eps", 0.0);
    int64_t M, N, end;
    if (!amk__opshape_finite(eps) || eps < 0)
        AMK__OPS_FAIL(PARAM_VALUE, "eps = %g must be finite and >= 0", eps);
    if (K < 1) AMK__OPS_FAIL(PARAM_VALUE, "K = %lld must be >= 1", (long long)K);
    if (c->n_in[0] % K || c->n_in[0] / K < 1)
        AMK__OPS_FAIL(OP_SHAPE, "x '%s' has %lld elements, not a positive multiple of K = %lld",
                      amk__opshape_name(c->in[0]), (long long)c->n_in[0], (long long)K);
    M = c->n_in[0] / K;
    if (c->n_in[1] != K)
        AMK__OPS_FAIL(OP_SHAPE, "norm_w '%s' has %lld elements, K = %lld", amk__opshape_name(c->in[1]),
                      (long long)c->n_in[1], (long long)K);
    for (i = 2; i < (swiglu ? 4 : 3); i++) {
        if (c->in[i]->rank != 2 || c->in[i]->shape[1] != K ||
            !(amk_dtype_is_float(c->in[i]->dtype) || amk_dtype_is_block(c->in[i]->dtype)))
            AMK__OPS_FAIL(OP_SHAPE, "W '%s' must be a float or GGUF block [N, K = %lld]", amk__opshape_name(c->in[i]),
                          (long long)K);
        if (c->in[i]->shape[0] != c->in[2]->shape[0])
            AMK__OPS_FAIL(OP_SHAPE, "W_up '%s' has %lld rows, W_gate %lld", amk__opshape_name(c->in[i]),
                          (long long)c->in[i]->shape[0], (long long)c->in[2]->shape[0]);
    }
    N = c->in[2]->shape[0];
    if (c->P.n_off < 0 || c->P.N_tile < 1)
        AMK__OPS_FAIL(PARAM_VALUE, "n_off = %d must be >= 0 and N_tile = %d >= 1", c->P.n_off, c->P.N_tile);
    end = (int64_t)c->P.n_off + c->P.N_tile;
    if (end > N)
        AMK__OPS_FAIL(PARAM_VALUE, "n_off+N_tile = %lld exceeds W rows %lld", (long long)end, (long long)N);
    if (!amk__check_x_q8(c, amk_dtype_is_block(c->in[2]->dtype) || (swiglu && amk_dtype_is_block(c->in[3]->dtype))))
        return 0;
    if (c->t->op == AMK_OP_RMSNORM_SWIGLU && c->P.flags) /* the others' flags: amk__op_flags_named */
        AMK__OPS_FAIL(PARAM_VALUE, "flags = %d: RMSNORM_SWIGLU takes none", c->P.flags);
    if (flags & AMK_GEMV_FLAG_ARGMAX) {
        if (N > (1LL << 24)) /* why: the index travels as an F32 beside its value */
            AMK__OPS_FAIL(OP_SHAPE, "W '%s' has %lld rows; ARGMAX takes at most 2^24", amk__opshape_name(c->in[2]),
                          (long long)N);
        if (!amk__opshape_pairs_out(c, c->out2, c->n_out2, M, c->P.part)) return 0;
        if (c->t->outputs[1] == c->t->outputs[0] || c->t->outputs[1] == c->t->inputs[0])
            AMK__OPS_FAIL(OP_SHAPE, "the partials (buffer %d) must be a buffer of their own", c->t->outputs[1]);
    } else if (flags) {
        if (!amk__opshape_is_index(c->in[3]->dtype) || c->n_in[3] != M)
            AMK__OPS_FAIL(OP_SHAPE, "positions '%s' must be I32, I8 or U8 with one per row of x (%lld)",
                          amk__opshape_name(c->in[3]), (long long)M);
    }
    if (flags & AMK_GEMV_FLAG_ROPE) {
        if (c->P.head_dim < 2 || c->P.head_dim % 2 || N % c->P.head_dim || c->P.n_off % 2 || c->P.N_tile % 2)
            AMK__OPS_FAIL(PARAM_VALUE, "RoPE needs an even head_dim (%d) dividing W rows %lld, and "
                          "an even n_off (%d) and N_tile (%d)", c->P.head_dim, (long long)N, c->P.n_off, c->P.N_tile);
        if (!amk__opshape_rope(c, c->t, &c->P)) return 0;
    }
    if (mlp) { /* W_downT [N, H] (or, in a block format, W_down [H, N]) maps the tile's N_tile values
                  onto out [M, H] (+ resid [M, H]) */
        const amk_buffer *Wd = c->in[4], *Wc = c->in[5];
        const int r = 5 + fold; /* the resid's input, when given */
        const int64_t E = amk_dtype_is_block(Wd->dtype) ? amk_dtype_block(Wd->dtype, NULL) : 0;
        if (E) { /* the tile reads each row's K-slice [n_off, n_off + N_tile): whole blocks */
            if (Wd->rank != 2 || Wd->shape[1] != N)
                AMK__OPS_FAIL(OP_SHAPE, "W_down '%s' (%s) must be [H, N = %lld]", amk__opshape_name(Wd),
                              amk_dtype_name(Wd->dtype), (long long)N);
            if (c->P.n_off % E || c->P.N_tile % E)
                AMK__OPS_FAIL(PARAM_VALUE, "n_off = %d and N_tile = %d must be multiples of %s's block of %lld",
                              c->P.n_off, c->P.N_tile, amk_dtype_name(Wd->dtype), (long long)E);
        } else if (Wd->rank != 2 || Wd->shape[0] != N || !amk_dtype_is_float(Wd->dtype)) {
            AMK__OPS_FAIL(OP_SHAPE, "W_downT '%s' must be a float [N = %lld, H] (or a GGUF block W_down [H, N])",
                          amk__opshape_name(Wd), (long long)N);
        }
        if (!amk__opshape_accum_out(c, c->out, c->n_out, M, Wd->shape[E ? 0 : 1], c->ni > r ? c->in[r] : NULL,
                                    c->ni > r ? c->n_in[r] : 0))
            return 0;
        if (fold) { /* W_cat [N + K, F] maps the tile's values and its share of x onto qkv [M, F] */
            if (Wc->rank != 2 || Wc->shape[0] != N + K || Wc->shape[1] < 1)
                AMK__OPS_FAIL(OP_SHAPE, "W_cat '%s' must be [N + K = %lld, F >= 1]", amk__opshape_name(Wc),
                              (long long)(N + K));
            if (Wc->dtype != AMK_DTYPE_F32 && Wc->dtype != AMK_DTYPE_BF16 && Wc->dtype != AMK_DTYPE_F16)
                AMK__OPS_FAIL(OP_DTYPE, "W_cat '%s' must be F32, BF16 or F16, not %s", amk__opshape_name(Wc),
                              amk_dtype_name(Wc->dtype));
            if (!amk__opshape_accum_out(c, c->out2, c->n_out2, M, Wc->shape[1], NULL, 0)) return 0;
            if (c->t->outputs[1] == c->t->outputs[0] || c->t->outputs[1] == c->t->inputs[0])
                AMK__OPS_FAIL(OP_SHAPE, "qkv (buffer %d) must be a buffer of its own", c->t->outputs[1]);
        }
    } else if (flags & AMK_GEMV_FLAG_KV_ROW) {
        if (c->n_out % N || c->n_out < N)
            AMK__OPS_FAIL(OP_SHAPE, "cache '%s' has %lld elements, not whole rows of W's N = %lld",
                          amk__opshape_name(c->out), (long long)c->n_out, (long long)N);
    } else if (!amk__opshape_tile_out(c, c->out, c->n_out, M, end)) {
        return 0;
    }
    return amk__check_norm_gemv_rows(c, M);
}
/* BIAS_ADD: x [M, N] (any shape whose element count is a multiple of N), b [N], out as x. */
AMK__FN int amk__check_bias_add(const amk__opshape *c) {
    const int64_t N = c->n_in[1];
    if (N < 1 || c->n_in[0] % N)
        AMK__OPS_FAIL(OP_SHAPE, "x '%s' has %lld elements, not whole rows of b '%s' (%lld)", amk__opshape_name(c->in[0]),
                      (long long)c->n_in[0], amk__opshape_name(c->in[1]), (long long)N);
    if (c->n_out != c->n_in[0])
        AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, x '%s' has %lld", amk__opshape_name(c->out),
                      (long long)c->n_out, amk__opshape_name(c->in[0]), (long long)c->n_in[0]);
    return 1;
}
#undef AMK__OPS_FAIL

/* A variant names its form by its opcode (the op table's AS rows), never by flags: flags on a
   variant or on its base op are refused, naming the variant where they hold its form bits (what IR
   0.2.0 programs wrote before the variants; the JSON reader rewrites those). 1 when fine; else 0 and the
   message in msg (msg_size bytes). Safe on a malformed param list. */
AMK__FN int amk__op_flags_named(const amk_task *t, char *msg, size_t msg_size) {
    uint32_t fl = 0, form;
    int i, v;
    for (i = 0; t->params && i < t->n_params; i++)
        if (t->params[i].key && strcmp(t->params[i].key, "flags") == 0 && t->params[i].type == AMK_PARAM_INT)
            fl = (uint32_t)t->params[i].i;
    if (!fl) return 1;
    form = fl & amk__op_form_bits(t->op);
    v = form ? amk_op_variant(t->op, form) : -1;
    if (amk_op_device(t->op, NULL) != t->op) {
        if (msg && msg_size) snprintf(msg, msg_size, "flags = %u: %s takes no flags (its opcode is its form)", fl, amk_op_name(t->op));
        return 0;
    }
    if (!amk__op_form_bits(t->op)) return 1; /* an op without variants: its own check reads flags */
    if (msg && msg_size && v >= 0)
        snprintf(msg, msg_size, "flags = %u: that form of %s is the op %s (%d)", fl, amk_op_name(t->op), amk_op_name(v), v);
    else if (msg && msg_size) { /* no variant has these bits: name those that exist */
        size_t n = (size_t)snprintf(msg, msg_size, "flags = %u: %s takes no flags; its forms are ops of their own:",
                                    fl, amk_op_name(t->op));
        for (v = 0; v < AMK_OP_COUNT && n < msg_size; v++)
            if (v != t->op && amk_op_device(v, NULL) == t->op)
                n += (size_t)snprintf(msg + n, msg_size - n, " %s", amk_op_name(v));
    }
    return 0;
}

/* The caveat of a task amk__op_check accepted in a form the spec's reference implementation
   (schedule/ir.py, instructions/reference.py) accepts and AMK advises against: float ids or
   positions (truncated to integers, exact only while the float holds the integer), a norm over rows
   of hidden where x's last dim differs (the reference normalises x's last dim). Returns 1 with the
   message in msg, 0 when there is none. */
AMK__FN int amk__op_caveat(const amk_program *p, const amk_task *t, char *msg, size_t msg_size) {
    const amk_buffer *b;
    int64_t hidden;
    if ((t->op == AMK_OP_EMBED || t->op == AMK_OP_ROPE) && t->n_inputs == 2) {
        b = &p->buffers[t->inputs[t->op == AMK_OP_ROPE]];
        if (!amk_dtype_is_float(b->dtype)) return 0;
        snprintf(msg, msg_size, "%s: %s '%s' are %s; they are truncated to integers (exact up to %s)",
                 amk_op_name(t->op), t->op == AMK_OP_ROPE ? "positions" : "ids", amk__opshape_name(b),
                 amk_dtype_name(b->dtype), b->dtype == AMK_DTYPE_F32 ? "2^24" : b->dtype == AMK_DTYPE_F16 ? "2^11" : "2^8");
        return 1;
    }
    if ((t->op == AMK_OP_ATTENTION_TILE && ((uint32_t)amk__param_i(t, "flags", 0) & AMK_ATTN_FLAG_PARTIAL)) ||
        t->op == AMK_OP_ATTENTION_COMBINE) {
        int i, n = t->op == AMK_OP_ATTENTION_TILE ? 1 : t->n_inputs;
        for (i = 0; i < n; i++) {
            b = &p->buffers[t->op == AMK_OP_ATTENTION_TILE ? t->outputs[0] : t->inputs[i]];
            if (b->dtype == AMK_DTYPE_F32) continue;
            snprintf(msg, msg_size, "%s: partials '%s' are %s: the row max and sum lose precision, and the GPU "
                     "runs F32 partials only", amk_op_name(t->op), amk__opshape_name(b), amk_dtype_name(b->dtype));
            return 1;
        }
        return 0;
    }
    if ((t->op == AMK_OP_RMSNORM || t->op == AMK_OP_LAYERNORM) && t->n_inputs >= 1) {
        b = &p->buffers[t->inputs[0]];
        hidden = amk__param_i(t, "hidden", 0);
        if (amk__opshape_last(b) == hidden) return 0;
        snprintf(msg, msg_size, "%s: x '%s' has a last dim of %lld, not hidden = %lld: AMK normalises rows "
                 "of hidden, the spec's reference x's last dim", amk_op_name(t->op), amk__opshape_name(b),
                 (long long)amk__opshape_last(b), (long long)hidden);
        return 1;
    }
    return 0;
}

/* 1 when input slot i of task t may hold a block format (AMK_DTYPE_Q8_0 ... IQ4_NL, amk_dtype_is_block):
   the weight rows a tile reads and dequantizes as float. GEMV_TILE/GEMM_TILE's W (not their
   spec-quantized form, whose qW is I8 or I4 with scales), the RMSNORM_* tiles' W (RMSNORM_MLP's
   gate and up, and its down as W_down [H, N] read by K-slices of whole blocks; not W_cat, which
   the loader derives in a float dtype), EMBED's table and COPY's x (a matrix dequantized). */
AMK__FN int amk__op_block_input(const amk_task *t, int i) {
    switch (amk_op_device(t->op, NULL)) {
    case AMK_OP_GEMV_TILE: case AMK_OP_GEMM_TILE: return i == 1 && amk__param_i(t, "qdtype", 0) == 0;
    case AMK_OP_RMSNORM_GEMV: return i == 2;
    case AMK_OP_RMSNORM_SWIGLU: return i == 2 || i == 3;
    case AMK_OP_RMSNORM_MLP: return i >= 2 && i <= 4;
    case AMK_OP_EMBED: return i == 1;
    case AMK_OP_COPY: return i == 0;
    default: return 0;
    }
}

/* Checks (the preconditions, then the op's check function in the op table) that task t's buffers (shapes, dtypes) and param values fit its opcode. Precondition:
   every buffer id of t exists, the opcode is defined, the arity and the param types are right;
   these are re-checked defensively (OP_UNKNOWN, OP_ARITY, ABI_CAP, REF_BUFFER, PARAM_TYPE,
   BUFFER_ENUM, BUFFER_SHAPE) so a direct amk_ref_exec call can never read out of bounds.
   Returns 1 if fine; else 0 with *which (OP_SHAPE, OP_DTYPE, PARAM_VALUE or OP_UNSUPPORTED) and a
   message naming the buffers and numbers. */
AMK__FN int amk__op_check(const amk_program *p, const amk_task *t, amk_check *which, char *msg,
                          size_t msg_size) {
    amk__opshape c;
    const amk_op_spec *spec;
    int64_t v;
    int i, ni, max_in;
    memset(&c, 0, sizeof c);
    c.which = which;
    c.msg = msg;
    c.msg_size = msg_size;
    c.op = amk_op_name(t->op);
    c.t = t;
    if (msg && msg_size) msg[0] = 0;

#define AMK__OPS_FAIL(check, ...) return amk__opshape_fail(&c, AMK_CHECK_##check, __VA_ARGS__)
    /* ---- the preconditions (validate checks them first) */
    spec = amk_op_spec_get(t->op);
    if (!spec) AMK__OPS_FAIL(OP_UNKNOWN, "opcode %d is not defined", t->op);
    { /* before the arity: a variant named by flags is the cause */
        char named[160];
        if (!amk__op_flags_named(t, named, sizeof named)) AMK__OPS_FAIL(PARAM_VALUE, "%s", named);
    }
    c.quant = (t->op == AMK_OP_GEMV_TILE || t->op == AMK_OP_GEMM_TILE) && amk_task_param(t, "qdtype") != NULL;
    max_in = c.quant ? 4 : spec->max_inputs < 0 ? AMK_MAX_INPUTS : spec->max_inputs;
    c.ni = ni = t->n_inputs;
    if (ni > AMK_MAX_INPUTS || t->n_outputs > AMK_MAX_OUTPUTS)
        AMK__OPS_FAIL(ABI_CAP, "%d inputs, %d outputs exceed the ABI caps (%d/%d)", ni,
                      t->n_outputs, AMK_MAX_INPUTS, AMK_MAX_OUTPUTS);
    if (ni < spec->min_inputs || ni > max_in || (ni && !t->inputs) || (t->n_outputs && !t->outputs) ||
        (spec->n_outputs >= 0 ? t->n_outputs != spec->n_outputs : t->n_outputs < 1)) {
        if (spec->n_outputs < 0) /* the op's own rules below say how many */
            AMK__OPS_FAIL(OP_ARITY, "takes %d..%d inputs and at least 1 output, got %d and %d",
                          spec->min_inputs, max_in, ni, t->n_outputs);
        AMK__OPS_FAIL(OP_ARITY, "takes %d..%d inputs and %d outputs, got %d and %d",
                      spec->min_inputs, max_in, spec->n_outputs, ni, t->n_outputs);
    }
    for (i = 0; i < ni + t->n_outputs; i++) {
        int id = i < ni ? t->inputs[i] : t->outputs[i - ni];
        const amk_buffer *b;
        if (id < 0 || id >= p->n_buffers)
            AMK__OPS_FAIL(REF_BUFFER, "buffer id %d does not exist (%d buffers)", id, p->n_buffers);
        b = &p->buffers[id];
        if (b->dtype < 0 || b->dtype >= AMK_DTYPE_COUNT)
            AMK__OPS_FAIL(BUFFER_ENUM, "buffer %d '%s' has dtype code %d", id,
                          amk__opshape_name(b), b->dtype);
        v = amk__buffer_nbytes(b);
        if (v < 0 || (uint64_t)v > (uint64_t)SIZE_MAX)
            AMK__OPS_FAIL(BUFFER_SHAPE, "buffer %d '%s' has a bad shape or too many bytes", id,
                          amk__opshape_name(b));
        if (i < ni) { c.in[i] = b; c.n_in[i] = amk_buffer_numel(b); }
        else if (i == ni) { c.out = b; c.n_out = amk_buffer_numel(b); }
        else if (i == ni + 1) { c.out2 = b; c.n_out2 = amk_buffer_numel(b); }
        if (amk_dtype_is_block(b->dtype) && (i >= ni || !amk__op_block_input(t, i)))
            AMK__OPS_FAIL(OP_DTYPE, "%s %d '%s' is %s, a weight format: only a GEMV or GEMM tile's W, the "
                          "RMSNORM_* tiles' W (gate, up), EMBED's table and COPY's x take one", i < ni ? "input" : "output",
                          i < ni ? i : i - ni, amk__opshape_name(b), amk_dtype_name(b->dtype));
    }
    for (i = 0; i < t->n_params; i++) {
        const amk_param *pr = &t->params[i];
        char ty = pr->key ? amk__param_field_type(pr->key) : 0;
        if (ty == 'i' && (pr->type != AMK_PARAM_INT || pr->i < INT32_MIN || pr->i > INT32_MAX))
            AMK__OPS_FAIL(PARAM_TYPE, "param '%s' must be an int32", pr->key);
        if (ty == 'f' && pr->type != AMK_PARAM_REAL && pr->type != AMK_PARAM_INT)
            AMK__OPS_FAIL(PARAM_TYPE, "param '%s' must be a real number", pr->key);
    }
    amk_task_marshal_params(t, &c.P); /* int params are int32 now, so nothing truncates */

    /* ---- the opcode's own rules: its check function in the op table */
    switch (t->op) {
#define AMK__OP_CHECK_CASE(name, code, mi, ma, no, req, w, rg, ck, rf, dv, df, go, note) case code: return ck(&c);
        AMK_OPS(AMK__OP_CHECK_CASE)
#undef AMK__OP_CHECK_CASE
    default: AMK__OPS_FAIL(OP_UNKNOWN, "opcode %d is not defined", t->op);
    }
#undef AMK__OPS_FAIL
}

/* ==== >>impl_validate: spec §3 + IR_SPEC_NOTES, counter simulations (spec §3.4) =============== */
/* (part of amk.h's implementation; included once from amk.h)

   amk_program_validate runs in passes; each records every failure it finds and goes on:
     1 buffers, counters, task ids
     2 each task alone: references, opcode, arity, params, then amk__op_check
     3 waits against the producer count of their counter
     4 the dependency graph: Kahn's algorithm, one witness cycle
     5 SM assignment and the per-SM queues
     6 uses: unwritten reads, unreached outputs, on-chip buffers, page table
     7 happens-before: RACE_READ, RACE_KV, RACE_WAW, PAGE_ALIAS
     8 config and target
   A later pass skips what an earlier one found broken, so one defect gives one issue, not dozens:
   a task that fails a pass-2 check takes no part in race checks (its references, waits or regions
   cannot be trusted); a wait on the task's own counter carries no edge; a buffer with a bad kind
   gets no use checks; a cycle stops every check that needs a topological order.

   The dependency graph is bipartite, task -> its out_counter -> each task waiting on it, so it
   stays linear in size however many producers and waiters a counter has. Happens-before is exact
   for every size (IR_SPEC_NOTES 7). Every race question is "is this set of tasks inside anc(t)?",
   and a task is in anc(t) exactly when its out_counter is, so a set reduces to its counters: most
   questions end at the counters t waits on, most others after a short search back from t
   (amk__v_answer_fast); what is left goes to bit sets, anc(counter) = union over producers p of
   anc(p) + {p} and anc(task) = union over its waited counters, over tasks numbered by topological
   rank, one block of columns at a time so memory stays bounded (amk__v_answer_rows). On programs
   whose reads lie near their writers, validation grows like n log n (bench/validate_scale.c). */

#define AMK__V_MAX_ISSUES 1000   /* why: a report stays readable; the counts go on past it */
#define AMK__V_RACE_CAP 16       /* why: race issues per buffer before one summary issue */
#define AMK__V_BLOCK_WORDS 64    /* why: 4096 task columns per happens-before block */
#define AMK__V_HB_BYTES ((size_t)128 << 20) /* why: bound on the ancestor rows of one block */
#define AMK__V_MAX_COUNT (INT_MAX / 16) /* why: CSR offsets (<= 8 entries per task) fit an int */

#if defined(__GNUC__) || defined(__clang__)
#define AMK__V_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define AMK__V_PRINTF(f, a)
#endif

/* ---- small helpers ----------------------------------------------------------------------------- */

/* Entries of a list the validator may read: 0 for a negative count or a NULL array, at most cap
   (an over-long list is reported by ABI_CAP and read no further). */
AMK__FN int amk__v_len(int n, const void *items, int cap) {
    if (n <= 0 || !items) return 0;
    return n < cap ? n : cap;
}

AMK__FN int amk__v_ctz(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(x);
#else
    int i = 0;
    while (!(x & 1u)) { x >>= 1; i++; }
    return i;
#endif
}

AMK__FN int amk__v_readonly_kind(int kind) {
    return kind == AMK_KIND_WEIGHT || kind == AMK_KIND_CONST || kind == AMK_KIND_IO_INPUT;
}

/* A buffer whose reads must follow its writers in this pass. */
AMK__FN int amk__v_transient_kind(int kind) {
    return kind == AMK_KIND_ACTIVATION || kind == AMK_KIND_IO_OUTPUT || kind == AMK_KIND_KV_CACHE;
}

/* Task t adds into its output x (one of its outputs) instead of overwriting it (the op table's
   write column: ACCUM into every output, ACCUM_FIRST into its first). Such writers of
   one buffer commute, so they may run unordered among themselves; each reads what the buffer's
   other writers left, so every one of those must be ordered before it (amk__v_accum). */
AMK__FN int amk__task_accumulates(const amk_task *t, int x) {
    if (amk__op_write(t->op) == AMK_WRITE_ACCUM) return 1;
    return amk_op_accumulates(t->op, 0) && amk__v_len(t->n_outputs, t->outputs, AMK_MAX_OUTPUTS) >= 1 &&
           t->outputs[0] == x;
}

/* Input j of t is the buffer an INPLACE op (KV_APPEND: its cache) writes in place: the op writes
   one row and reads nothing of it, so it is not a read for the race rules. */
AMK__FN int amk__v_inplace_target(const amk_task *t, int j) {
    return amk__op_write(t->op) == AMK_WRITE_INPLACE && j == 1 && amk__v_len(t->n_outputs, t->outputs, 1) == 1 &&
           t->outputs[0] == t->inputs[1];
}

/* A task's param by key; unlike amk_task_param it survives NULL keys and malformed lists. */
AMK__FN const amk_param *amk__v_param(const amk_task *t, const char *key) {
    int i, np = amk__v_len(t->n_params, t->params, INT_MAX);
    for (i = 0; i < np; i++)
        if (t->params[i].key && strcmp(t->params[i].key, key) == 0) return &t->params[i];
    return NULL;
}

/* The reads below the position (RACE_KV). An ATTENTION_O_PRENORM reads its caches' rows below its
   position and never their row at it (it has that row's k and v itself), so its read of a cache
   need not follow a writer that writes only the row at the same position: one that cannot, within
   a pass, have written a row the reader reads, provided the position is the same in both, i.e.
   the position buffer is written by no task. amk__v_kv_reader_pos is the position buffer of t's
   read of KV cache x when t is such a reader (x only as its k or v cache), else -1;
   amk__v_kv_row_writer_pos that of t's write of x when t writes only the row at a position of x (an
   RMSNORM_GEMV_KV or _ROPE_KV over one row of x, or an ATTENTION_O_PRENORM writing its caches), else
   -1. The caller checks that nothing writes the position buffer. */
AMK__FN int amk__v_kv_reader_pos(const amk_program *p, const amk_task *t, int x) {
    int j, ni = amk__v_len(t->n_inputs, t->inputs, AMK_MAX_INPUTS);
    if (t->op != AMK_OP_ATTENTION_O_PRENORM || ni < 4 ||
        x < 0 || x >= p->n_buffers || p->buffers[x].kind != AMK_KIND_KV_CACHE || (t->inputs[1] != x && t->inputs[2] != x))
        return -1;
    for (j = 0; j < ni; j++)
        if (j != 1 && j != 2 && t->inputs[j] == x) return -1;
    return t->inputs[3];
}
AMK__FN int amk__v_kv_row_writer_pos(const amk_program *p, const amk_task *t, int x) {
    const amk_param *K = amk__v_param(t, "K");
    const int ni = amk__v_len(t->n_inputs, t->inputs, AMK_MAX_INPUTS);
    const int no = amk__v_len(t->n_outputs, t->outputs, AMK_MAX_OUTPUTS);
    if (ni < 4 || t->inputs[0] < 0 || t->inputs[0] >= p->n_buffers) return -1;
    if ((t->op == AMK_OP_RMSNORM_GEMV_KV || t->op == AMK_OP_RMSNORM_GEMV_ROPE_KV) && no == 1 && t->outputs[0] == x &&
        K && amk_buffer_numel(&p->buffers[t->inputs[0]]) == K->i)
        return t->inputs[3];
    if (t->op == AMK_OP_ATTENTION_O_PRENORM && no == 3 && t->outputs[0] != x &&
        (t->outputs[1] == x || t->outputs[2] == x))
        return t->inputs[3];
    return -1;
}

/* "task 3 'label'" with the task id (and the label when set). */
AMK__FN const char *amk__v_tname(const amk_program *p, int ti, char *buf, size_t size) {
    const amk_task *t = &p->tasks[ti];
    if (t->label && t->label[0]) snprintf(buf, size, "task %d '%.40s'", t->id, t->label);
    else snprintf(buf, size, "task %d", t->id);
    return buf;
}

/* "buffer 4 'name'". */
AMK__FN const char *amk__v_bname(const amk_program *p, int bi, char *buf, size_t size) {
    const amk_buffer *b = &p->buffers[bi];
    if (b->name && b->name[0]) snprintf(buf, size, "buffer %d '%.40s'", bi, b->name);
    else snprintf(buf, size, "buffer %d", bi);
    return buf;
}

/* ---- the dependency graph (shared by validate, the simulations and the critical path) ----------- */

typedef struct amk__vgraph {
    int n, nc;
    int *out_c;           /* [n] the task's out_counter, -1 when out of range */
    int *prod_off, *prod; /* counter c's producer tasks: prod[prod_off[c] .. prod_off[c+1]) */
    int *wt_off, *wt;     /* counter c's waiting tasks, one entry per valid wait not on itself */
    int *tw_off, *tw;     /* task t's waited counters (the same edges, seen from the task) */
    int *order, n_order;  /* Kahn order of the nodes: task t is node t, counter c is n + c */
    int *rank, *by_rank;  /* task <-> topological rank among tasks (valid when acyclic) */
} amk__vgraph;

AMK__FN void amk__vgraph_free(amk__vgraph *g) {
    amk__free(g->out_c);
    amk__free(g->prod_off); amk__free(g->prod);
    amk__free(g->wt_off); amk__free(g->wt);
    amk__free(g->tw_off); amk__free(g->tw);
    amk__free(g->order); amk__free(g->rank); amk__free(g->by_rank);
    memset(g, 0, sizeof *g);
}

/* Builds the edges of p's first n tasks over nc counters. Waits on a bad counter id and waits of
   a task on its own out_counter (WAIT_SELF) carry no edge. 0 on out of memory. */
AMK__FN int amk__vgraph_build(const amk_program *p, int n, int nc, amk__vgraph *g) {
    int t, j, c, *cur = NULL;
    memset(g, 0, sizeof *g);
    g->n = n;
    g->nc = nc;
    g->out_c = (int *)amk__calloc((size_t)n, sizeof(int));
    g->prod_off = (int *)amk__calloc((size_t)nc + 1, sizeof(int));
    g->wt_off = (int *)amk__calloc((size_t)nc + 1, sizeof(int));
    g->tw_off = (int *)amk__calloc((size_t)n + 1, sizeof(int));
    g->order = (int *)amk__calloc((size_t)n + (size_t)nc, sizeof(int));
    g->rank = (int *)amk__calloc((size_t)n, sizeof(int));
    g->by_rank = (int *)amk__calloc((size_t)n, sizeof(int));
    cur = (int *)amk__calloc((size_t)nc + 1, sizeof(int));
    if (!g->out_c || !g->prod_off || !g->wt_off || !g->tw_off || !g->order || !g->rank ||
        !g->by_rank || !cur)
        goto oom;
    for (t = 0; t < n; t++) {
        const amk_task *tk = &p->tasks[t];
        int oc = tk->out_counter, nw = amk__v_len(tk->n_waits, tk->waits, AMK_MAX_WAITS);
        g->out_c[t] = oc >= 0 && oc < nc ? oc : -1;
        if (g->out_c[t] >= 0) g->prod_off[oc + 1]++;
        g->tw_off[t + 1] = g->tw_off[t];
        for (j = 0; j < nw; j++) {
            c = tk->waits[j].counter;
            if (c < 0 || c >= nc || c == g->out_c[t]) continue;
            g->wt_off[c + 1]++;
            g->tw_off[t + 1]++;
        }
    }
    for (c = 0; c < nc; c++) {
        g->prod_off[c + 1] += g->prod_off[c];
        g->wt_off[c + 1] += g->wt_off[c];
    }
    g->prod = (int *)amk__calloc((size_t)g->prod_off[nc], sizeof(int));
    g->wt = (int *)amk__calloc((size_t)g->wt_off[nc], sizeof(int));
    g->tw = (int *)amk__calloc((size_t)g->tw_off[n], sizeof(int));
    if (!g->prod || !g->wt || !g->tw) goto oom;
    for (c = 0; c < nc; c++) cur[c] = g->prod_off[c];
    for (t = 0; t < n; t++)
        if (g->out_c[t] >= 0) g->prod[cur[g->out_c[t]]++] = t;
    for (c = 0; c < nc; c++) cur[c] = g->wt_off[c];
    for (t = 0; t < n; t++) {
        const amk_task *tk = &p->tasks[t];
        int nw = amk__v_len(tk->n_waits, tk->waits, AMK_MAX_WAITS), k = g->tw_off[t];
        for (j = 0; j < nw; j++) {
            c = tk->waits[j].counter;
            if (c < 0 || c >= nc || c == g->out_c[t]) continue;
            g->wt[cur[c]++] = t;
            g->tw[k++] = c;
        }
    }
    amk__free(cur);
    return 1;
oom:
    amk__free(cur);
    amk__vgraph_free(g);
    return 0;
}

/* Kahn's algorithm over tasks and counters, plus queue edges qprev[t] -> t when qprev is given
   (qnext is its inverse). Writes the node order into order, returns how many nodes it ordered
   (n + nc when acyclic); indeg (scratch, n + nc) keeps > 0 exactly for the nodes left over. */
AMK__FN int amk__vgraph_kahn(const amk__vgraph *g, const int *qprev, const int *qnext, int *indeg,
                             int *order) {
    int n = g->n, total = g->n + g->nc, head = 0, tail = 0, x, c, k;
    for (x = 0; x < n; x++) indeg[x] = g->tw_off[x + 1] - g->tw_off[x] + (qprev && qprev[x] >= 0);
    for (c = 0; c < g->nc; c++) indeg[n + c] = g->prod_off[c + 1] - g->prod_off[c];
    for (x = 0; x < total; x++)
        if (indeg[x] == 0) order[tail++] = x;
    while (head < tail) {
        x = order[head++];
        if (x < n) {
            c = g->out_c[x];
            if (c >= 0 && --indeg[n + c] == 0) order[tail++] = n + c;
            if (qnext && qnext[x] >= 0 && --indeg[qnext[x]] == 0) order[tail++] = qnext[x];
        } else {
            c = x - n;
            for (k = g->wt_off[c]; k < g->wt_off[c + 1]; k++)
                if (--indeg[g->wt[k]] == 0) order[tail++] = g->wt[k];
        }
    }
    return tail;
}

/* One cycle among the nodes Kahn left (indeg > 0). Each such node has a predecessor that was
   left too, so walking predecessors from one must come back to a node already walked: iterative,
   linear, no recursion. Writes the cycle in edge direction, from its lowest task index, into cyc and
   returns its length (0 if there is none). pos and walk are scratch of n + nc. */
AMK__FN int amk__vgraph_cycle(const amk__vgraph *g, const int *qprev, const int *indeg, int *pos,
                              int *walk, int *cyc) {
    int n = g->n, total = g->n + g->nc, x, nx, k, len = 0, m = 0, first = 0, i;
    for (x = 0; x < n && indeg[x] <= 0; x++) {}
    if (x >= n) return 0;
    for (i = 0; i < total; i++) pos[i] = -1;
    while (pos[x] < 0) {
        pos[x] = len;
        walk[len++] = x;
        nx = -1;
        if (x < n) {
            for (k = g->tw_off[x]; k < g->tw_off[x + 1] && nx < 0; k++)
                if (indeg[n + g->tw[k]] > 0) nx = n + g->tw[k];
            if (nx < 0 && qprev && qprev[x] >= 0 && indeg[qprev[x]] > 0) nx = qprev[x];
        } else {
            for (k = g->prod_off[x - n]; k < g->prod_off[x - n + 1] && nx < 0; k++)
                if (indeg[g->prod[k]] > 0) nx = g->prod[k];
        }
        if (nx < 0) return 0; /* why: unreachable while the invariant above holds */
        x = nx;
    }
    for (i = len - 1; i >= pos[x]; i--) cyc[m++] = walk[i];
    for (i = 0; i < m; i++) /* why: start at the lowest task index, so the text is stable */
        if (cyc[i] < n && (cyc[first] >= n || cyc[i] < cyc[first])) first = i;
    for (i = 0; i < m; i++) walk[i] = cyc[(first + i) % m];
    memcpy(cyc, walk, (size_t)m * sizeof(int));
    return m;
}

/* "cycle through 3 tasks: task 3 'a' -> counter 2 -> task 7 'b' -> ... -> task 3 'a'"; queue
   edges (SM_QUEUE_DEADLOCK) read "-> next on SM 0 ->". Long cycles are elided in the middle. */
AMK__FN void amk__v_cycle_text(const amk_program *p, const amk__vgraph *g, const int *cyc, int m,
                               amk__sb *sb) {
    char tn[64];
    int i, tasks = 0;
    for (i = 0; i < m; i++) tasks += cyc[i] < g->n;
    amk__sb_printf(sb, "cycle through %d task%s: ", tasks, tasks == 1 ? "" : "s");
    for (i = 0; i < m; i++) {
        int x = cyc[i], next = cyc[(i + 1) % m];
        if (x < g->n) {
            amk__sb_puts(sb, amk__v_tname(p, x, tn, sizeof tn));
            if (next < g->n) amk__sb_printf(sb, " -> next on SM %d -> ", p->tasks[x].sm);
            else amk__sb_puts(sb, " -> ");
        } else {
            amk__sb_printf(sb, "counter %d -> ", x - g->n);
        }
        if (sb->len > 160 && i < m - 2) { /* why: the issue message holds 256 characters */
            amk__sb_puts(sb, "... -> ");
            break;
        }
    }
    amk__sb_puts(sb, amk__v_tname(p, cyc[0], tn, sizeof tn));
}

typedef struct amk__v_pair { int a, b; } amk__v_pair;            /* sorted by a, then b */
typedef struct amk__v_key3 { int64_t a; int b, c; } amk__v_key3; /* sorted by a, b, c */

/* ---- the validator's state ---------------------------------------------------------------------- */

/* A question for the happens-before engine: is every member of a set (pool[set_off ..
   set_off+set_len), task indices) a transitive predecessor of target? */
typedef struct amk__vq {
    int set_off, set_len;
    int target;
    int excl;     /* 1: the target itself may be a member and does not count */
    int found;    /* a member not before target (task index), -1 while none */
    int kind;     /* AMK__VQ_* */
    int buffer;   /* the buffer the question is about */
    int other;    /* PAGE: the other buffer on the page; else -1 */
} amk__vq;

enum { AMK__VQ_READ, AMK__VQ_KV, AMK__VQ_WAW_COUNTER, AMK__VQ_WAW_OVERLAP, AMK__VQ_PAGE, AMK__VQ_ACCUM };

typedef struct amk__vctx {
    const amk_program *p;
    amk_report *rep;
    int keep;                 /* store issues (the caller passed a report) */
    int schedule_only;        /* a lowered program already validated before lowering: no op
                                 checks and no RACE_* questions (lowering changes neither), the
                                 rest (SMs, queues, on-chip buffers, pages, PAGE_ALIAS, config) */
    int oom;
    int bad_output;           /* some task names a missing output buffer (maybe the unwritten one) */
    int bad_signal;           /* some task signals a missing counter (maybe a missing producer) */
    int n, nb, nc;            /* readable task, buffer, counter counts */
    unsigned char *task_bad;  /* [n] failed a pass-2 check */
    unsigned char *buf_enum;  /* [nb] kind/dtype/space out of range */
    unsigned char *buf_shape; /* [nb] bad rank, negative dim or size overflow */
    unsigned char *page_ok;   /* [nb] on a page, and the page entry is right */
    amk__v_pair *ids;         /* [n] (task id, index) sorted by id */
    amk__vgraph g;
    int acyclic;
    int *rd_off, *rd;         /* buffer x's reader tasks (deduplicated, task order) */
    int *wr_off, *wr;         /* buffer x's writer tasks */
    int *grd_off, *grd;       /* the same lists without the tasks that failed pass 2 */
    int *gwr_off, *gwr;
    int *pool; int n_pool, cap_pool;
    amk__vq *qs; int n_qs, cap_qs;
} amk__vctx;

AMK__FN void amk__v_issue(amk__vctx *v, amk_check c, int task, int buffer, int counter,
                          const char *fmt, ...) AMK__V_PRINTF(6, 7);
AMK__FN void amk__v_issue(amk__vctx *v, amk_check c, int task, int buffer, int counter,
                          const char *fmt, ...) {
    amk_report *r = v->rep;
    amk_issue *is;
    va_list ap;
    if (amk_check_is_error(c)) r->n_errors++;
    else r->n_warnings++;
    if (!v->keep) return;
    if (r->n_items >= AMK__V_MAX_ISSUES) { r->truncated = 1; return; }
    if (!amk__grow((void **)&r->items, &r->cap_items, r->n_items + 1, sizeof(amk_issue))) {
        v->oom = 1;
        r->truncated = 1;
        return;
    }
    is = &r->items[r->n_items++];
    memset(is, 0, sizeof *is);
    is->check = c;
    is->is_error = amk_check_is_error(c);
    is->task = task;
    is->buffer = buffer;
    is->counter = counter;
    va_start(ap, fmt);
    vsnprintf(is->message, sizeof is->message, fmt, ap);
    va_end(ap);
}

/* ---- pass 1: buffers, counters, task ids ---------------------------------------------------------- */

typedef struct amk__v_named { const char *name; int idx; } amk__v_named;

AMK__FN int amk__v_cmp_named(const void *x, const void *y) {
    const amk__v_named *a = (const amk__v_named *)x, *b = (const amk__v_named *)y;
    int r = strcmp(a->name, b->name);
    return r ? r : (a->idx > b->idx) - (a->idx < b->idx);
}
AMK__FN int amk__v_cmp_pair(const void *x, const void *y) {
    const amk__v_pair *a = (const amk__v_pair *)x, *b = (const amk__v_pair *)y;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}
AMK__FN int amk__v_cmp_key3(const void *x, const void *y) {
    const amk__v_key3 *a = (const amk__v_key3 *)x, *b = (const amk__v_key3 *)y;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    if (a->b != b->b) return a->b < b->b ? -1 : 1;
    return (a->c > b->c) - (a->c < b->c);
}

AMK__FN void amk__v_buffers(amk__vctx *v) {
    const amk_program *p = v->p;
    amk__v_named *names;
    char bn[64];
    int i, d, nn = 0;
    for (i = 0; i < v->nb; i++) {
        const amk_buffer *b = &p->buffers[i];
        amk__v_bname(p, i, bn, sizeof bn);
        if (b->id != i)
            amk__v_issue(v, AMK_CHECK_REF_BUFFER, -1, i, -1,
                         "%s has id %d; a buffer id must equal its index (tasks name buffers by index)",
                         bn, b->id);
        if (b->kind < 0 || b->kind >= AMK_KIND_COUNT || b->dtype < 0 || b->dtype >= AMK_DTYPE_COUNT ||
            b->space < 0 || b->space >= AMK_SPACE_COUNT) {
            v->buf_enum[i] = 1;
            amk__v_issue(v, AMK_CHECK_BUFFER_ENUM, -1, i, -1,
                         "%s has kind %d, dtype %d, space %d; valid codes are kind 0..%d, dtype 0..%d, space 0..%d",
                         bn, b->kind, b->dtype, b->space, AMK_KIND_COUNT - 1, AMK_DTYPE_COUNT - 1,
                         AMK_SPACE_COUNT - 1);
        }
        if (b->rank < 0 || b->rank > AMK_MAX_RANK) {
            v->buf_shape[i] = 1;
            amk__v_issue(v, AMK_CHECK_BUFFER_SHAPE, -1, i, -1, "%s has rank %d; the ABI holds 0..%d",
                         bn, b->rank, AMK_MAX_RANK);
            continue;
        }
        for (d = 0; d < b->rank && b->shape[d] >= 0; d++) {}
        if (d < b->rank) {
            v->buf_shape[i] = 1;
            amk__v_issue(v, AMK_CHECK_BUFFER_SHAPE, -1, i, -1, "%s has dimension %d of size %lld",
                         bn, d, (long long)b->shape[d]);
        } else if (amk_buffer_numel(b) < 0) {
            v->buf_shape[i] = 1;
            amk__v_issue(v, AMK_CHECK_BUFFER_SHAPE, -1, i, -1, "%s: its element count overflows int64", bn);
        } else if (!v->buf_enum[i] && amk__buffer_nbytes(b) < 0) {
            v->buf_shape[i] = 1;
            amk__v_issue(v, AMK_CHECK_BUFFER_SHAPE, -1, i, -1, "%s: its byte size overflows int64", bn);
        } else if (!v->buf_enum[i] && amk_dtype_is_block(b->dtype)) { /* a GGUF block format */
            const int E = amk_dtype_block(b->dtype, NULL);
            if (b->kind != AMK_KIND_WEIGHT && b->kind != AMK_KIND_CONST) {
                v->buf_shape[i] = 1;
                amk__v_issue(v, AMK_CHECK_BUFFER_SHAPE, -1, i, -1,
                             "%s is %s, a weight format: its kind must be WEIGHT or CONST, not %s", bn,
                             amk_dtype_name(b->dtype), amk_kind_name(b->kind));
            } else if (b->rank < 1 || b->shape[b->rank - 1] % E != 0) {
                v->buf_shape[i] = 1;
                amk__v_issue(v, AMK_CHECK_BUFFER_SHAPE, -1, i, -1,
                             "%s is %s: its rows (last dimension %lld) must be whole blocks of %d", bn,
                             amk_dtype_name(b->dtype), (long long)(b->rank < 1 ? 0 : b->shape[b->rank - 1]), E);
            }
        }
    }
    names = (amk__v_named *)amk__calloc((size_t)v->nb + 1, sizeof(amk__v_named));
    if (!names) { v->oom = 1; return; }
    for (i = 0; i < v->nb; i++)
        if (p->buffers[i].name) { names[nn].name = p->buffers[i].name; names[nn++].idx = i; }
    qsort(names, (size_t)nn, sizeof *names, amk__v_cmp_named);
    for (i = 1; i < nn; i++) {
        int first = i - 1;
        if (strcmp(names[i].name, names[i - 1].name) != 0) continue;
        while (first > 0 && strcmp(names[first - 1].name, names[i].name) == 0) first--;
        amk__v_issue(v, AMK_CHECK_NAME_DUP, -1, names[i].idx, -1,
                     "buffers %d and %d are both named '%.60s'", names[first].idx, names[i].idx,
                     names[i].name);
    }
    amk__free(names);
}

AMK__FN void amk__v_counters_and_ids(amk__vctx *v) {
    const amk_program *p = v->p;
    amk__v_pair *ids = v->ids;
    char tn[64], tn2[64];
    int i;
    for (i = 0; i < v->nc; i++) {
        const amk_counter *c = &p->counters[i];
        if (c->id != i)
            amk__v_issue(v, AMK_CHECK_REF_COUNTER, -1, -1, i,
                         "counter at index %d has id %d; a counter id must equal its index", i, c->id);
        if (c->init != 0)
            amk__v_issue(v, AMK_CHECK_COUNTER_INIT, -1, -1, i,
                         "counter %d starts at %lld; counters are zeroed before every pass (init must be 0)",
                         i, (long long)c->init);
    }
    for (i = 0; i < v->n; i++) {
        ids[i].a = p->tasks[i].id;
        ids[i].b = i;
        if (p->tasks[i].id < 0)
            amk__v_issue(v, AMK_CHECK_TASK_ID, i, -1, -1, "%s has a negative id",
                         amk__v_tname(p, i, tn, sizeof tn));
    }
    qsort(ids, (size_t)v->n, sizeof *ids, amk__v_cmp_pair);
    for (i = 1; i < v->n; i++) {
        int first = i - 1;
        if (ids[i].a != ids[i - 1].a) continue;
        while (first > 0 && ids[first - 1].a == ids[i].a) first--;
        amk__v_issue(v, AMK_CHECK_TASK_ID, ids[i].b, -1, -1,
                     "%s (at index %d) has the same id as %s (at index %d)",
                     amk__v_tname(p, ids[i].b, tn, sizeof tn), ids[i].b,
                     amk__v_tname(p, ids[first].b, tn2, sizeof tn2), ids[first].b);
    }
}

/* Index of the task with this id (ids sorted by pass 1), or -1. */
AMK__FN int amk__v_find_id(const amk__vctx *v, int id) {
    const amk__v_pair *ids = v->ids;
    int lo = 0, hi = v->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (ids[mid].a < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < v->n && ids[lo].a == id ? ids[lo].b : -1;
}

/* ---- pass 2: each task alone -------------------------------------------------------------------- */

/* ABI_CAP for one of a task's lists; 1 if it failed. */
AMK__FN int amk__v_cap(amk__vctx *v, int ti, const char *tn, const char *what, int n,
                       const void *items, int cap) {
    if (n < 0 || (n > 0 && !items)) {
        amk__v_issue(v, AMK_CHECK_ABI_CAP, ti, -1, -1, "%s has a malformed %s list (count %d%s)", tn,
                     what, n, items ? "" : ", no array");
        return 1;
    }
    if (n > cap) {
        amk__v_issue(v, AMK_CHECK_ABI_CAP, ti, -1, -1, "%s has %d %s; the ABI holds %d", tn, n, what, cap);
        return 1;
    }
    return 0;
}

/* Checks one buffer reference of a task; 1 if it names no buffer. */
AMK__FN int amk__v_ref(amk__vctx *v, int ti, const char *tn, const char *what, int j, int x) {
    if (x >= 0 && x < v->nb) return 0;
    amk__v_issue(v, AMK_CHECK_REF_BUFFER, ti, -1, -1, "%s %s %d names buffer %d; the program has %d buffers",
                 tn, what, j, x, v->nb);
    return 1;
}

AMK__FN void amk__v_param_desc(const amk_param *pr, char *buf, size_t size) {
    switch (pr->type) {
    case AMK_PARAM_INT: snprintf(buf, size, "the integer %lld", (long long)pr->i); break;
    case AMK_PARAM_REAL: snprintf(buf, size, "the real %g", pr->f); break;
    case AMK_PARAM_BOOL: snprintf(buf, size, "a bool"); break;
    case AMK_PARAM_STRING: snprintf(buf, size, "a string"); break;
    case AMK_PARAM_NULL: snprintf(buf, size, "null"); break;
    default: snprintf(buf, size, "of unknown type %d", (int)pr->type); break;
    }
}

/* PARAM_TYPE, PARAM_UNKNOWN and PARAM_MISSING for one task; 1 if an error was found. */
AMK__FN int amk__v_params(amk__vctx *v, int ti, const char *tn, const amk_op_spec *spec) {
    const amk_task *t = &v->p->tasks[ti];
    int i, k, bad = 0, np = amk__v_len(t->n_params, t->params, INT_MAX);
    char desc[64];
    if (t->n_params < 0 || (t->n_params > 0 && !t->params)) {
        amk__v_issue(v, AMK_CHECK_PARAM_TYPE, ti, -1, -1, "%s has a malformed param list (count %d)",
                     tn, t->n_params);
        bad = 1;
    }
    for (i = 0; i < np; i++) {
        const amk_param *pr = &t->params[i];
        char ty;
        if (!pr->key) {
            amk__v_issue(v, AMK_CHECK_PARAM_TYPE, ti, -1, -1, "%s param %d has no key", tn, i);
            bad = 1;
            continue;
        }
        ty = amk__param_field_type(pr->key);
        amk__v_param_desc(pr, desc, sizeof desc);
        if (ty == 'i' && (pr->type != AMK_PARAM_INT || pr->i < INT32_MIN || pr->i > INT32_MAX)) {
            amk__v_issue(v, AMK_CHECK_PARAM_TYPE, ti, -1, -1, "%s param '%s' must be an int32; it is %s",
                         tn, pr->key, desc);
            bad = 1;
        } else if (ty == 'f' && !(pr->type == AMK_PARAM_INT ||
                                  (pr->type == AMK_PARAM_REAL && pr->f == pr->f &&
                                   pr->f <= DBL_MAX && pr->f >= -DBL_MAX))) {
            amk__v_issue(v, AMK_CHECK_PARAM_TYPE, ti, -1, -1,
                         "%s param '%s' must be a finite real number; it is %s", tn, pr->key, desc);
            bad = 1;
        } else if (ty == 0) {
            amk__v_issue(v, AMK_CHECK_PARAM_UNKNOWN, ti, -1, -1,
                         "%s has param '%.40s', which no opcode knows (it will not marshal)", tn, pr->key);
        }
    }
    for (k = 0; spec && k < (int)(sizeof spec->required / sizeof spec->required[0]) && spec->required[k]; k++)
        if (!amk__v_param(t, spec->required[k])) {
            amk__v_issue(v, AMK_CHECK_PARAM_MISSING, ti, -1, -1, "%s (%s) needs param '%s'", tn,
                         spec->name, spec->required[k]);
            bad = 1;
        }
    return bad;
}

AMK__FN void amk__v_tasks(amk__vctx *v) {
    const amk_program *p = v->p;
    char tn[64], bn[64], msg[200];
    int ti, j;
    for (ti = 0; ti < v->n; ti++) {
        const amk_task *t = &p->tasks[ti];
        const amk_op_spec *spec = amk_op_spec_get(t->op);
        int bad = 0, refs_ok = 1, cap_in, cap_out, ni, no, nw;
        amk__v_tname(p, ti, tn, sizeof tn);
        cap_in = amk__v_cap(v, ti, tn, "inputs", t->n_inputs, t->inputs, AMK_MAX_INPUTS);
        cap_out = amk__v_cap(v, ti, tn, "outputs", t->n_outputs, t->outputs, AMK_MAX_OUTPUTS);
        bad |= cap_in | cap_out | amk__v_cap(v, ti, tn, "waits", t->n_waits, t->waits, AMK_MAX_WAITS);
        ni = amk__v_len(t->n_inputs, t->inputs, AMK_MAX_INPUTS);
        no = amk__v_len(t->n_outputs, t->outputs, AMK_MAX_OUTPUTS);
        nw = amk__v_len(t->n_waits, t->waits, AMK_MAX_WAITS);
        for (j = 0; j < ni; j++) {
            int x = t->inputs[j];
            if (amk__v_ref(v, ti, tn, "input", j, x)) { bad = 1; refs_ok = 0; }
            else if (v->buf_enum[x] || v->buf_shape[x]) refs_ok = 0;
        }
        for (j = 0; j < no; j++) {
            int x = t->outputs[j];
            if (amk__v_ref(v, ti, tn, "output", j, x)) { bad = 1; refs_ok = 0; v->bad_output = 1; }
            else if (v->buf_enum[x] || v->buf_shape[x]) refs_ok = 0;
        }
        if (t->out_counter < 0 || t->out_counter >= v->nc) {
            amk__v_issue(v, AMK_CHECK_REF_COUNTER, ti, -1, -1,
                         "%s signals counter %d; the program has %d counters", tn, t->out_counter, v->nc);
            bad = 1;
            v->bad_signal = 1;
        }
        for (j = 0; j < nw; j++) {
            int c = t->waits[j].counter;
            if (c >= 0 && c < v->nc) continue;
            amk__v_issue(v, AMK_CHECK_REF_COUNTER, ti, -1, -1,
                         "%s wait %d names counter %d; the program has %d counters", tn, j, c, v->nc);
            bad = 1;
        }
        if (!spec) {
            if (t->op_name)
                amk__v_issue(v, AMK_CHECK_OP_UNKNOWN, ti, -1, -1, "%s has unknown opcode '%.40s'", tn, t->op_name);
            else
                amk__v_issue(v, AMK_CHECK_OP_UNKNOWN, ti, -1, -1, "%s has unknown opcode %d", tn, t->op);
            bad = 1;
        } else if (!amk__op_flags_named(t, msg, sizeof msg)) {
            amk__v_issue(v, AMK_CHECK_PARAM_VALUE, ti, -1, -1, "%s: %s", tn, msg);
            bad = 1;
        } else {
            int lo = spec->min_inputs < 0 ? 0 : spec->min_inputs;
            int hi = spec->max_inputs < 0 ? AMK_MAX_INPUTS : spec->max_inputs;
            /* why: weight-only quantized GEMV/GEMM takes x, qW, scales[, zeros] (IR_SPEC_NOTES) */
            if ((t->op == AMK_OP_GEMV_TILE || t->op == AMK_OP_GEMM_TILE) && amk__v_param(t, "qdtype"))
                hi = 4;
            if (!cap_in && (t->n_inputs < lo || t->n_inputs > hi)) {
                amk__v_issue(v, AMK_CHECK_OP_ARITY, ti, -1, -1, "%s (%s) has %d inputs; it takes %d..%d",
                             tn, spec->name, t->n_inputs, lo, hi);
                bad = 1;
            }
            if (!cap_out && spec->n_outputs >= 0 && t->n_outputs != spec->n_outputs) {
                amk__v_issue(v, AMK_CHECK_OP_ARITY, ti, -1, -1, "%s (%s) has %d outputs; it takes %d",
                             tn, spec->name, t->n_outputs, spec->n_outputs);
                bad = 1;
            }
        }
        bad |= amk__v_params(v, ti, tn, spec);
        for (j = 0; j < no; j++) {
            int x = t->outputs[j];
            if (x < 0 || x >= v->nb || v->buf_enum[x] || !amk__v_readonly_kind(p->buffers[x].kind)) continue;
            amk__v_issue(v, AMK_CHECK_WRITE_READONLY, ti, x, -1, "%s writes %s, a read-only %s buffer", tn,
                         amk__v_bname(p, x, bn, sizeof bn), amk_kind_name(p->buffers[x].kind));
        }
        if (!bad && refs_ok && spec && !v->schedule_only) {
            amk_check which = AMK_CHECK_OP_SHAPE;
            msg[0] = 0;
            if (!amk__op_check(p, t, &which, msg, sizeof msg)) {
                if ((int)which < 0 || which >= AMK_CHECK_COUNT) which = AMK_CHECK_OP_SHAPE;
                amk__v_issue(v, which, ti, -1, -1, "%s: %s", tn, msg);
                bad = 1;
            } else if (amk__op_caveat(p, t, msg, sizeof msg)) {
                amk__v_issue(v, AMK_CHECK_OP_LENIENT, ti, -1, -1, "%s: %s", tn, msg);
            }
        }
        v->task_bad[ti] = (unsigned char)bad;
    }
}

/* ---- pass 3: waits ------------------------------------------------------------------------------ */

AMK__FN void amk__v_waits(amk__vctx *v) {
    const amk_program *p = v->p;
    const amk__vgraph *g = &v->g;
    char tn[64];
    int ti, j;
    for (ti = 0; ti < v->n; ti++) {
        const amk_task *t = &p->tasks[ti];
        int nw = amk__v_len(t->n_waits, t->waits, AMK_MAX_WAITS);
        for (j = 0; j < nw; j++) {
            int c = t->waits[j].counter, np;
            long long thr = (long long)t->waits[j].threshold;
            if (c < 0 || c >= v->nc) continue; /* REF_COUNTER */
            np = g->prod_off[c + 1] - g->prod_off[c];
            if (c != g->out_c[ti] && thr >= 1 && thr == np) continue; /* why: the common case, no name to format */
            amk__v_tname(p, ti, tn, sizeof tn);
            if (c == g->out_c[ti])
                amk__v_issue(v, AMK_CHECK_WAIT_SELF, ti, -1, c,
                             "%s waits on counter %d, which only its own completion can advance: it never starts",
                             tn, c);
            else if (thr >= 1 && thr > np && v->bad_signal)
                continue; /* why: the task with a bad out_counter may be the missing producer */
            else if (np == 0)
                amk__v_issue(v, AMK_CHECK_WAIT_UNSATISFIABLE, ti, -1, c,
                             "%s waits on counter %d for %lld, but no task signals counter %d", tn, c, thr, c);
            else if (thr < 1 || thr > np)
                amk__v_issue(v, AMK_CHECK_WAIT_UNSATISFIABLE, ti, -1, c,
                             "%s waits on counter %d for %lld; it has %d producer%s (a threshold must be in 1..%d)",
                             tn, c, thr, np, np == 1 ? "" : "s", np);
            else if (thr < np)
                amk__v_issue(v, AMK_CHECK_WAIT_PARTIAL_JOIN, ti, -1, c,
                             "%s waits on counter %d for %lld of its %d producers: the first to "
                             "finish may not be the ones it needs (wait for %d)",
                             tn, c, thr, np, np);
        }
    }
}

/* ---- pass 4: the graph ------------------------------------------------------------------------- */

/* Kahn over the dependency graph (plus queue edges when qprev is given); on a cycle reports one
   witness as check c. Returns 1 if acyclic, 0 if not or on out of memory (v->oom). */
AMK__FN int amk__v_acyclic(amk__vctx *v, const int *qprev, const int *qnext, amk_check c, int *order) {
    size_t total = (size_t)v->n + (size_t)v->nc;
    int *indeg = (int *)amk__calloc(total, sizeof(int));
    int *pos = NULL, *walk = NULL, *cyc = NULL, m, done;
    amk__sb sb;
    if (!indeg) { v->oom = 1; return 0; }
    done = amk__vgraph_kahn(&v->g, qprev, qnext, indeg, order);
    if ((size_t)done == total) { amk__free(indeg); return 1; }
    pos = (int *)amk__calloc(total, sizeof(int));
    walk = (int *)amk__calloc(total, sizeof(int));
    cyc = (int *)amk__calloc(total, sizeof(int));
    memset(&sb, 0, sizeof sb);
    if (!pos || !walk || !cyc) {
        v->oom = 1;
    } else if ((m = amk__vgraph_cycle(&v->g, qprev, indeg, pos, walk, cyc)) > 0) {
        amk__v_cycle_text(v->p, &v->g, cyc, m, &sb);
        if (sb.oom) v->oom = 1;
        else amk__v_issue(v, c, cyc[0], -1, -1, "%s%s",
                          c == AMK_CHECK_SM_QUEUE_DEADLOCK ? "the per-SM queues deadlock: " : "", sb.p);
    } else {
        amk__v_issue(v, c, -1, -1, -1, "the dependency graph has a cycle");
    }
    amk__sb_free(&sb);
    amk__free(indeg); amk__free(pos); amk__free(walk); amk__free(cyc);
    return 0;
}

/* ---- pass 5: SMs -------------------------------------------------------------------------------- */

/* SM_QUEUE_ORDER: for every edge a -> b with sm[a] == sm[b], a must come first in the list. Per
   counter, producers sorted by (sm, index): the last one on b's SM is the one that must precede b.
   Returns the number of issues. */
AMK__FN int amk__v_queue_order(amk__vctx *v) {
    const amk_program *p = v->p;
    const amk__vgraph *g = &v->g;
    amk__v_pair *pe;
    char tn[64], tn2[64];
    int c, k, issues = 0;
    pe = (amk__v_pair *)amk__calloc((size_t)g->prod_off[g->nc] + 1, sizeof(amk__v_pair));
    if (!pe) { v->oom = 1; return 0; }
    for (k = 0; k < g->prod_off[g->nc]; k++) { pe[k].a = p->tasks[g->prod[k]].sm; pe[k].b = g->prod[k]; }
    for (c = 0; c < g->nc; c++) {
        int lo0 = g->prod_off[c], hi0 = g->prod_off[c + 1];
        qsort(pe + lo0, (size_t)(hi0 - lo0), sizeof *pe, amk__v_cmp_pair);
        for (k = g->wt_off[c]; k < g->wt_off[c + 1]; k++) {
            int b = g->wt[k], sm = p->tasks[b].sm, lo = lo0, hi = hi0, a;
            if (sm < 0 || (k > g->wt_off[c] && g->wt[k - 1] == b)) continue;
            while (lo < hi) { /* first producer with an SM above sm */
                int mid = lo + (hi - lo) / 2;
                if (pe[mid].a <= sm) lo = mid + 1;
                else hi = mid;
            }
            if (lo == lo0 || pe[lo - 1].a != sm || (a = pe[lo - 1].b) < b) continue;
            amk__v_issue(v, AMK_CHECK_SM_QUEUE_ORDER, b, -1, c,
                         "%s (queue position %d on SM %d) waits on counter %d, signalled by %s, which comes "
                         "later (position %d) in the same SM's queue: SM %d blocks forever",
                         amk__v_tname(p, b, tn, sizeof tn), b, sm, c, amk__v_tname(p, a, tn2, sizeof tn2),
                         a, sm);
            issues++;
        }
    }
    amk__free(pe);
    return issues;
}

/* SM_QUEUE_DEADLOCK: dependencies plus "next in this SM's queue" edges must stay acyclic. */
AMK__FN void amk__v_queue_deadlock(amk__vctx *v) {
    const amk_program *p = v->p;
    amk__v_pair *q = (amk__v_pair *)amk__calloc((size_t)v->n + 1, sizeof(amk__v_pair));
    int *qprev = (int *)amk__calloc((size_t)v->n + 1, sizeof(int));
    int *qnext = (int *)amk__calloc((size_t)v->n + 1, sizeof(int));
    int *order = (int *)amk__calloc((size_t)v->n + (size_t)v->nc + 1, sizeof(int));
    int i, nq = 0;
    if (!q || !qprev || !qnext || !order) {
        v->oom = 1;
    } else {
        for (i = 0; i < v->n; i++) {
            qprev[i] = qnext[i] = -1;
            if (p->tasks[i].sm >= 0) { q[nq].a = p->tasks[i].sm; q[nq++].b = i; }
        }
        qsort(q, (size_t)nq, sizeof *q, amk__v_cmp_pair);
        for (i = 1; i < nq; i++)
            if (q[i].a == q[i - 1].a) { qprev[q[i].b] = q[i - 1].b; qnext[q[i - 1].b] = q[i].b; }
        amk__v_acyclic(v, qprev, qnext, AMK_CHECK_SM_QUEUE_DEADLOCK, order);
    }
    amk__free(q); amk__free(qprev); amk__free(qnext); amk__free(order);
}

AMK__FN void amk__v_sms(amk__vctx *v) {
    const amk_program *p = v->p;
    char tn[64];
    int i, assigned = 0, unassigned = 0, first_un = -1;
    for (i = 0; i < v->n; i++) {
        int sm = p->tasks[i].sm;
        if (sm >= 0) assigned++;
        if (sm == -1 && unassigned++ == 0) first_un = i;
        if (sm < -1)
            amk__v_issue(v, AMK_CHECK_SM_RANGE, i, -1, -1, "%s is on SM %d (-1 means unassigned)",
                         amk__v_tname(p, i, tn, sizeof tn), sm);
    }
    if (!assigned) return;
    /* why a warning: the spec's reference lowering pins only its split-KV attention tiles, and its
       validator checks the queues of the pinned tasks alone, as this pass does; the reference VM
       needs no SMs, and the GPU runtime refuses a task without one until amk_program_lower */
    if (unassigned)
        amk__v_issue(v, AMK_CHECK_SM_MIXED, first_un, -1, -1,
                     "%d task%s have an SM and %d do not (the first without one is %s)", assigned,
                     assigned == 1 ? "" : "s", unassigned, amk__v_tname(p, first_un, tn, sizeof tn));
    if (p->has_target)
        for (i = 0; i < v->n; i++)
            if (p->tasks[i].sm >= p->target.num_sms)
                amk__v_issue(v, AMK_CHECK_SM_RANGE, i, -1, -1, "%s is on SM %d; the target has %d SMs",
                             amk__v_tname(p, i, tn, sizeof tn), p->tasks[i].sm, p->target.num_sms);
    if (v->acyclic && !v->oom && amk__v_queue_order(v) == 0 && !v->oom) amk__v_queue_deadlock(v);
}

/* ---- pass 6: uses ------------------------------------------------------------------------------- */

/* Builds the reader and writer lists of every buffer: one entry per (buffer, task) in task order.
   KV_APPEND's in-place cache input is not a read. 0 on out of memory. */
AMK__FN int amk__v_uses(amk__vctx *v) {
    const amk_program *p = v->p;
    int pass, ti, j, x, *last = (int *)amk__calloc((size_t)v->nb + 1, sizeof(int));
    int *rcur = NULL, *wcur = NULL;
    v->rd_off = (int *)amk__calloc((size_t)v->nb + 1, sizeof(int));
    v->wr_off = (int *)amk__calloc((size_t)v->nb + 1, sizeof(int));
    if (!last || !v->rd_off || !v->wr_off) { amk__free(last); return 0; }
    for (pass = 0; pass < 2; pass++) {
        for (x = 0; x < v->nb; x++) last[x] = -1;
        for (ti = 0; ti < v->n; ti++) {
            const amk_task *t = &p->tasks[ti];
            int ni = amk__v_len(t->n_inputs, t->inputs, AMK_MAX_INPUTS);
            int no = amk__v_len(t->n_outputs, t->outputs, AMK_MAX_OUTPUTS);
            for (j = 0; j < ni; j++) {
                x = t->inputs[j];
                if (x < 0 || x >= v->nb || last[x] == ti || amk__v_inplace_target(t, j)) continue;
                last[x] = ti;
                if (pass == 0) v->rd_off[x + 1]++;
                else v->rd[rcur[x]++] = ti;
            }
            for (j = 0; j < no; j++) {
                x = t->outputs[j];
                if (x < 0 || x >= v->nb || last[x] == -2 - ti) continue;
                last[x] = -2 - ti; /* why: a separate mark so a read and a write both count */
                if (pass == 0) v->wr_off[x + 1]++;
                else v->wr[wcur[x]++] = ti;
            }
        }
        if (pass == 1) break;
        for (x = 0; x < v->nb; x++) {
            v->rd_off[x + 1] += v->rd_off[x];
            v->wr_off[x + 1] += v->wr_off[x];
        }
        v->rd = (int *)amk__calloc((size_t)v->rd_off[v->nb] + 1, sizeof(int));
        v->wr = (int *)amk__calloc((size_t)v->wr_off[v->nb] + 1, sizeof(int));
        rcur = (int *)amk__calloc((size_t)v->nb + 1, sizeof(int));
        wcur = (int *)amk__calloc((size_t)v->nb + 1, sizeof(int));
        if (!v->rd || !v->wr || !rcur || !wcur) { amk__free(last); amk__free(rcur); amk__free(wcur); return 0; }
        memcpy(rcur, v->rd_off, (size_t)v->nb * sizeof(int));
        memcpy(wcur, v->wr_off, (size_t)v->nb * sizeof(int));
    }
    amk__free(last); amk__free(rcur); amk__free(wcur);
    return 1;
}

/* Copies per-buffer task lists without the tasks that failed pass 2. 0 on out of memory. */
AMK__FN int amk__v_good_list(const amk__vctx *v, const int *off, const int *list, int **goff, int **glist) {
    int x, k, n = 0;
    *goff = (int *)amk__calloc((size_t)v->nb + 1, sizeof(int));
    *glist = (int *)amk__calloc((size_t)off[v->nb] + 1, sizeof(int));
    if (!*goff || !*glist) return 0;
    for (x = 0; x < v->nb; x++) {
        (*goff)[x] = n;
        for (k = off[x]; k < off[x + 1]; k++)
            if (!v->task_bad[list[k]]) (*glist)[n++] = list[k];
    }
    (*goff)[v->nb] = n;
    return 1;
}

/* READ_UNWRITTEN, OUTPUT_UNREACHED, ONCHIP_SM, ONCHIP_UNASSIGNED: facts about uses alone. */
AMK__FN void amk__v_use_checks(amk__vctx *v) {
    const amk_program *p = v->p;
    char tn[64], tn2[64], bn[64];
    int x, k;
    for (x = 0; x < v->nb; x++) {
        const amk_buffer *b = &p->buffers[x];
        int nr = v->rd_off[x + 1] - v->rd_off[x], nw = v->wr_off[x + 1] - v->wr_off[x];
        if (v->buf_enum[x]) continue;
        amk__v_bname(p, x, bn, sizeof bn);
        /* why: with a task writing a missing buffer id, "nothing writes x" may be that typo */
        if (nr && !nw && !v->bad_output && (b->kind == AMK_KIND_ACTIVATION || b->kind == AMK_KIND_IO_OUTPUT))
            amk__v_issue(v, AMK_CHECK_READ_UNWRITTEN, v->rd[v->rd_off[x]], x, -1,
                         "%s (%s) is read by %s%s but no task writes it", bn, amk_kind_name(b->kind),
                         amk__v_tname(p, v->rd[v->rd_off[x]], tn, sizeof tn),
                         nr > 1 ? " and others" : "");
        if (!nw && !v->bad_output && b->kind == AMK_KIND_IO_OUTPUT)
            amk__v_issue(v, AMK_CHECK_OUTPUT_UNREACHED, -1, x, -1, "output %s is never written", bn);
        if (b->space == AMK_SPACE_SMEM || b->space == AMK_SPACE_REGISTER) {
            int on = -1, off = -1, un = -1, first = -1, multi = 0;
            for (k = 0; k < nr + nw; k++) {
                int u = k < nr ? v->rd[v->rd_off[x] + k] : v->wr[v->wr_off[x] + k - nr];
                int sm = p->tasks[u].sm;
                if (first < 0) first = u;
                else if (u != first) multi = 1;
                if (sm < 0) { if (un < 0) un = u; }
                else if (on < 0) on = u;
                else if (sm != p->tasks[on].sm && off < 0) off = u;
            }
            if (off >= 0)
                amk__v_issue(v, AMK_CHECK_ONCHIP_SM, on, x, -1,
                             "%s lives in %s but %s runs on SM %d and %s on SM %d: on-chip memory does not cross SMs",
                             bn, amk_space_name(b->space), amk__v_tname(p, on, tn, sizeof tn),
                             p->tasks[on].sm, amk__v_tname(p, off, tn2, sizeof tn2), p->tasks[off].sm);
            if (multi && un >= 0)
                amk__v_issue(v, AMK_CHECK_ONCHIP_UNASSIGNED, un, x, -1,
                             "%s lives in %s and is used by several tasks, %s among them "
                             "without an SM: they must all run on one SM",
                             bn, amk_space_name(b->space), amk__v_tname(p, un, tn, sizeof tn));
        }
    }
}

/* PAGE_REF; marks page_ok for the buffers whose page entry is right. */
AMK__FN void amk__v_page_refs(amk__vctx *v) {
    const amk_program *p = v->p;
    char bn[64];
    int i, x, np = amk__v_len(p->n_pages, p->pages, INT_MAX);
    if (!p->has_pages) return;
    if (p->n_pages < 0 || (p->n_pages > 0 && !p->pages))
        amk__v_issue(v, AMK_CHECK_PAGE_REF, -1, -1, -1, "the page list is malformed (count %d)", p->n_pages);
    for (i = 0; i < np; i++) {
        const amk_page *pg = &p->pages[i];
        if (pg->id != i)
            amk__v_issue(v, AMK_CHECK_PAGE_REF, -1, -1, -1,
                         "page at index %d has id %d; a page id must equal its index", i, pg->id);
        if (pg->space < 0 || pg->space >= AMK_SPACE_COUNT || pg->nbytes < 0)
            amk__v_issue(v, AMK_CHECK_PAGE_REF, -1, -1, -1, "page %d has space %d and %lld bytes", i,
                         pg->space, (long long)pg->nbytes);
    }
    for (x = 0; p->buffer_page && x < v->nb; x++) {
        const amk_buffer *b = &p->buffers[x];
        int pg = p->buffer_page[x], ok = 1;
        int64_t nbytes;
        if (pg == -1) continue;
        amk__v_bname(p, x, bn, sizeof bn);
        if (pg < 0 || pg >= np) {
            amk__v_issue(v, AMK_CHECK_PAGE_REF, -1, x, -1, "%s is bound to page %d; there are %d pages", bn, pg, np);
            continue;
        }
        if (v->buf_enum[x]) continue;
        if (b->kind != AMK_KIND_ACTIVATION) {
            amk__v_issue(v, AMK_CHECK_PAGE_REF, -1, x, -1, "%s is a %s buffer; only activations live in pages",
                         bn, amk_kind_name(b->kind));
            ok = 0;
        }
        /* why warnings: the page decides where the buffer lives and both runtimes size a page to its
           largest buffer; the spec's reference validator checks neither */
        nbytes = v->buf_shape[x] ? -1 : amk__buffer_nbytes(b);
        if (nbytes > p->pages[pg].nbytes)
            amk__v_issue(v, AMK_CHECK_PAGE_MISMATCH, -1, x, -1, "%s needs %lld bytes but page %d holds %lld; the "
                         "page grows to %lld", bn, (long long)nbytes, pg, (long long)p->pages[pg].nbytes,
                         (long long)nbytes);
        if (p->pages[pg].space != b->space)
            amk__v_issue(v, AMK_CHECK_PAGE_MISMATCH, -1, x, -1, "%s is in %s but page %d is in %s; it lives in the "
                         "page's", bn, amk_space_name(b->space), pg, amk_space_name(p->pages[pg].space));
        v->page_ok[x] = (unsigned char)ok;
    }
}

/* ---- pass 7: happens-before --------------------------------------------------------------------- */

/* Appends n task indices to the pool; returns their offset or -1 (v->oom). */
AMK__FN int amk__v_pool_add(amk__vctx *v, const int *tasks, int n) {
    int off = v->n_pool;
    if (n > INT_MAX - off || !amk__grow((void **)&v->pool, &v->cap_pool, off + n, sizeof(int))) {
        v->oom = 1;
        return -1;
    }
    if (n) memcpy(v->pool + off, tasks, (size_t)n * sizeof(int));
    v->n_pool += n;
    return off;
}

AMK__FN void amk__v_query(amk__vctx *v, int set_off, int set_len, int target, int excl, int kind,
                          int buffer, int other) {
    amk__vq *q;
    if (v->oom || set_off < 0) return;
    if (!amk__grow((void **)&v->qs, &v->cap_qs, v->n_qs + 1, sizeof(amk__vq))) { v->oom = 1; return; }
    q = &v->qs[v->n_qs++];
    q->set_off = set_off;
    q->set_len = set_len;
    q->target = target;
    q->excl = excl;
    q->found = -1;
    q->kind = kind;
    q->buffer = buffer;
    q->other = other;
}

/* The region a writer writes: columns [n0, n1) of rows [m0, m1) (IR_SPEC_NOTES 1), in the units
   of its kind: 0 the whole buffer; 1 columns of the output's last axis (GEMV/GEMM tiles and the
   fused tiles, whose KV-row form writes columns of every cache row it may pick; ARGMAX_PARTIAL's
   pair; an ATTENTION_O_PRENORM's kv heads in its caches, the KV-row tiles' columns); 2 flat elements
   (ATTENTION_DECODE: the rows of its query heads); 3 whole rows [n0, n1) of the output's first
   axis (ADD, SILU_MUL, RMSNORM and COPY with M_tile: rows [m_off, m_off+M_tile)). Of buffer x: an
   RMSNORM_GEMV_ARGMAX writes its pair (kind 1) into its second output. Regions of different kinds
   never compare as disjoint (amk__v_waw). Kind AMK__V_REGION_POS + b: a KV form's tile of rows m
   [m0, m1) (M_tile) writes the cache rows pos[0] + m, b its position buffer. */
typedef struct amk__v_region { int64_t n0, n1, m0, m1; int task, kind; } amk__v_region;
#define AMK__V_REGION_POS 16

/* The region functions (the op table's region column): what task t writes of its output x, into r,
   which comes preset to kind 0 (the whole buffer). */
AMK__FN void amk__region_all(const amk_task *t, int x, amk__v_region *r) {
    AMK__UNUSED(t);
    AMK__UNUSED(x);
    AMK__UNUSED(r);
}

/* A tile's columns [n_off, n_off+N_tile) of every row (GEMM_TILE: of rows [m_off, m_off+M_tile));
   an RMSNORM_GEMV_ARGMAX writes its (value, index) pair into its second output. */
AMK__FN void amk__region_cols(const amk_task *t, int x, amk__v_region *r) {
    const amk_param *off = amk__v_param(t, "n_off"), *w = amk__v_param(t, "N_tile");
    const amk_param *part = amk__v_param(t, "part");
    if (t->op == AMK_OP_RMSNORM_GEMV_ARGMAX && t->n_outputs == 2 &&
        t->outputs && x == t->outputs[1]) { /* its (value, index) pair */
        if (!part || t->outputs[0] == x) return;
        r->kind = 1;
        r->n0 = 2 * part->i;
        r->n1 = r->n0 + 2;
        return;
    }
    if (!off || !w) return;
    r->kind = 1;
    r->n0 = off->i; /* why: pass 2 proved these are int32, so the sums cannot overflow */
    r->n1 = off->i + w->i;
    if (t->op == AMK_OP_GEMM_TILE) {
        const amk_param *moff = amk__v_param(t, "m_off"), *mw = amk__v_param(t, "M_tile");
        if (!mw) { r->kind = 0; r->n0 = INT64_MIN; r->n1 = INT64_MAX; return; }
        r->m0 = moff ? moff->i : 0;
        r->m1 = r->m0 + mw->i;
    } else if (amk_op_device(t->op, NULL) == AMK_OP_RMSNORM_GEMV && amk__v_param(t, "M_tile")) {
        /* rows [m_off, m_off + M_tile) of its output; a KV form's, the cache rows pos[0] + m of
           those m (the device and the reference VM refuse other positions), so of one kind a
           position buffer: rows of tiles with different positions never compare as disjoint */
        const amk_param *moff = amk__v_param(t, "m_off"), *mw = amk__v_param(t, "M_tile");
        if (t->op == AMK_OP_RMSNORM_GEMV_KV || t->op == AMK_OP_RMSNORM_GEMV_ROPE_KV) {
            if (t->n_inputs < 4 || !t->inputs) return; /* pass 2 reports it (the region stays whole) */
            r->kind = AMK__V_REGION_POS + t->inputs[3];
        }
        r->m0 = moff ? moff->i : 0;
        r->m1 = r->m0 + mw->i;
    }
}

/* ADD, SILU_MUL, ALLREDUCE_SHARD, RMSNORM, COPY, EMBED: with M_tile, rows [m_off, m_off+M_tile) of the output's first axis
   (kind 3: the rows as n0..n1, so the sort by n0 finds the neighbours); else the whole output. */
AMK__FN void amk__region_rows(const amk_task *t, int x, amk__v_region *r) {
    const amk_param *moff = amk__v_param(t, "m_off"), *mw = amk__v_param(t, "M_tile");
    AMK__UNUSED(x);
    if (!mw) return;
    r->kind = 3;
    r->n0 = moff ? moff->i : 0; /* why: pass 2 proved these are int32, so the sum cannot overflow */
    r->n1 = r->n0 + mw->i;
}

/* ARGMAX_PARTIAL's (value, index) pair: columns 2*part, 2*part+1 of every row. */
AMK__FN void amk__region_pair(const amk_task *t, int x, amk__v_region *r) {
    const amk_param *part = amk__v_param(t, "part");
    AMK__UNUSED(x);
    if (!amk__v_param(t, "n_off") || !amk__v_param(t, "N_tile") || !part) return;
    r->kind = 1;
    r->n0 = 2 * part->i;
    r->n1 = r->n0 + 2;
}

/* ATTENTION_DECODE: the flat rows of its kv heads' query heads. */
AMK__FN void amk__region_heads(const amk_task *t, int x, amk__v_region *r) {
    const amk_param *off = amk__v_param(t, "n_off"), *w = amk__v_param(t, "N_tile");
    amk_params_t P;
    int64_t rw;
    AMK__UNUSED(x);
    if (!off || !w) return;
    amk_task_marshal_params(t, &P);
    if (P.n_kv_heads < 1 || P.n_heads % P.n_kv_heads || P.head_dim < 1) return; /* pass 2 reports it */
    rw = (int64_t)(P.n_heads / P.n_kv_heads) * (P.head_dim + ((uint32_t)P.flags & AMK_ATTN_FLAG_PARTIAL ? 2 : 0));
    r->kind = 2;
    r->n0 = off->i * rw;
    r->n1 = (off->i + w->i) * rw;
    if (P.part > 0 && ((uint32_t)P.flags & AMK_ATTN_FLAG_PARTIAL)) { /* set part of the stacked partials */
        r->n0 += (int64_t)P.part * P.n_heads * (P.head_dim + 2);
        r->n1 += (int64_t)P.part * P.n_heads * (P.head_dim + 2);
    }
}

/* ATTENTION_COMBINE with N_tile: the flat elements of its heads. */
AMK__FN void amk__region_head_rows(const amk_task *t, int x, amk__v_region *r) {
    const amk_param *off = amk__v_param(t, "n_off"), *w = amk__v_param(t, "N_tile"), *hd = amk__v_param(t, "head_dim");
    AMK__UNUSED(x);
    if (!w || w->i < 1 || !hd) return;
    r->kind = 2;
    r->n0 = (int64_t)(off ? off->i : 0) * hd->i; /* why: pass 2 proved these are int32 */
    r->n1 = r->n0 + (int64_t)w->i * hd->i;
}

/* ATTENTION_O_PRENORM: a writer's cache, its kv heads' columns of the cache row (its first output,
   which it accumulates into, is whole). */
AMK__FN void amk__region_kv_heads(const amk_task *t, int x, amk__v_region *r) {
    const amk_param *off = amk__v_param(t, "n_off"), *w = amk__v_param(t, "N_tile");
    const amk_param *hd = amk__v_param(t, "head_dim");
    if (!off || !w || !hd || t->n_outputs != 3 || !t->outputs || t->outputs[0] == x) return;
    r->kind = 1;
    r->n0 = off->i * hd->i;
    r->n1 = (off->i + w->i) * hd->i;
}

/* ATTENTION_PREFILL: its query rows [m_off, m_off+M_tile), the columns of its kv heads' query heads. */
AMK__FN void amk__region_query_rows(const amk_task *t, int x, amk__v_region *r) {
    const amk_param *off = amk__v_param(t, "n_off"), *w = amk__v_param(t, "N_tile");
    const amk_param *moff = amk__v_param(t, "m_off"), *mw = amk__v_param(t, "M_tile");
    amk_params_t P;
    int64_t rw;
    AMK__UNUSED(x);
    if (!off || !w || !moff || !mw) return;
    amk_task_marshal_params(t, &P);
    if (P.n_kv_heads < 1 || P.n_heads % P.n_kv_heads || P.head_dim < 1) return; /* pass 2 reports it */
    rw = (int64_t)(P.n_heads / P.n_kv_heads) * P.head_dim;
    r->kind = 1;
    r->n0 = off->i * rw;
    r->n1 = (off->i + w->i) * rw;
    r->m0 = moff->i;
    r->m1 = moff->i + mw->i;
}

AMK__FN void amk__v_region_of(const amk_task *t, int ti, int x, amk__v_region *r) {
    r->task = ti;
    r->kind = 0;
    r->n0 = r->m0 = INT64_MIN;
    r->n1 = r->m1 = INT64_MAX;
    switch (t->op) {
#define AMK__OP_REGION_CASE(name, code, mi, ma, no, req, w, rg, ck, rf, dv, df, go, note) case code: rg(t, x, r); return;
        AMK_OPS(AMK__OP_REGION_CASE)
#undef AMK__OP_REGION_CASE
    default: return;
    }
}

AMK__FN int amk__v_cmp_region(const void *x, const void *y) {
    const amk__v_region *a = (const amk__v_region *)x, *b = (const amk__v_region *)y;
    if (a->n0 != b->n0) return a->n0 < b->n0 ? -1 : 1;
    return (a->task > b->task) - (a->task < b->task);
}

AMK__FN int amk__v_overlap(const amk__v_region *a, const amk__v_region *b) {
    if (a->kind != b->kind) return 1;
    return a->n0 < a->n1 && a->m0 < a->m1 && b->n0 < b->n1 && b->m0 < b->m1 && a->n0 < b->n1 &&
           b->n0 < a->n1 && a->m0 < b->m1 && b->m0 < a->m1;
}

/* RACE_WAW questions for one buffer (IR_SPEC_NOTES 1). Writers signalling one counter form a
   group; writers of different groups must be ordered, and it is enough to ask it of consecutive
   groups sorted by their first topological rank (ordering is transitive through a non-empty
   group, and a later group can never precede an earlier one). Inside a group, overlapping
   regions (found by a sort on n_off) must be ordered too. */
AMK__FN void amk__v_waw(amk__vctx *v, int x, amk__v_key3 *tmp, amk__v_region *reg, amk__v_pair *grp,
                          int *next) {
    const amk__vgraph *g = &v->g;
    int nw = v->gwr_off[x + 1] - v->gwr_off[x], i, j, k, base = v->n_pool, ng = 0, overlaps = 0;
    for (i = 0; i < nw; i++) {
        int t = v->gwr[v->gwr_off[x] + i];
        tmp[i].a = g->out_c[t];
        tmp[i].b = g->rank[t];
        tmp[i].c = t;
    }
    qsort(tmp, (size_t)nw, sizeof *tmp, amk__v_cmp_key3);
    for (i = 0; i < nw; i++) {
        if (amk__v_pool_add(v, &tmp[i].c, 1) < 0) return;
        if (i == 0 || tmp[i].a != tmp[i - 1].a) grp[ng++].a = base + i; /* a group starts */
    }
    for (i = 0; i < ng; i++) grp[i].b = (i + 1 < ng ? grp[i + 1].a : base + nw) - grp[i].a;
    /* tmp is free again: the groups as (first rank, pool offset, length), by first rank */
    for (i = 0; i < ng; i++) {
        tmp[i].a = g->rank[v->pool[grp[i].a]];
        tmp[i].b = grp[i].a;
        tmp[i].c = grp[i].b;
    }
    qsort(tmp, (size_t)ng, sizeof *tmp, amk__v_cmp_key3);
    for (i = 0; i + 1 < ng; i++)
        for (k = 0; k < tmp[i + 1].c; k++)
            amk__v_query(v, tmp[i].b, tmp[i].c, v->pool[tmp[i + 1].b + k], 0, AMK__VQ_WAW_COUNTER, x, -1);
    for (i = 0; i < ng && overlaps < AMK__V_RACE_CAP && !v->oom; i++) {
        int start = tmp[i].b, len = tmp[i].c;
        if (len < 2) continue;
        for (k = 0; k < len; k++) {
            int t = v->pool[start + k];
            amk__v_region_of(&v->p->tasks[t], t, x, &reg[k]);
        }
        for (k = 1; k < len && reg[k].kind == reg[0].kind; k++) {}
        if (k < len) /* why: mixed units; the sort's early stop below needs one kind, so all overlap */
            for (k = 0; k < len; k++) { reg[k].kind = 0; reg[k].n0 = reg[k].m0 = INT64_MIN; reg[k].n1 = reg[k].m1 = INT64_MAX; }
        qsort(reg, (size_t)len, sizeof *reg, amk__v_cmp_region);
        /* why: pairs of accumulating writers never count, so an accumulating reg[j] visits only
           the others (next[k]: the first index >= k that does not accumulate); with many of them
           on one counter the pairs would be quadratic */
        next[len] = len;
        for (k = len - 1; k >= 0; k--)
            next[k] = amk__task_accumulates(&v->p->tasks[reg[k].task], x) ? next[k + 1] : k;
        for (j = 0; j < len && overlaps < AMK__V_RACE_CAP; j++)
            for (k = next[j] == j ? j + 1 : next[j + 1];
                 k < len && reg[k].n0 < reg[j].n1 && overlaps < AMK__V_RACE_CAP;
                 k = next[j] == j ? k + 1 : next[k + 1]) {
                int a = reg[j].task, b = reg[k].task, lo, hi;
                if (!amk__v_overlap(&reg[j], &reg[k])) continue;
                if (next[j] != j && next[k] != k) continue; /* why: additions commute */
                lo = g->rank[a] < g->rank[b] ? a : b;
                hi = lo == a ? b : a;
                amk__v_query(v, amk__v_pool_add(v, &lo, 1), 1, hi, 0, AMK__VQ_WAW_OVERLAP, x, -1);
                overlaps++;
            }
    }
}

/* RACE_READ questions of the accumulating writers of buffer x: each reads what the other writers
   left, so every writer that does not accumulate must be ordered before it, and there must be
   one (else it adds onto whatever the memory held). tmp holds at least x's writer count. */
AMK__FN void amk__v_accum(amk__vctx *v, int x, amk__v_key3 *tmp) {
    const amk_program *p = v->p;
    int k, na = 0, np = 0, off;
    char tn[64], bn[64];
    for (k = v->gwr_off[x]; k < v->gwr_off[x + 1]; k++) {
        if (amk__task_accumulates(&p->tasks[v->gwr[k]], x)) na++;
        else tmp[np++].c = v->gwr[k];
    }
    if (!na) return;
    if (!np) {
        for (k = v->gwr_off[x]; !amk__task_accumulates(&p->tasks[v->gwr[k]], x); k++) {}
        amk__v_issue(v, AMK_CHECK_READ_UNWRITTEN, v->gwr[k], x, -1,
                     "%s accumulates onto %s, but no task writes its starting value (a FILL, say)",
                     amk__v_tname(p, v->gwr[k], tn, sizeof tn), amk__v_bname(p, x, bn, sizeof bn));
        return;
    }
    off = v->n_pool; /* why: the pool grows at its end, so the np entries are contiguous */
    for (k = 0; k < np; k++)
        if (amk__v_pool_add(v, &tmp[k].c, 1) < 0) return;
    for (k = v->gwr_off[x]; k < v->gwr_off[x + 1]; k++)
        if (amk__task_accumulates(&p->tasks[v->gwr[k]], x))
            amk__v_query(v, off, np, v->gwr[k], 0, AMK__VQ_ACCUM, x, -1);
}

/* Creates every happens-before question: RACE_READ / RACE_KV, RACE_WAW, PAGE_ALIAS. */
AMK__FN void amk__v_questions(amk__vctx *v) {
    const amk_program *p = v->p;
    const amk__vgraph *g = &v->g;
    int x, k, maxw = 1, npe = 0;
    amk__v_key3 *tmp = NULL;
    amk__v_region *reg = NULL;
    amk__v_pair *grp = NULL;
    int *next = NULL;
    if (!amk__v_good_list(v, v->rd_off, v->rd, &v->grd_off, &v->grd) ||
        !amk__v_good_list(v, v->wr_off, v->wr, &v->gwr_off, &v->gwr)) {
        v->oom = 1;
        return;
    }
    for (x = 0; x < v->nb; x++)
        if (v->gwr_off[x + 1] - v->gwr_off[x] > maxw) maxw = v->gwr_off[x + 1] - v->gwr_off[x];
    tmp = (amk__v_key3 *)amk__calloc((size_t)(maxw > v->nb ? maxw : v->nb) + 1, sizeof(amk__v_key3));
    reg = (amk__v_region *)amk__calloc((size_t)maxw + 1, sizeof(amk__v_region));
    grp = (amk__v_pair *)amk__calloc((size_t)maxw + 1, sizeof(amk__v_pair));
    next = (int *)amk__calloc((size_t)maxw + 1, sizeof(int));
    if (!tmp || !reg || !grp || !next) { v->oom = 1; goto done; }
    for (x = 0; x < v->nb && !v->oom && !v->schedule_only; x++) {
        int kind = p->buffers[x].kind, nw = v->gwr_off[x + 1] - v->gwr_off[x], off;
        if (v->buf_enum[x] || !amk__v_transient_kind(kind) || nw == 0) continue;
        if (v->grd_off[x + 1] > v->grd_off[x]) {
            int pb_set = -1, pb_off = -1, pb_len = 0; /* the writers a reader at position pb_set needs */
            off = amk__v_pool_add(v, v->gwr + v->gwr_off[x], nw);
            for (k = v->grd_off[x]; k < v->grd_off[x + 1]; k++) {
                const int r = v->grd[k], pb = amk__v_kv_reader_pos(p, &p->tasks[r], x);
                int j;
                if (pb < 0 || pb >= v->nb || v->wr_off[pb + 1] > v->wr_off[pb]) {
                    amk__v_query(v, off, nw, r, 1, kind == AMK_KIND_KV_CACHE ? AMK__VQ_KV : AMK__VQ_READ, x, -1);
                    continue;
                }
                if (pb != pb_set) { /* why: the pool grows at its end, so the entries are contiguous */
                    pb_set = pb;
                    pb_off = v->n_pool;
                    pb_len = 0;
                    for (j = v->gwr_off[x]; j < v->gwr_off[x + 1]; j++)
                        if (amk__v_kv_row_writer_pos(p, &p->tasks[v->gwr[j]], x) != pb) {
                            if (amk__v_pool_add(v, &v->gwr[j], 1) < 0) break;
                            pb_len++;
                        }
                }
                amk__v_query(v, pb_off, pb_len, r, 1, AMK__VQ_KV, x, -1);
            }
        }
        if (nw > 1) amk__v_waw(v, x, tmp, reg, grp, next);
        amk__v_accum(v, x, tmp);
    }
    /* PAGE_ALIAS (IR_SPEC_NOTES 5): the written buffers of a page sorted by their first writer's
       rank; each must be wholly used before the next one's writers run. As with WAW groups,
       consecutive pairs suffice and a failing pair cannot hold the other way round. */
    if (p->has_pages && p->buffer_page) {
        for (x = 0; x < v->nb; x++) {
            int nw = v->gwr_off[x + 1] - v->gwr_off[x], r = INT_MAX;
            if (!v->page_ok[x] || nw == 0) continue;
            for (k = v->gwr_off[x]; k < v->gwr_off[x + 1]; k++)
                if (g->rank[v->gwr[k]] < r) r = g->rank[v->gwr[k]];
            tmp[npe].a = p->buffer_page[x];
            tmp[npe].b = r;
            tmp[npe++].c = x;
        }
        qsort(tmp, (size_t)npe, sizeof *tmp, amk__v_cmp_key3);
        for (k = 0; k + 1 < npe && !v->oom; k++) {
            int a = tmp[k].c, b = tmp[k + 1].c, off, j;
            if (tmp[k].a != tmp[k + 1].a) continue;
            off = amk__v_pool_add(v, v->grd + v->grd_off[a], v->grd_off[a + 1] - v->grd_off[a]);
            if (off < 0 || amk__v_pool_add(v, v->gwr + v->gwr_off[a], v->gwr_off[a + 1] - v->gwr_off[a]) < 0) break;
            for (j = v->gwr_off[b]; j < v->gwr_off[b + 1]; j++)
                amk__v_query(v, off, v->n_pool - off, v->gwr[j], 0, AMK__VQ_PAGE, a, b);
        }
    }
done:
    amk__free(tmp); amk__free(reg); amk__free(grp); amk__free(next);
}

/* Answering a question. A task's only successor is its out_counter, so a member s of a set is
   before t exactly when s's counter is: a set reduces to its distinct counters, each with its
   members by rank, and most questions end there, every counter being one that t waits on or
   holding a task of rank below full(t), a bound under which every task is before t (full of a
   counter: the largest over its producers p of full(p), plus one when rank(p) == full(p); of a
   task: the largest over the counters it waits on; so a chain or a join covers all before it). The
   rest are searched depth first, backwards from t, pruned at the Kahn position of the earliest
   counter still sought (no node placed before it lies on a path from it); a search stops at
   AMK__V_SEARCH_EDGES edges, and all of them together at AMK__V_SEARCH_TOTAL per graph node. A
   question that outgrows them, or whose set has more than AMK__V_FAST_GROUPS counters, is left
   to the bit sets (amk__v_answer_rows). Both give the member of lowest rank that is not before t,
   so the issues do not depend on which one answered. */
#define AMK__V_FAST_GROUPS 64    /* why: the per-question scan of the set's counters stays short */
#define AMK__V_SEARCH_EDGES 4096 /* why: a longer search costs more than its share of the bit sets */
#define AMK__V_SEARCH_TOTAL 64   /* why: searches in all stay linear in the graph */

typedef struct amk__vsearch {
    int *pos;            /* [n + nc] node -> its position in g->order */
    int *full;           /* [n + nc] every task of a lower rank is before the node */
    int *seen, *want;    /* [n + nc] visited, [nc] sought: the stamp of the current question */
    int *stack;          /* [2 (n + nc)] (node, next edge) pairs */
    amk__v_key3 *mem;    /* the current set as (counter, rank, task), sorted */
    int *gs, ng;         /* its groups, one a counter: mem[gs[i] .. gs[i+1]) */
    int set_off, set_len, rmin, rmax; /* the current set, its lowest and highest rank */
    int64_t left;        /* edges the searches may still take, all together */
} amk__vsearch;

/* Loads the set pool[off .. off+len) into s, grouped by counter. */
AMK__FN void amk__v_set_groups(const amk__vctx *v, amk__vsearch *s, int off, int len) {
    const amk__vgraph *g = &v->g;
    int k;
    s->set_off = off;
    s->set_len = len;
    s->ng = 0;
    s->rmin = INT_MAX;
    s->rmax = -1;
    for (k = 0; k < len; k++) {
        int t = v->pool[off + k];
        s->mem[k].a = g->out_c[t];
        s->mem[k].b = g->rank[t];
        s->mem[k].c = t;
        if (g->rank[t] < s->rmin) s->rmin = g->rank[t];
        if (g->rank[t] > s->rmax) s->rmax = g->rank[t];
    }
    qsort(s->mem, (size_t)len, sizeof *s->mem, amk__v_cmp_key3);
    for (k = 0; k < len; k++)
        if (k == 0 || s->mem[k].a != s->mem[k - 1].a) s->gs[s->ng++] = k;
    s->gs[s->ng] = len;
}

/* The rank of group i's first member that counts for q (the target does not when q->excl), or -1
   when none does. */
AMK__FN int amk__v_group_first(const amk__vsearch *s, const amk__vq *q, int i) {
    int k = s->gs[i];
    while (k < s->gs[i + 1] && q->excl && s->mem[k].c == q->target) k++;
    return k < s->gs[i + 1] ? s->mem[k].b : -1;
}

/* Answers q from the counters of its set (loaded in s); 0 when it is left to the bit sets. */
AMK__FN int amk__v_answer_fast(const amk__vctx *v, amk__vq *q, amk__vsearch *s, int stamp) {
    const amk__vgraph *g = &v->g;
    const int n = v->n, t = q->target;
    int i, j, r, c, best = INT_MAX, pending = 0, lowpos = INT_MAX, sp, edges = 0;
    int *st = s->stack;
    if (s->ng > AMK__V_FAST_GROUPS) return 0;
    for (i = 0; i < s->ng; i++) {
        int direct = 0;
        c = (int)s->mem[s->gs[i]].a;
        if ((r = amk__v_group_first(s, q, i)) < 0) continue;
        if (c < 0) { /* why: it signals no counter, so it is before no task */
            if (r < best) best = r;
            continue;
        }
        if (s->mem[s->gs[i]].b < s->full[t]) continue; /* why: one member is before t, so c is */
        for (j = g->tw_off[t]; j < g->tw_off[t + 1] && !direct; j++) direct = g->tw[j] == c;
        if (direct) continue;
        s->want[c] = stamp;
        pending++;
        if (s->pos[n + c] < lowpos) lowpos = s->pos[n + c];
    }
    if (pending) {
        s->seen[t] = stamp;
        st[0] = t;
        st[1] = g->tw_off[t];
        sp = 2;
        while (sp && pending) {
            int x = st[sp - 2], e = st[sp - 1], y;
            if (e == (x < n ? g->tw_off[x + 1] : g->prod_off[x - n + 1])) { sp -= 2; continue; }
            st[sp - 1] = e + 1;
            if (++edges > AMK__V_SEARCH_EDGES || --s->left < 0) return 0;
            y = x < n ? n + g->tw[e] : g->prod[e];
            if (s->seen[y] == stamp || s->pos[y] < lowpos) continue;
            s->seen[y] = stamp;
            if (y >= n && s->want[y - n] == stamp) {
                s->want[y - n] = 0;
                pending--;
                if (s->pos[y] == lowpos) { /* why: prune at the earliest counter still sought */
                    lowpos = INT_MAX;
                    for (i = 0; i < s->ng; i++) {
                        c = (int)s->mem[s->gs[i]].a;
                        if (c >= 0 && s->want[c] == stamp && s->pos[n + c] < lowpos) lowpos = s->pos[n + c];
                    }
                }
            }
            st[sp++] = y;
            st[sp++] = y < n ? g->tw_off[y] : g->prod_off[y - n];
        }
        for (i = 0; i < s->ng && pending; i++) {
            c = (int)s->mem[s->gs[i]].a;
            if (c >= 0 && s->want[c] == stamp && (r = amk__v_group_first(s, q, i)) < best) best = r;
        }
    }
    q->found = best < INT_MAX ? g->by_rank[best] : -1;
    return 1;
}

/* Answers the questions dq[0 .. nd) exactly (qmin/qmax: the lowest and highest rank in each set)
   by ancestor rows over one block of topological ranks at a time. A block is computed only when
   one of them has a member in it, and only from its first task's position (no node before it
   has an ancestor in the block) up to the last of their targets; a question is looked at only in
   the blocks of its set's rank range (by_min: the questions by qmin). */
AMK__FN void amk__v_answer_rows(amk__vctx *v, const int *dq, int nd, const int *qmin, const int *qmax,
                                const int *pos) {
    const amk__vgraph *g = &v->g;
    size_t total = (size_t)v->n + (size_t)v->nc, W = AMK__V_BLOCK_WORDS;
    amk__word *rows, *mask, *zero;
    amk__v_pair *by_min;
    int *active, n_active = 0, next = 0, B, d, k;
    if (!nd) return;
    if (W > AMK__WORDS(v->n)) W = AMK__WORDS(v->n);
    while (W > 1 && total * W * sizeof(amk__word) > AMK__V_HB_BYTES) W /= 2;
    rows = (amk__word *)amk__calloc(total * W, sizeof(amk__word));
    mask = (amk__word *)amk__calloc(W, sizeof(amk__word));
    zero = (amk__word *)amk__calloc(W, sizeof(amk__word));
    by_min = (amk__v_pair *)amk__calloc((size_t)nd, sizeof(amk__v_pair));
    active = (int *)amk__calloc((size_t)nd, sizeof(int));
    if (!rows || !mask || !zero || !by_min || !active) { v->oom = 1; goto done; }
    for (d = 0; d < nd; d++) { by_min[d].a = qmin[d]; by_min[d].b = d; }
    qsort(by_min, (size_t)nd, sizeof *by_min, amk__v_cmp_pair); /* why: one set's questions stay together */
    for (B = 0; B < v->n; B += (int)(W * 64)) {
        int width = v->n - B < (int)(W * 64) ? v->n - B : (int)(W * 64), lo = (int)W, hi = -1;
        int prev_off = -1, prev_len = -1, start = pos[g->by_rank[B]], end = start - 1, m = 0;
        while (next < nd && by_min[next].a < B + width) active[n_active++] = by_min[next++].b;
        for (k = 0; k < n_active; k++) {
            const amk__vq *q = &v->qs[dq[active[k]]];
            if (q->found >= 0 || qmax[active[k]] < B) continue;
            active[m++] = active[k];
            if (pos[q->target] > end) end = pos[q->target];
        }
        n_active = m;
        if (!n_active) continue;
        memset(mask, 0, W * sizeof(amk__word));
        for (k = start; k <= end; k++) {
            int node = g->order[k], j;
            amk__word *row = rows + (size_t)node * W;
            size_t w;
            memset(row, 0, W * sizeof(amk__word));
            if (node < v->n) {
                for (j = g->tw_off[node]; j < g->tw_off[node + 1]; j++) {
                    const amk__word *src = rows + ((size_t)v->n + (size_t)g->tw[j]) * W;
                    if (pos[v->n + g->tw[j]] < start) continue; /* why: not computed, and empty */
                    for (w = 0; w < W; w++) row[w] |= src[w];
                }
            } else {
                int c = node - v->n;
                for (j = g->prod_off[c]; j < g->prod_off[c + 1]; j++) {
                    int pt = g->prod[j], r = g->rank[pt] - B;
                    const amk__word *src = rows + (size_t)pt * W;
                    if (pos[pt] < start) continue;
                    for (w = 0; w < W; w++) row[w] |= src[w];
                    if (r >= 0 && r < width) amk__bit_set(row, (size_t)r);
                }
            }
        }
        for (d = 0; d < n_active; d++) {
            amk__vq *q = &v->qs[dq[active[d]]];
            const amk__word *row;
            int tr, w;
            if (q->set_off != prev_off || q->set_len != prev_len) {
                for (w = lo; w <= hi; w++) mask[w] = 0;
                lo = (int)W;
                hi = -1;
                for (k = 0; k < q->set_len; k++) {
                    int r = g->rank[v->pool[q->set_off + k]] - B;
                    if (r < 0 || r >= width) continue;
                    amk__bit_set(mask, (size_t)r);
                    if (r / 64 < lo) lo = r / 64;
                    if (r / 64 > hi) hi = r / 64;
                }
                prev_off = q->set_off;
                prev_len = q->set_len;
            }
            row = pos[q->target] >= start ? rows + (size_t)q->target * W : zero;
            tr = g->rank[q->target] - B;
            for (w = lo; w <= hi; w++) {
                amk__word miss = mask[w] & ~row[w];
                if (q->excl && tr >= 0 && tr < width && tr / 64 == w) miss &= ~((amk__word)1 << (tr % 64));
                if (miss) { q->found = g->by_rank[B + w * 64 + amk__v_ctz(miss)]; break; }
            }
        }
    }
done:
    amk__free(rows); amk__free(mask); amk__free(zero); amk__free(by_min); amk__free(active);
}

/* Answers every question: from the counters and a bounded search where they suffice, else by
   the bit sets. */
AMK__FN void amk__v_answer(amk__vctx *v) {
    const amk__vgraph *g = &v->g;
    size_t total = (size_t)v->n + (size_t)v->nc;
    amk__vsearch s;
    int qi, k, maxlen = 0, nd = 0, *dq, *qmin, *qmax;
    if (!v->n_qs || !v->n) return;
    for (qi = 0; qi < v->n_qs; qi++)
        if (v->qs[qi].set_len > maxlen) maxlen = v->qs[qi].set_len;
    memset(&s, 0, sizeof s);
    s.pos = (int *)amk__calloc(total + 1, sizeof(int));
    s.full = (int *)amk__calloc(total + 1, sizeof(int));
    s.seen = (int *)amk__calloc(total + 1, sizeof(int));
    s.want = (int *)amk__calloc((size_t)v->nc + 1, sizeof(int));
    s.stack = (int *)amk__calloc(2 * total + 2, sizeof(int));
    s.mem = (amk__v_key3 *)amk__calloc((size_t)maxlen + 1, sizeof(amk__v_key3));
    s.gs = (int *)amk__calloc((size_t)maxlen + 2, sizeof(int));
    dq = (int *)amk__calloc((size_t)v->n_qs + 1, sizeof(int));
    qmin = (int *)amk__calloc((size_t)v->n_qs + 1, sizeof(int));
    qmax = (int *)amk__calloc((size_t)v->n_qs + 1, sizeof(int));
    if (!s.pos || !s.full || !s.seen || !s.want || !s.stack || !s.mem || !s.gs || !dq || !qmin || !qmax) {
        v->oom = 1;
    } else {
        s.left = (int64_t)AMK__V_SEARCH_TOTAL * (int64_t)total;
        s.set_off = s.set_len = -1;
        for (k = 0; k < g->n_order; k++) {
            int x = g->order[k], j, f = 0;
            s.pos[x] = k;
            if (x < v->n) {
                for (j = g->tw_off[x]; j < g->tw_off[x + 1]; j++)
                    if (s.full[v->n + g->tw[j]] > f) f = s.full[v->n + g->tw[j]];
            } else {
                for (j = g->prod_off[x - v->n]; j < g->prod_off[x - v->n + 1]; j++) {
                    int pt = g->prod[j], fp = s.full[pt] + (g->rank[pt] == s.full[pt]);
                    if (fp > f) f = fp;
                }
            }
            s.full[x] = f;
        }
        for (qi = 0; qi < v->n_qs; qi++) {
            amk__vq *q = &v->qs[qi];
            if (q->set_off != s.set_off || q->set_len != s.set_len) amk__v_set_groups(v, &s, q->set_off, q->set_len);
            if (amk__v_answer_fast(v, q, &s, qi + 1)) continue;
            dq[nd] = qi;
            qmin[nd] = s.rmin;
            qmax[nd++] = s.rmax;
        }
        amk__v_answer_rows(v, dq, nd, qmin, qmax, s.pos);
    }
    amk__free(s.pos); amk__free(s.full); amk__free(s.seen); amk__free(s.want); amk__free(s.stack);
    amk__free(s.mem); amk__free(s.gs);
    amk__free(dq); amk__free(qmin); amk__free(qmax);
}

/* Turns answered questions into issues, at most AMK__V_RACE_CAP per (kind, buffer, other), then
   one summary issue; one PAGE_ALIAS per pair of buffers. */
AMK__FN void amk__v_race_issues(amk__vctx *v) {
    static const amk_check checks[] = {AMK_CHECK_RACE_READ, AMK_CHECK_RACE_KV, AMK_CHECK_RACE_WAW,
                                       AMK_CHECK_RACE_WAW, AMK_CHECK_PAGE_ALIAS, AMK_CHECK_RACE_READ};
    const amk_program *p = v->p;
    char tn[64], tn2[64], bn[64], bn2[64];
    int qi, shown = 0, more = 0;
    for (qi = 0; qi <= v->n_qs; qi++) {
        const amk__vq *q = qi < v->n_qs ? &v->qs[qi] : NULL;
        const amk__vq *pq = qi > 0 ? &v->qs[qi - 1] : NULL;
        if (pq && (!q || q->kind != pq->kind || q->buffer != pq->buffer || q->other != pq->other)) {
            if (more)
                amk__v_issue(v, checks[pq->kind], -1, pq->buffer, -1, "... and %d more like the above on %s",
                             more, amk__v_bname(p, pq->buffer, bn, sizeof bn));
            shown = more = 0;
        }
        if (!q || q->found < 0) continue;
        if (shown >= (q->kind == AMK__VQ_PAGE ? 1 : AMK__V_RACE_CAP)) {
            if (q->kind != AMK__VQ_PAGE) more++;
            continue;
        }
        shown++;
        amk__v_tname(p, q->target, tn, sizeof tn);
        amk__v_tname(p, q->found, tn2, sizeof tn2);
        amk__v_bname(p, q->buffer, bn, sizeof bn);
        switch (q->kind) {
        case AMK__VQ_READ:
            amk__v_issue(v, AMK_CHECK_RACE_READ, q->target, q->buffer, -1,
                         "%s reads %s, but its writer %s is not ordered before it (no chain of waits)",
                         tn, bn, tn2);
            break;
        case AMK__VQ_KV:
            amk__v_issue(v, AMK_CHECK_RACE_KV, q->target, q->buffer, -1,
                         "%s reads KV cache %s, which %s writes in this pass without being ordered before it",
                         tn, bn, tn2);
            break;
        case AMK__VQ_WAW_COUNTER:
            amk__v_issue(v, AMK_CHECK_RACE_WAW, q->target, q->buffer, -1,
                         "%s and %s both write %s, signal different counters (%d, %d) and are not ordered",
                         tn, tn2, bn, p->tasks[q->target].out_counter, p->tasks[q->found].out_counter);
            break;
        case AMK__VQ_WAW_OVERLAP:
            amk__v_issue(v, AMK_CHECK_RACE_WAW, q->target, q->buffer, -1,
                         "%s and %s write overlapping regions of %s and are not ordered", tn, tn2, bn);
            break;
        case AMK__VQ_ACCUM:
            amk__v_issue(v, AMK_CHECK_RACE_READ, q->target, q->buffer, -1,
                         "%s accumulates onto %s, but %s, which writes it, is not ordered before it",
                         tn, bn, tn2);
            break;
        default:
            amk__v_issue(v, AMK_CHECK_PAGE_ALIAS, q->target, q->buffer, -1,
                         "%s and %s share page %d, but %s (a user of the first) is not "
                         "ordered before %s (a writer of the second)",
                         bn, amk__v_bname(p, q->other, bn2, sizeof bn2), p->buffer_page[q->buffer], tn2, tn);
            break;
        }
    }
}

/* ---- pass 8: config and target ------------------------------------------------------------------- */

AMK__FN void amk__v_config(amk__vctx *v) {
    const amk_program *p = v->p;
    const amk_config *c = &p->config;
    char gpu[80];
    int i, ne, meta_ok = 1;
    if (p->has_target && p->target.num_sms <= 0)
        amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1, "the target has %d SMs", p->target.num_sms);
    if (p->has_config) {
        if (c->threads_per_block < 32 || c->threads_per_block > 1024 || c->threads_per_block % 32)
            amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1,
                         "threads_per_block is %d; it must be a multiple of 32 in [32, 1024]", c->threads_per_block);
        if (c->pipelining_depth < 0)
            amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1, "pipelining_depth is %d; it must be >= 0",
                         c->pipelining_depth);
        if (c->smem_bytes_per_block < 0)
            amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1, "smem_bytes_per_block is %lld",
                         (long long)c->smem_bytes_per_block);
        else if (p->has_target && c->smem_bytes_per_block > p->target.smem_bytes_per_block_optin)
            amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1,
                         "smem_bytes_per_block is %lld; the target allows %lld per block",
                         (long long)c->smem_bytes_per_block, (long long)p->target.smem_bytes_per_block_optin);
        if ((int)c->sm_assignment < 0 || (int)c->sm_assignment > AMK_SM_EXPLICIT)
            amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1, "sm_assignment code %d is unknown",
                         (int)c->sm_assignment);
        if ((int)c->page_allocation < 0 || (int)c->page_allocation > AMK_PAGES_NONE)
            amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1, "page_allocation code %d is unknown",
                         (int)c->page_allocation);
        ne = c->explicit_task && c->explicit_sm ? amk__v_len(c->n_explicit, c->explicit_task, INT_MAX) : 0;
        if (c->n_explicit < 0 || (c->n_explicit > 0 && !ne))
            amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1, "the explicit sm_assignment is malformed (count %d)",
                         c->n_explicit);
        for (i = 0; i < ne; i++) {
            int sm = c->explicit_sm[i];
            if (amk__v_find_id(v, c->explicit_task[i]) < 0)
                amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1,
                             "sm_assignment names task id %d, which does not exist", c->explicit_task[i]);
            if (sm < 0 || (p->has_target && sm >= p->target.num_sms))
                amk__v_issue(v, AMK_CHECK_CONFIG_VALUE, -1, -1, -1,
                             "sm_assignment puts task id %d on SM %d, outside [0, %d)", c->explicit_task[i], sm,
                             p->has_target ? p->target.num_sms : INT_MAX);
        }
    }
    if (!p->has_target) return;
    for (i = 0; i < amk__v_len(p->n_meta, p->meta, INT_MAX); i++)
        if (!p->meta[i].key || !p->meta[i].json) meta_ok = 0;
    if (p->n_meta > 0 && !p->meta) meta_ok = 0;
    if (meta_ok && amk_program_meta_string(p, "gpu", gpu, sizeof gpu)) {
        size_t len = 0;
        while (len < sizeof p->target.name && p->target.name[len]) len++;
        if (strlen(gpu) != len || memcmp(gpu, p->target.name, len) != 0)
            amk__v_issue(v, AMK_CHECK_GPU_LABEL, -1, -1, -1,
                         "meta.gpu is '%.40s' but the target is '%.*s' (results are filed by target name)",
                         gpu, (int)(len > 40 ? 40 : len), p->target.name);
    }
}

/* ---- amk_program_validate ------------------------------------------------------------------------ */

AMK__FN void amk__v_free(amk__vctx *v) {
    amk__free(v->task_bad); amk__free(v->buf_enum); amk__free(v->buf_shape);
    amk__free(v->page_ok); amk__free(v->ids);
    amk__free(v->grd_off); amk__free(v->grd); amk__free(v->gwr_off); amk__free(v->gwr);
    amk__vgraph_free(&v->g);
    amk__free(v->rd_off); amk__free(v->rd); amk__free(v->wr_off); amk__free(v->wr);
    amk__free(v->pool); amk__free(v->qs);
}

/* amk_program_validate's passes; schedule_only as amk__vctx's. */
AMK__FN amk_result amk__validate(const amk_program *p, amk_report *report, int schedule_only) {
    amk__vctx v;
    amk_report local;
    amk_result r;
    int k;
    if (report) memset(report, 0, sizeof *report);
    if (!p) return AMK_ERR_INVALID_ARG;
    memset(&v, 0, sizeof v);
    memset(&local, 0, sizeof local);
    v.p = p;
    v.rep = report ? report : &local;
    v.keep = report != NULL;
    v.schedule_only = schedule_only;
    v.n = amk__v_len(p->n_tasks, p->tasks, INT_MAX);
    v.nb = amk__v_len(p->n_buffers, p->buffers, INT_MAX);
    v.nc = amk__v_len(p->n_counters, p->counters, INT_MAX);
    if (v.n > AMK__V_MAX_COUNT || v.nb > AMK__V_MAX_COUNT || v.nc > AMK__V_MAX_COUNT) return AMK_ERR_OUT_OF_MEMORY;
    v.task_bad = (unsigned char *)amk__calloc((size_t)v.n + 1, 1);
    v.buf_enum = (unsigned char *)amk__calloc((size_t)v.nb + 1, 1);
    v.buf_shape = (unsigned char *)amk__calloc((size_t)v.nb + 1, 1);
    v.page_ok = (unsigned char *)amk__calloc((size_t)v.nb + 1, 1);
    v.ids = (amk__v_pair *)amk__calloc((size_t)v.n + 1, sizeof(amk__v_pair));
    if (!v.task_bad || !v.buf_enum || !v.buf_shape || !v.page_ok || !v.ids) v.oom = 1;
    if (!v.oom && p->build_error != AMK_OK)
        amk__v_issue(&v, AMK_CHECK_BUILD_ERROR, -1, -1, -1, "a builder call failed (%s); the program is incomplete",
                     amk_result_str(p->build_error));
    if (!v.oom) amk__v_buffers(&v);
    if (!v.oom) amk__v_counters_and_ids(&v);
    if (!v.oom) amk__v_tasks(&v);
    if (!v.oom && !amk__vgraph_build(p, v.n, v.nc, &v.g)) v.oom = 1;
    if (!v.oom) amk__v_waits(&v);
    if (!v.oom) {
        v.acyclic = amk__v_acyclic(&v, NULL, NULL, AMK_CHECK_CYCLE, v.g.order);
        v.g.n_order = v.acyclic ? v.n + v.nc : 0;
        if (v.acyclic) {
            int rk = 0;
            for (k = 0; k < v.g.n_order; k++)
                if (v.g.order[k] < v.n) { v.g.rank[v.g.order[k]] = rk; v.g.by_rank[rk++] = v.g.order[k]; }
        }
    }
    if (!v.oom) amk__v_sms(&v);
    if (!v.oom && !amk__v_uses(&v)) v.oom = 1;
    if (!v.oom) amk__v_use_checks(&v);
    if (!v.oom) amk__v_page_refs(&v);
    if (!v.oom && v.acyclic) {
        amk__v_questions(&v);
        if (!v.oom) amk__v_answer(&v);
        if (!v.oom) amk__v_race_issues(&v);
    }
    if (!v.oom) amk__v_config(&v);
    r = v.oom ? AMK_ERR_OUT_OF_MEMORY : v.rep->n_errors ? AMK_ERR_REJECTED : AMK_OK;
    amk__v_free(&v);
    amk__free(local.items);
    return r;
}

AMK_API amk_result amk_program_validate(const amk_program *p, amk_report *report) {
    return amk__validate(p, report, 0);
}

AMK_API void amk_report_free(amk_report *r) {
    if (!r) return;
    amk__free(r->items);
    memset(r, 0, sizeof *r);
}

AMK_API void amk_report_format_issue(const amk_program *p, const amk_issue *is, char *buf, size_t size) {
    char where[128];
    int nt = p ? amk__v_len(p->n_tasks, p->tasks, INT_MAX) : 0;
    int nb = p ? amk__v_len(p->n_buffers, p->buffers, INT_MAX) : 0;
    if (!buf || !size) return;
    if (!is) { buf[0] = 0; return; }
    where[0] = 0;
    if (is->task >= 0 && is->task < nt) {
        const amk_task *t = &p->tasks[is->task];
        if (t->label && t->label[0])
            snprintf(where, sizeof where, " task %d (id %d '%.60s')", is->task, t->id, t->label);
        else snprintf(where, sizeof where, " task %d (id %d)", is->task, t->id);
    } else if (is->task >= 0) {
        snprintf(where, sizeof where, " task %d", is->task);
    } else if (is->buffer >= 0 && is->buffer < nb && p->buffers[is->buffer].name) {
        snprintf(where, sizeof where, " buffer %d '%.60s'", is->buffer, p->buffers[is->buffer].name);
    } else if (is->buffer >= 0) {
        snprintf(where, sizeof where, " buffer %d", is->buffer);
    } else if (is->counter >= 0) {
        snprintf(where, sizeof where, " counter %d", is->counter);
    }
    snprintf(buf, size, "%s %s%s: %s", is->is_error ? "error" : "warning", amk_check_id(is->check), where,
             is->message);
}

/* ---- counter simulations (spec §3.4) ------------------------------------------------------------- */

/* The waits of every counter sorted by threshold, so each increment releases the waits it
   satisfies in O(1) each. A wait on a bad counter id is never satisfied. */
typedef struct amk__vsim {
    int n, nc, nb;
    int *out_c;          /* [n] */
    int *n_waits;        /* [n] waits per task */
    int *w_off;          /* [nc+1] */
    amk__v_key3 *w;      /* (threshold, task) per wait, sorted per counter */
    /* per order */
    int *pending, *value, *ptr, *ready, n_ready;
    unsigned char *fired;
    /* race tracking (adversarial only) */
    int *rd_off, *rd;    /* per task: transient buffers it reads */
    int *rd_pos;         /* per read: the position buffer of a read below the position (RACE_KV's
                            rule: amk__v_kv_reader_pos), else -1 */
    int *wr_off, *wr;    /* per buffer: its distinct writer tasks */
    int *wcount;         /* [nb] distinct writer tasks */
    int *wfired;         /* [nb] writers fired so far */
    int *victims, n_victims; /* tasks writing a buffer some task reads */
} amk__vsim;

AMK__FN void amk__vsim_free(amk__vsim *s) {
    amk__free(s->out_c); amk__free(s->n_waits); amk__free(s->w_off); amk__free(s->w);
    amk__free(s->pending); amk__free(s->value); amk__free(s->ptr); amk__free(s->ready);
    amk__free(s->fired); amk__free(s->rd_off); amk__free(s->rd); amk__free(s->rd_pos);
    amk__free(s->wr_off); amk__free(s->wr); amk__free(s->wcount);
    amk__free(s->wfired); amk__free(s->victims);
    memset(s, 0, sizeof *s);
}

AMK__FN int amk__vsim_build(const amk_program *p, amk__vsim *s) {
    int t, j, c, *cur;
    memset(s, 0, sizeof *s);
    s->n = amk__v_len(p->n_tasks, p->tasks, INT_MAX);
    s->nc = amk__v_len(p->n_counters, p->counters, INT_MAX);
    s->nb = amk__v_len(p->n_buffers, p->buffers, INT_MAX);
    if (s->n > AMK__V_MAX_COUNT || s->nc > AMK__V_MAX_COUNT || s->nb > AMK__V_MAX_COUNT) return 0;
    s->out_c = (int *)amk__calloc((size_t)s->n + 1, sizeof(int));
    s->n_waits = (int *)amk__calloc((size_t)s->n + 1, sizeof(int));
    s->w_off = (int *)amk__calloc((size_t)s->nc + 1, sizeof(int));
    s->pending = (int *)amk__calloc((size_t)s->n + 1, sizeof(int));
    s->value = (int *)amk__calloc((size_t)s->nc + 1, sizeof(int));
    s->ptr = (int *)amk__calloc((size_t)s->nc + 1, sizeof(int));
    s->ready = (int *)amk__calloc((size_t)s->n + 1, sizeof(int));
    s->fired = (unsigned char *)amk__calloc((size_t)s->n + 1, 1);
    cur = (int *)amk__calloc((size_t)s->nc + 1, sizeof(int));
    if (!s->out_c || !s->n_waits || !s->w_off || !s->pending || !s->value || !s->ptr || !s->ready ||
        !s->fired || !cur) {
        amk__free(cur);
        return 0;
    }
    for (t = 0; t < s->n; t++) {
        const amk_task *tk = &p->tasks[t];
        int nw = amk__v_len(tk->n_waits, tk->waits, AMK_MAX_WAITS);
        s->out_c[t] = tk->out_counter >= 0 && tk->out_counter < s->nc ? tk->out_counter : -1;
        s->n_waits[t] = nw;
        for (j = 0; j < nw; j++)
            if (tk->waits[j].counter >= 0 && tk->waits[j].counter < s->nc) s->w_off[tk->waits[j].counter + 1]++;
    }
    for (c = 0; c < s->nc; c++) s->w_off[c + 1] += s->w_off[c];
    s->w = (amk__v_key3 *)amk__calloc((size_t)s->w_off[s->nc] + 1, sizeof(amk__v_key3));
    if (!s->w) { amk__free(cur); return 0; }
    memcpy(cur, s->w_off, (size_t)s->nc * sizeof(int));
    for (t = 0; t < s->n; t++) {
        const amk_task *tk = &p->tasks[t];
        for (j = 0; j < s->n_waits[t]; j++) {
            c = tk->waits[j].counter;
            if (c < 0 || c >= s->nc) continue;
            s->w[cur[c]].a = tk->waits[j].threshold;
            s->w[cur[c]].b = t;
            s->w[cur[c]++].c = j;
        }
    }
    for (c = 0; c < s->nc; c++)
        qsort(s->w + s->w_off[c], (size_t)(s->w_off[c + 1] - s->w_off[c]), sizeof(amk__v_key3), amk__v_cmp_key3);
    amk__free(cur);
    return 1;
}

/* Ready set: a binary heap on sign * index (sign 1: lowest index first, -1: highest), or a bag
   (sign 0) picked at random. */
AMK__FN void amk__vsim_push(amk__vsim *s, int t, int sign) {
    int i = s->n_ready++;
    s->ready[i] = t;
    while (sign && i > 0) {
        int up = (i - 1) / 2, tmp;
        if (sign * s->ready[up] <= sign * s->ready[i]) break;
        tmp = s->ready[up]; s->ready[up] = s->ready[i]; s->ready[i] = tmp;
        i = up;
    }
}

AMK__FN int amk__vsim_pop(amk__vsim *s, int sign, amk__rng *rng, int victim) {
    int top, i = 0;
    if (!sign) {
        int k = (int)amk__rng_below(rng, (uint64_t)s->n_ready);
        /* why: the victim waits while anything else is ready (a starved producer) */
        if (s->ready[k] == victim && s->n_ready > 1) k = (k + 1) % s->n_ready;
        top = s->ready[k];
        s->ready[k] = s->ready[--s->n_ready];
        return top;
    }
    top = s->ready[0];
    s->ready[0] = s->ready[--s->n_ready];
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i, tmp;
        if (l < s->n_ready && sign * s->ready[l] < sign * s->ready[m]) m = l;
        if (r < s->n_ready && sign * s->ready[r] < sign * s->ready[m]) m = r;
        if (m == i) break;
        tmp = s->ready[i]; s->ready[i] = s->ready[m]; s->ready[m] = tmp;
        i = m;
    }
    return top;
}

/* The first violation seen by the adversarial walk. */
typedef struct amk__vsim_race { int count, task, buffer, writer, order; } amk__vsim_race;

/* A writer of x other than t that has not fired, and with pb >= 0 is not a writer of the row at
   position pb alone (amk__v_kv_row_writer_pos); -1 when there is none. */
AMK__FN int amk__vsim_unfired(const amk_program *p, const amk__vsim *s, int t, int x, int pb) {
    int k;
    for (k = s->wr_off[x]; k < s->wr_off[x + 1]; k++) {
        const int w = s->wr[k];
        if (w != t && !s->fired[w] && (pb < 0 || amk__v_kv_row_writer_pos(p, &p->tasks[w], x) != pb)) return w;
    }
    return -1;
}

/* t just became ready: an adversary may fire it now, so every transient buffer it reads must
   already have all its writers (other than t) fired; for a read below the position, all but the
   writers of the row at it. */
AMK__FN void amk__vsim_check(const amk_program *p, amk__vsim *s, int t, amk__vsim_race *race, int order) {
    int k, j;
    const amk_task *tk = &p->tasks[t];
    int no = amk__v_len(tk->n_outputs, tk->outputs, AMK_MAX_OUTPUTS);
    for (k = s->rd_off[t]; k < s->rd_off[t + 1]; k++) {
        int x = s->rd[k], self = 0;
        for (j = 0; j < no; j++) self |= tk->outputs[j] == x;
        if (s->rd_pos[k] < 0 ? s->wfired[x] >= s->wcount[x] - self : amk__vsim_unfired(p, s, t, x, s->rd_pos[k]) < 0)
            continue;
        if (race->count++ == 0) {
            race->task = t;
            race->buffer = x;
            race->order = order;
            race->writer = amk__vsim_unfired(p, s, t, x, s->rd_pos[k]);
        }
    }
}

/* One counter-driven walk. sign picks the ready task (see amk__vsim_push); race, when given,
   checks every task as it becomes ready. order gets the fired tasks; returns how many fired. */
AMK__FN int amk__vsim_run(const amk_program *p, amk__vsim *s, int sign, amk__rng *rng, int victim,
                          int *order, amk__vsim_race *race, int order_no) {
    int t, c, nf = 0, k;
    for (t = 0; t < s->n; t++) { s->pending[t] = s->n_waits[t]; s->fired[t] = 0; }
    for (c = 0; c < s->nc; c++) {
        s->value[c] = 0;
        for (k = s->w_off[c]; k < s->w_off[c + 1] && s->w[k].a <= 0; k++) s->pending[s->w[k].b]--;
        s->ptr[c] = k;
    }
    if (race) for (k = 0; k < s->nb; k++) s->wfired[k] = 0;
    s->n_ready = 0;
    for (t = 0; t < s->n; t++)
        if (s->pending[t] == 0) {
            amk__vsim_push(s, t, sign);
            if (race) amk__vsim_check(p, s, t, race, order_no);
        }
    while (s->n_ready) {
        t = amk__vsim_pop(s, sign, rng, victim);
        s->fired[t] = 1;
        if (order) order[nf] = t;
        nf++;
        if (race) {
            const amk_task *tk = &p->tasks[t];
            int no = amk__v_len(tk->n_outputs, tk->outputs, AMK_MAX_OUTPUTS), j, i;
            for (j = 0; j < no; j++) {
                int x = tk->outputs[j], dup = 0;
                for (i = 0; i < j; i++) dup |= tk->outputs[i] == x;
                if (x >= 0 && x < s->nb && !dup) s->wfired[x]++;
            }
        }
        c = s->out_c[t];
        if (c < 0) continue;
        s->value[c]++;
        for (k = s->ptr[c]; k < s->w_off[c + 1] && s->w[k].a <= s->value[c]; k++)
            if (--s->pending[s->w[k].b] == 0) {
                amk__vsim_push(s, s->w[k].b, sign);
                if (race) amk__vsim_check(p, s, s->w[k].b, race, order_no);
            }
        s->ptr[c] = k;
    }
    return nf;
}

AMK_API amk_result amk_program_simulate(const amk_program *p, int *order, int *n_fired, int *stuck,
                                        int *n_stuck) {
    amk__vsim s;
    int nf, t, ns = 0;
    if (n_fired) *n_fired = 0;
    if (n_stuck) *n_stuck = 0;
    if (!p) return AMK_ERR_INVALID_ARG;
    if (!amk__vsim_build(p, &s)) { amk__vsim_free(&s); return AMK_ERR_OUT_OF_MEMORY; }
    nf = amk__vsim_run(p, &s, 1, NULL, -1, order, NULL, 0);
    for (t = 0; t < s.n; t++)
        if (!s.fired[t]) {
            if (stuck) stuck[ns] = t;
            ns++;
        }
    if (n_fired) *n_fired = nf;
    if (n_stuck) *n_stuck = ns;
    amk__vsim_free(&s);
    return ns ? AMK_ERR_STUCK : AMK_OK;
}

/* Reads and writers for the adversarial walk: reads of transient buffers that some task writes
   (KV_APPEND's in-place cache excepted, as in validate); victims are their writers. */
AMK__FN int amk__vsim_build_races(const amk_program *p, amk__vsim *s) {
    int t, j, i, x, pass, n_rd = 0;
    unsigned char *is_read;
    s->rd_off = (int *)amk__calloc((size_t)s->n + 1, sizeof(int));
    s->wr_off = (int *)amk__calloc((size_t)s->nb + 1, sizeof(int));
    s->wcount = (int *)amk__calloc((size_t)s->nb + 1, sizeof(int));
    s->wfired = (int *)amk__calloc((size_t)s->nb + 1, sizeof(int));
    s->victims = (int *)amk__calloc((size_t)s->n + 1, sizeof(int));
    is_read = (unsigned char *)amk__calloc((size_t)s->nb + 1, 1);
    if (!s->rd_off || !s->wr_off || !s->wcount || !s->wfired || !s->victims || !is_read) { amk__free(is_read); return 0; }
    for (pass = 0; pass < 2; pass++) { /* the distinct writers: counted, then listed */
        for (t = 0; t < s->n; t++) {
            const amk_task *tk = &p->tasks[t];
            int no = amk__v_len(tk->n_outputs, tk->outputs, AMK_MAX_OUTPUTS);
            for (j = 0; j < no; j++) {
                int dup = 0;
                x = tk->outputs[j];
                for (i = 0; i < j; i++) dup |= tk->outputs[i] == x;
                if (x < 0 || x >= s->nb || dup) continue;
                if (pass) s->wr[s->wr_off[x + 1]++] = t; /* wr_off[x + 1]: x's cursor until the pass ends */
                else s->wcount[x]++;
            }
        }
        if (pass) break;
        for (x = 0; x < s->nb; x++) s->wr_off[x + 1] = s->wr_off[x] + s->wcount[x];
        if (!(s->wr = (int *)amk__calloc((size_t)s->wr_off[s->nb] + 1, sizeof(int)))) { amk__free(is_read); return 0; }
        for (x = s->nb; x > 0; x--) s->wr_off[x] = s->wr_off[x - 1];
    }
    for (pass = 0; pass < 2; pass++) {
        n_rd = 0;
        for (t = 0; t < s->n; t++) {
            const amk_task *tk = &p->tasks[t];
            int ni = amk__v_len(tk->n_inputs, tk->inputs, AMK_MAX_INPUTS);
            s->rd_off[t] = n_rd;
            for (j = 0; j < ni; j++) {
                int dup = 0, pb;
                x = tk->inputs[j];
                for (i = 0; i < j; i++) dup |= tk->inputs[i] == x;
                if (x < 0 || x >= s->nb || dup || !s->wcount[x] || amk__v_inplace_target(tk, j)) continue;
                if (!amk__v_transient_kind(p->buffers[x].kind)) continue;
                if (pass) {
                    pb = amk__v_kv_reader_pos(p, tk, x);
                    s->rd[n_rd] = x;
                    s->rd_pos[n_rd] = pb >= 0 && pb < s->nb && !s->wcount[pb] ? pb : -1;
                }
                is_read[x] = 1;
                n_rd++;
            }
        }
        s->rd_off[s->n] = n_rd;
        if (pass == 0 && (!(s->rd = (int *)amk__calloc((size_t)n_rd + 1, sizeof(int))) ||
                          !(s->rd_pos = (int *)amk__calloc((size_t)n_rd + 1, sizeof(int))))) {
            amk__free(is_read);
            return 0;
        }
    }
    for (t = 0; t < s->n; t++) {
        const amk_task *tk = &p->tasks[t];
        int no = amk__v_len(tk->n_outputs, tk->outputs, AMK_MAX_OUTPUTS), hit = 0;
        for (j = 0; j < no; j++) hit |= tk->outputs[j] >= 0 && tk->outputs[j] < s->nb && is_read[tk->outputs[j]];
        if (hit) s->victims[s->n_victims++] = t;
    }
    amk__free(is_read);
    return 1;
}

AMK_API int amk_program_simulate_adversarial(const amk_program *p, uint64_t seed, int n_orders,
                                             amk_diag *d) {
    amk__vsim s;
    amk__vsim_race race;
    int o;
    /* why: four adversaries: the list order, its reverse, uniform random, and random with one
       writer starved so its readers get every chance to run first */
    static const int signs[4] = {1, -1, 0, 0};
    amk_diag_clear(d);
    if (!p || n_orders <= 0) return 0;
    memset(&race, 0, sizeof race);
    if (!amk__vsim_build(p, &s) || !amk__vsim_build_races(p, &s)) {
        amk__vsim_free(&s);
        amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory in the adversarial simulation");
        return -1;
    }
    for (o = 0; o < n_orders; o++) {
        amk__rng rng;
        int strategy = o % 4, victim = -1;
        amk__rng_seed(&rng, seed + (uint64_t)o);
        if (strategy == 3 && s.n_victims) victim = s.victims[amk__rng_below(&rng, (uint64_t)s.n_victims)];
        amk__vsim_run(p, &s, signs[strategy], &rng, victim, NULL, &race, o);
    }
    if (race.count && d) {
        char tn[64], tn2[64], bn[64];
        snprintf(d->check, sizeof d->check, "RACE_READ");
        d->task = race.task;
        d->buffer = race.buffer;
        amk__fail(d, AMK_ERR_REJECTED,
                  "order %d (seed %llu): %s can run before %s is fully written (its "
                  "writer %s has not run); %d violation%s in %d orders",
                  race.order, (unsigned long long)(seed + (uint64_t)race.order),
                  amk__v_tname(p, race.task, tn, sizeof tn), amk__v_bname(p, race.buffer, bn, sizeof bn),
                  race.writer >= 0 ? amk__v_tname(p, race.writer, tn2, sizeof tn2) : "?", race.count,
                  race.count == 1 ? "" : "s", n_orders);
    }
    amk__vsim_free(&s);
    return race.count;
}

AMK_API int amk_program_critical_path(const amk_program *p) {
    amk__vgraph g;
    int n, nc, *indeg, *len, k, j, best = 0;
    if (!p) return 0;
    n = amk__v_len(p->n_tasks, p->tasks, INT_MAX);
    nc = amk__v_len(p->n_counters, p->counters, INT_MAX);
    if (n > AMK__V_MAX_COUNT || nc > AMK__V_MAX_COUNT || !amk__vgraph_build(p, n, nc, &g)) return 0;
    indeg = (int *)amk__calloc((size_t)n + (size_t)nc + 1, sizeof(int));
    len = (int *)amk__calloc((size_t)n + (size_t)nc + 1, sizeof(int));
    if (indeg && len && amk__vgraph_kahn(&g, NULL, NULL, indeg, g.order) == n + nc) {
        for (k = 0; k < n + nc; k++) {
            int x = g.order[k], m = 0;
            if (x < n) {
                for (j = g.tw_off[x]; j < g.tw_off[x + 1]; j++)
                    if (len[n + g.tw[j]] > m) m = len[n + g.tw[j]];
                len[x] = m + 1;
                if (len[x] > best) best = len[x];
            } else {
                for (j = g.prod_off[x - n]; j < g.prod_off[x - n + 1]; j++)
                    if (len[g.prod[j]] > m) m = len[g.prod[j]];
                len[x] = m;
            }
        }
    }
    amk__free(indeg);
    amk__free(len);
    amk__vgraph_free(&g);
    return best;
}

/* ==== >>impl_lower: ScheduleConfig -> ordered, assigned, paged program (spec §5) ============== */
/* (part of amk.h's implementation; included once from amk.h)

   amk_program_lower works in passes over the dependency graph (producer -> counter -> waiter),
   each computed into scratch memory, so any failure before the commit leaves p untouched:
   1. order   a stable topological order: Kahn's algorithm taking the ready task with the lowest
              ORIGINAL list index, so a list that is already topological keeps its order and every
              per-SM queue (the list filtered by sm) is a linear extension of the DAG;
   2. SMs     round robin, greedy least-loaded by est_bytes, or an explicit {task id: sm} map.
              Under round robin and load balance the users of an on-chip (SMEM/REGISTER) buffer
              all follow the SM of the first of them (union-find); an explicit map is taken as is;
   3. pages   ACTIVATION buffers only: one page each (linear), or greedy reuse (graph_color) that
              puts a buffer on a page of its space only if every use of every buffer already there
              happens-before every write of the new one (the PAGE_ALIAS rule, IR_SPEC_NOTES 5).
   Then p takes the order, SMs, pages, config and target, and the result is validated. */

/* ---- a min-heap of (key, value) pairs, ordered by key then value ----------------------------- */

typedef struct amk__lower_hitem { int64_t key; int val; } amk__lower_hitem;
typedef struct amk__lower_heap { amk__lower_hitem *items; int n; } amk__lower_heap;

AMK__FN int amk__lower_hless(const amk__lower_hitem *a, const amk__lower_hitem *b) {
    return a->key < b->key || (a->key == b->key && a->val < b->val);
}

/* Pushes (key, val); the caller sized items for every push. */
AMK__FN void amk__lower_hpush(amk__lower_heap *h, int64_t key, int val) {
    int i = h->n++;
    h->items[i].key = key;
    h->items[i].val = val;
    while (i > 0) {
        int up = (i - 1) / 2;
        amk__lower_hitem tmp;
        if (!amk__lower_hless(&h->items[i], &h->items[up])) break;
        tmp = h->items[i]; h->items[i] = h->items[up]; h->items[up] = tmp;
        i = up;
    }
}

/* Removes and returns the least item (h->n > 0). */
AMK__FN amk__lower_hitem amk__lower_hpop(amk__lower_heap *h) {
    amk__lower_hitem top = h->items[0];
    int i = 0;
    h->items[0] = h->items[--h->n];
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        amk__lower_hitem tmp;
        if (l < h->n && amk__lower_hless(&h->items[l], &h->items[m])) m = l;
        if (r < h->n && amk__lower_hless(&h->items[r], &h->items[m])) m = r;
        if (m == i) break;
        tmp = h->items[i]; h->items[i] = h->items[m]; h->items[m] = tmp;
        i = m;
    }
    return top;
}

/* ---- diagnostics ------------------------------------------------------------------------------ */

AMK__FN amk_result amk__lower_oom(amk_diag *d) {
    return amk__fail(d, AMK_ERR_OUT_OF_MEMORY, "out of memory while lowering");
}

/* Fills d from a validator issue (check id, task, buffer, counter, the formatted line). */
AMK__FN amk_result amk__lower_report_issue(const amk_program *p, const amk_issue *is, amk_diag *d) {
    if (d) {
        char line[512];
        amk_report_format_issue(p, is, line, sizeof line);
        snprintf(d->check, sizeof d->check, "%s", amk_check_id(is->check));
        d->task = is->task;
        d->buffer = is->buffer;
        d->counter = is->counter;
        amk__fail(d, AMK_ERR_REJECTED, "%s", line);
    }
    return AMK_ERR_REJECTED;
}

/* Checks that lowering redoes anyway: the SM assignment, the page table, the config (replaced). */
AMK__FN int amk__lower_is_schedule_check(amk_check c) {
    return c == AMK_CHECK_SM_RANGE || c == AMK_CHECK_SM_MIXED || c == AMK_CHECK_SM_QUEUE_ORDER ||
           c == AMK_CHECK_SM_QUEUE_DEADLOCK || c == AMK_CHECK_ONCHIP_SM ||
           c == AMK_CHECK_ONCHIP_UNASSIGNED || c == AMK_CHECK_PAGE_REF ||
           c == AMK_CHECK_PAGE_ALIAS || c == AMK_CHECK_CONFIG_VALUE;
}

/* Validates p. AMK_OK when accepted; else AMK_ERR_REJECTED with the first error in d, or the
   validator's failure (out of memory). Before lowering (before set) everything but the checks of
   a schedule, which lowering replaces; after it, the schedule's alone (amk__vctx.schedule_only):
   lowering reorders the tasks and gives them SMs and pages, and changes nothing else, so the
   program is validated once. */
AMK__FN amk_result amk__lower_validate(const amk_program *p, int before, amk_diag *d) {
    amk_report rep;
    amk_result r;
    int i;
    memset(&rep, 0, sizeof rep);
    r = amk__validate(p, &rep, !before);
    if (r == AMK_ERR_REJECTED) {
        r = AMK_OK;
        for (i = 0; i < rep.n_items; i++) {
            const amk_issue *is = &rep.items[i];
            if (!is->is_error || (before && amk__lower_is_schedule_check(is->check))) continue;
            r = amk__lower_report_issue(p, is, d);
            break;
        }
        if (r == AMK_OK && rep.truncated)
            r = amk__fail(d, AMK_ERR_REJECTED, "validate rejected the program (its report was truncated)");
    } else if (r != AMK_OK) {
        r = amk__fail(d, r, "validate could not finish: %s", amk_result_str(r));
    }
    amk_report_free(&rep);
    return r;
}

/* ---- step 1: the arguments -------------------------------------------------------------------- */

typedef struct amk__lower_idpos { int id, index; } amk__lower_idpos;

AMK__FN int amk__lower_idpos_cmp(const void *a, const void *b) {
    const amk__lower_idpos *x = (const amk__lower_idpos *)a, *y = (const amk__lower_idpos *)b;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Resolves an explicit {task id: sm} map into sm_of[task index]; every task must be named once. */
AMK__FN amk_result amk__lower_explicit(const amk_program *p, const amk_config *c, int num_sms,
                                       int *sm_of, amk_diag *d) {
    amk__lower_idpos *ids;
    amk_result r = AMK_OK;
    int i, n = p->n_tasks;
    ids = (amk__lower_idpos *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(amk__lower_idpos));
    if (!ids) return amk__lower_oom(d);
    for (i = 0; i < n; i++) { ids[i].id = p->tasks[i].id; ids[i].index = i; sm_of[i] = -1; }
    qsort(ids, (size_t)n, sizeof *ids, amk__lower_idpos_cmp);
    for (i = 0; i < c->n_explicit && r == AMK_OK; i++) {
        int id = c->explicit_task[i], sm = c->explicit_sm[i], lo = 0, hi = n;
        while (lo < hi) { /* the first entry with ids[].id >= id */
            int mid = lo + (hi - lo) / 2;
            if (ids[mid].id < id) lo = mid + 1; else hi = mid;
        }
        if (lo == n || ids[lo].id != id)
            r = amk__fail(d, AMK_ERR_INVALID_ARG,
                          "explicit SM assignment entry %d names task id %d, which does not exist", i, id);
        else if (sm < 0 || sm >= num_sms)
            r = amk__fail(d, AMK_ERR_INVALID_ARG,
                          "explicit SM assignment puts task id %d on SM %d, outside [0, %d)", id, sm, num_sms);
        else if (sm_of[ids[lo].index] >= 0)
            r = amk__fail(d, AMK_ERR_INVALID_ARG, "explicit SM assignment names task id %d twice", id);
        else
            sm_of[ids[lo].index] = sm;
        if (r != AMK_OK && d) d->task = lo < n && ids[lo].id == id ? ids[lo].index : -1;
    }
    for (i = 0; i < n && r == AMK_OK; i++)
        if (sm_of[i] < 0) {
            r = amk__fail(d, AMK_ERR_INVALID_ARG,
                          "explicit SM assignment is missing task id %d (index %d)", p->tasks[i].id, i);
            if (d) d->task = i;
        }
    amk__free(ids);
    return r;
}

AMK__FN amk_result amk__lower_check_args(const amk_program *p, const amk_config *c,
                                         const amk_target *t, amk_diag *d) {
    if (!p || !c || !t) return amk__fail(d, AMK_ERR_INVALID_ARG, "lower: program, config and target are required");
    if (p->build_error != AMK_OK)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "the program has a build error (%s)", amk_result_str(p->build_error));
    if (t->num_sms < 1) return amk__fail(d, AMK_ERR_INVALID_ARG, "target.num_sms is %d; it must be >= 1", t->num_sms);
    if (c->threads_per_block < 32 || c->threads_per_block > 1024 || c->threads_per_block % 32 != 0)
        return amk__fail(d, AMK_ERR_INVALID_ARG,
                         "config.threads_per_block is %d; it must be a multiple of 32 in [32, 1024]",
                         c->threads_per_block);
    if (c->pipelining_depth < 0)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "config.pipelining_depth is %d; it must be >= 0",
                         c->pipelining_depth);
    if (c->smem_bytes_per_block < 0 || c->smem_bytes_per_block > t->smem_bytes_per_block_optin)
        return amk__fail(d, AMK_ERR_INVALID_ARG,
                         "config.smem_bytes_per_block is %lld; it must be in [0, %lld] (target opt-in)",
                         (long long)c->smem_bytes_per_block, (long long)t->smem_bytes_per_block_optin);
    if (c->sm_assignment != AMK_SM_LOAD_BALANCE && c->sm_assignment != AMK_SM_ROUND_ROBIN &&
        c->sm_assignment != AMK_SM_EXPLICIT)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "config.sm_assignment %d is not a known mode", (int)c->sm_assignment);
    if (c->page_allocation != AMK_PAGES_GRAPH_COLOR && c->page_allocation != AMK_PAGES_LINEAR &&
        c->page_allocation != AMK_PAGES_NONE)
        return amk__fail(d, AMK_ERR_INVALID_ARG, "config.page_allocation %d is not a known mode", (int)c->page_allocation);
    if (c->n_explicit < 0 || (c->n_explicit > 0 && (!c->explicit_task || !c->explicit_sm)))
        return amk__fail(d, AMK_ERR_INVALID_ARG, "config explicit SM assignment: %d entries but no arrays",
                         c->n_explicit);
    return AMK_OK;
}

/* ---- step 2: the stable topological order ----------------------------------------------------- */

/* order[k] = the original index of the task at position k. A cycle (or a task behind one) is
   AMK_ERR_REJECTED with check CYCLE. Out-of-range counter ids carry no edge (validate reports
   them); a counter nothing produces orders nothing. */
AMK__FN amk_result amk__lower_order(const amk_program *p, int *order, amk_diag *d) {
    int n = p->n_tasks, nc = p->n_counters, i, j, k = 0;
    int *left = (int *)amk__calloc((size_t)nc + 1, sizeof(int));          /* [nc] producers left */
    int *start = (int *)amk__calloc((size_t)nc + 2, sizeof(int));         /* [nc+1] CSR offsets */
    int *pending = (int *)amk__calloc((size_t)(n > 0 ? n : 1), sizeof(int));  /* [n] waits left */
    int *waiters = NULL;                                                  /* task index per wait */
    amk__lower_heap heap;
    amk_result r = AMK_OK;
    int64_t total = 0;
    heap.n = 0;
    heap.items = (amk__lower_hitem *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(amk__lower_hitem));
    if (!left || !start || !pending || !heap.items) { r = amk__lower_oom(d); goto done; }
    for (i = 0; i < n; i++) {
        int c = p->tasks[i].out_counter;
        if (c >= 0 && c < nc) left[c]++;
    }
    for (i = 0; i < n; i++)
        for (j = 0; j < p->tasks[i].n_waits; j++) {
            int c = p->tasks[i].waits[j].counter;
            if (c < 0 || c >= nc || left[c] == 0) continue;
            start[c + 1]++;
            pending[i]++;
            total++;
        }
    if (total > INT_MAX) { r = amk__fail(d, AMK_ERR_UNSUPPORTED, "too many waits (%lld)", (long long)total); goto done; }
    for (i = 0; i < nc; i++) start[i + 1] += start[i];
    waiters = (int *)amk__malloc((size_t)(total ? total : 1) * sizeof(int));
    if (!waiters) { r = amk__lower_oom(d); goto done; }
    for (i = 0; i < n; i++) /* fill, advancing start[c] as a cursor; shifted back below */
        for (j = 0; j < p->tasks[i].n_waits; j++) {
            int c = p->tasks[i].waits[j].counter;
            if (c < 0 || c >= nc || left[c] == 0) continue;
            waiters[start[c]++] = i;
        }
    for (i = nc; i > 0; i--) start[i] = start[i - 1];
    start[0] = 0;
    for (i = 0; i < n; i++)
        if (pending[i] == 0) amk__lower_hpush(&heap, i, i);
    while (heap.n > 0) {
        int ti = amk__lower_hpop(&heap).val, c = p->tasks[ti].out_counter;
        order[k++] = ti;
        if (c < 0 || c >= nc || --left[c] != 0) continue;
        for (j = start[c]; j < start[c + 1]; j++)
            if (--pending[waiters[j]] == 0) amk__lower_hpush(&heap, waiters[j], waiters[j]);
    }
    if (k < n) {
        for (i = 0; i < n && pending[i] == 0; i++) {}
        if (d) {
            d->task = i;
            snprintf(d->check, sizeof d->check, "%s", amk_check_id(AMK_CHECK_CYCLE));
        }
        r = amk__fail(d, AMK_ERR_REJECTED,
                      "task %d (id %d) is on or behind a dependency cycle: no topological order exists",
                      i, p->tasks[i].id);
    }
done:
    amk__free(left);
    amk__free(start);
    amk__free(pending);
    amk__free(waiters);
    amk__free(heap.items);
    return r;
}

/* ---- step 3: SM assignment -------------------------------------------------------------------- */

AMK__FN int amk__lower_find(int *parent, int x) {
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

AMK__FN int amk__lower_is_onchip(const amk_program *p, int b) {
    return b >= 0 && b < p->n_buffers &&
           (p->buffers[b].space == AMK_SPACE_SMEM || p->buffers[b].space == AMK_SPACE_REGISTER);
}

/* sm[k] for the task at position k. explicit_sm is sm_of[original index] (explicit mode).
   load_balance balances each dependency level on its own (the level of a task is 1 + the deepest
   producer it waits on): tasks of one level run at about the same time, so each level's bytes
   are what must spread evenly. why: balancing cumulative bytes over the whole program puts up to
   3 of one phase's GEMV tiles on one SM (that phase then takes 3 tile times) to make up for an
   earlier, larger phase. Within a level: the least level load, then the least total, then the
   lowest index; but among the SMs with that level load, one that already runs a task of the same
   opcode is taken when its total is at most max(the largest task so far, 1/8 of the chosen SM's
   total) above the chosen SM's. why: an SM's first task of an opcode runs cold (Llama's decode
   attention nearly twice as long on an SM new to it), and without this rule the per-layer
   attention tasks move to new SMs every layer (bench/RESULTS.md run 51). The bound keeps the totals
   within about one task of balanced. */
AMK__FN amk_result amk__lower_assign(const amk_program *p, const int *order, const amk_config *c,
                                     int num_sms, const int *explicit_sm, int *sm, amk_diag *d) {
    int n = p->n_tasks, k, j, m = num_sms < n ? num_sms : n;
    int *parent = NULL, *first_user = NULL, *group_sm = NULL;
    int64_t *load = NULL;
    amk__lower_heap heap;
    amk_result r = AMK_OK;
    heap.n = 0;
    heap.items = NULL;
    if (c->sm_assignment == AMK_SM_EXPLICIT) {
        for (k = 0; k < n; k++) sm[k] = explicit_sm[order[k]];
        return AMK_OK;
    }
    /* why: group the users of each on-chip buffer; the group's first task picks the SM */
    parent = (int *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    group_sm = (int *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    first_user = (int *)amk__malloc((size_t)(p->n_buffers ? p->n_buffers : 1) * sizeof(int));
    if (!parent || !group_sm || !first_user) { r = amk__lower_oom(d); goto done; }
    for (k = 0; k < n; k++) { parent[k] = k; group_sm[k] = -1; }
    for (j = 0; j < p->n_buffers; j++) first_user[j] = -1;
    for (k = 0; k < n; k++) {
        const amk_task *t = &p->tasks[order[k]];
        for (j = 0; j < t->n_inputs + t->n_outputs; j++) {
            int b = j < t->n_inputs ? t->inputs[j] : t->outputs[j - t->n_inputs];
            if (!amk__lower_is_onchip(p, b)) continue;
            if (first_user[b] < 0) first_user[b] = k;
            else parent[amk__lower_find(parent, k)] = amk__lower_find(parent, first_user[b]);
        }
    }
    if (c->sm_assignment == AMK_SM_ROUND_ROBIN) {
        for (k = 0; k < n; k++) {
            int g = amk__lower_find(parent, k), s = group_sm[g];
            if (s < 0) s = k % num_sms;
            group_sm[g] = s;
            sm[k] = s;
        }
        goto done;
    }
    { /* load_balance, level by level. why m: ties go to the lowest index, so n tasks never reach
         an SM index >= n; loads beyond min(num_sms, n) need no memory */
        int nc = p->n_counters, lv, *depth, *cdepth, *by_level, *level_start, max_depth = 0;
        int64_t *lvl, big = 0;
        uint64_t *ran; /* why: ran[s] bit op = SM s already runs a task of device opcode op (its
                          device function: a variant counts as its base op, amk_op_device) */
        load = (int64_t *)amk__calloc((size_t)(m ? m : 1), sizeof(int64_t));
        ran = (uint64_t *)amk__calloc((size_t)(m ? m : 1), sizeof(uint64_t));
        lvl = (int64_t *)amk__calloc((size_t)(m ? m : 1), sizeof(int64_t));
        depth = (int *)amk__calloc((size_t)(n > 0 ? n : 1), sizeof(int));
        cdepth = (int *)amk__calloc((size_t)(nc > 0 ? nc : 1), sizeof(int));
        by_level = (int *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
        level_start = NULL;
        if (load && lvl && depth && cdepth && by_level && ran) {
            for (k = 0; k < n; k++) { /* order is topological: producers come first */
                const amk_task *t = &p->tasks[order[k]];
                int dep = 0;
                for (j = 0; j < t->n_waits; j++) {
                    int cc = t->waits[j].counter;
                    if (cc >= 0 && cc < nc && cdepth[cc] > dep) dep = cdepth[cc];
                }
                depth[k] = dep + 1;
                if (depth[k] > max_depth) max_depth = depth[k];
                if (t->out_counter >= 0 && t->out_counter < nc && cdepth[t->out_counter] < depth[k])
                    cdepth[t->out_counter] = depth[k];
            }
            level_start = (int *)amk__calloc((size_t)max_depth + 2, sizeof(int));
        }
        if (!level_start) {
            amk__free(lvl); amk__free(depth); amk__free(cdepth); amk__free(by_level); amk__free(ran);
            r = amk__lower_oom(d);
            goto done;
        }
        for (k = 0; k < n; k++) level_start[depth[k] + 1]++; /* counting sort, stable in k */
        for (lv = 0; lv <= max_depth; lv++) level_start[lv + 1] += level_start[lv];
        for (k = 0; k < n; k++) by_level[level_start[depth[k]]++] = k;
        for (lv = max_depth; lv > 0; lv--) level_start[lv] = level_start[lv - 1];
        level_start[0] = 0;
        for (lv = 1; lv <= max_depth; lv++) {
            for (j = 0; j < m; j++) lvl[j] = 0;
            for (j = level_start[lv]; j < level_start[lv + 1]; j++) {
                int kk = by_level[j], g = amk__lower_find(parent, kk), s = group_sm[g], q;
                int64_t cost = p->tasks[order[kk]].est_bytes;
                const uint64_t bit = (uint64_t)1 << ((uint32_t)amk_op_device(p->tasks[order[kk]].op, NULL) & 63u);
                if (cost < 1) cost = 1; /* why: zero-cost tasks still spread over the SMs */
                if (s < 0) { /* why: linear scans; m <= n, and programs have ~100 SMs */
                    int a = -1;
                    for (s = 0, q = 1; q < m; q++)
                        if (lvl[q] < lvl[s] || (lvl[q] == lvl[s] && load[q] < load[s])) s = q;
                    for (q = 0; q < m; q++)
                        if (lvl[q] == lvl[s] && (ran[q] & bit) && (a < 0 || load[q] < load[a])) a = q;
                    if (a >= 0 && load[a] - load[s] <= (load[s] / 8 > big ? load[s] / 8 : big)) s = a;
                }
                if (cost > big) big = cost;
                if (s < m) {
                    ran[s] |= bit;
                    lvl[s] = lvl[s] > INT64_MAX - cost ? INT64_MAX : lvl[s] + cost;
                    load[s] = load[s] > INT64_MAX - cost ? INT64_MAX : load[s] + cost;
                }
                group_sm[g] = s;
                sm[kk] = s;
            }
        }
        amk__free(lvl); amk__free(depth); amk__free(cdepth); amk__free(by_level); amk__free(level_start); amk__free(ran);
    }
done:
    amk__free(parent);
    amk__free(first_user);
    amk__free(group_sm);
    amk__free(load);
    amk__free(heap.items);
    return r;
}

/* ---- step 4: pages ------------------------------------------------------------------------------ */

/* Uses of the activation buffers, by position in the new order (CSR over buffer ids). */
typedef struct amk__lower_uses {
    int *use_start, *uses;     /* [n_buffers+1], reads and writes (a task may appear twice) */
    int *write_start, *writes; /* [n_buffers+1], writes only */
} amk__lower_uses;

AMK__FN void amk__lower_uses_free(amk__lower_uses *u) {
    amk__free(u->use_start); amk__free(u->uses);
    amk__free(u->write_start); amk__free(u->writes);
}

AMK__FN int amk__lower_is_activation(const amk_program *p, int b) {
    return b >= 0 && b < p->n_buffers && p->buffers[b].kind == AMK_KIND_ACTIVATION;
}

AMK__FN int amk__lower_uses_build(const amk_program *p, const int *order, amk__lower_uses *u) {
    int nb = p->n_buffers, n = p->n_tasks, k, j, pass;
    int64_t n_uses = 0, n_writes = 0;
    memset(u, 0, sizeof *u);
    u->use_start = (int *)amk__calloc((size_t)nb + 2, sizeof(int));
    u->write_start = (int *)amk__calloc((size_t)nb + 2, sizeof(int));
    if (!u->use_start || !u->write_start) return 0;
    /* pass 0 counts into start[b + 1]; pass 1 fills, advancing start[b] as a cursor */
    for (pass = 0; pass < 2; pass++) {
        for (k = 0; k < n; k++) {
            const amk_task *t = &p->tasks[order[k]];
            for (j = 0; j < t->n_inputs + t->n_outputs; j++) {
                int is_write = j >= t->n_inputs, b = is_write ? t->outputs[j - t->n_inputs] : t->inputs[j];
                if (!amk__lower_is_activation(p, b)) continue;
                if (pass == 0) {
                    u->use_start[b + 1]++; n_uses++;
                    if (is_write) { u->write_start[b + 1]++; n_writes++; }
                } else {
                    u->uses[u->use_start[b]++] = k;
                    if (is_write) u->writes[u->write_start[b]++] = k;
                }
            }
        }
        if (pass == 0) {
            if (n_uses > INT_MAX) return 0;
            for (j = 0; j < nb; j++) {
                u->use_start[j + 1] += u->use_start[j];
                u->write_start[j + 1] += u->write_start[j];
            }
            u->uses = (int *)amk__malloc((size_t)(n_uses ? n_uses : 1) * sizeof(int));
            u->writes = (int *)amk__malloc((size_t)(n_writes ? n_writes : 1) * sizeof(int));
            if (!u->uses || !u->writes) return 0;
        }
    }
    for (j = nb; j > 0; j--) { u->use_start[j] = u->use_start[j - 1]; u->write_start[j] = u->write_start[j - 1]; }
    u->use_start[0] = u->write_start[0] = 0;
    return 1;
}

/* Happens-before over positions: anc[c] holds the positions of every transitive predecessor of a
   task waiting on counter c (its producers and theirs). why: per counter rather than per task,
   since tasks join on few counters and the sets are the big memory. */
typedef struct amk__lower_hb {
    const amk_program *p;
    const int *order;
    amk__word *anc; /* [n_counters][words] */
    size_t words;
} amk__lower_hb;

/* why: 1 GiB of sets is far past any real program (20k tasks x 20k counters is 50 MB); a larger
   one must use linear pages rather than take the machine's memory */
#define AMK__LOWER_HB_MAX_BYTES ((uint64_t)1 << 30)

AMK__FN amk_result amk__lower_hb_build(amk__lower_hb *hb, const amk_program *p, const int *order,
                                       amk_diag *d) {
    int n = p->n_tasks, nc = p->n_counters, k, j;
    uint64_t bytes;
    size_t w;
    hb->p = p;
    hb->order = order;
    hb->words = AMK__WORDS(n);
    if (!amk__mul_u64((uint64_t)nc, (uint64_t)hb->words * sizeof(amk__word), &bytes) ||
        bytes > AMK__LOWER_HB_MAX_BYTES)
        return amk__fail(d, AMK_ERR_UNSUPPORTED,
                         "graph_color pages for %d tasks x %d counters need too much memory; use linear pages",
                         n, nc);
    hb->anc = (amk__word *)amk__calloc((size_t)(nc ? nc : 1) * (hb->words ? hb->words : 1), sizeof(amk__word));
    if (!hb->anc) return amk__lower_oom(d);
    /* in topological order every producer of a counter a task waits on is already folded in */
    for (k = 0; k < n; k++) {
        const amk_task *t = &p->tasks[order[k]];
        amk__word *dst;
        if (t->out_counter < 0 || t->out_counter >= nc) continue;
        dst = hb->anc + (size_t)t->out_counter * hb->words;
        for (j = 0; j < t->n_waits; j++) {
            int c = t->waits[j].counter;
            const amk__word *src;
            if (c < 0 || c >= nc || c == t->out_counter) continue;
            src = hb->anc + (size_t)c * hb->words;
            for (w = 0; w < hb->words; w++) dst[w] |= src[w];
        }
        amk__bit_set(dst, (size_t)k);
    }
    return AMK_OK;
}

/* 1 if the task at position u happens-before the task at position v. */
AMK__FN int amk__lower_hb_before(const amk__lower_hb *hb, int u, int v) {
    const amk_task *t = &hb->p->tasks[hb->order[v]];
    int j;
    for (j = 0; j < t->n_waits; j++) {
        int c = t->waits[j].counter;
        if (c >= 0 && c < hb->p->n_counters && amk__bit_get(hb->anc + (size_t)c * hb->words, (size_t)u))
            return 1;
    }
    return 0;
}

/* A page being coloured: the maximal uses (under happens-before) of the buffers on it. why: a use
   that happens-before another one on the page is implied by it, so checks stay O(frontier). */
typedef struct amk__lower_color {
    int *frontier; int n_frontier, cap_frontier;
    int expiry; /* min reach_end over the frontier: no write after this position can fit */
} amk__lower_color;

/* 1 if buffer b may join the page: every use already there happens-before every write of b. */
AMK__FN int amk__lower_fits(const amk__lower_hb *hb, const amk__lower_uses *u,
                            const amk__lower_color *pc, int b) {
    int i, j;
    for (j = u->write_start[b]; j < u->write_start[b + 1]; j++)
        for (i = 0; i < pc->n_frontier; i++)
            if (!amk__lower_hb_before(hb, pc->frontier[i], u->writes[j])) return 0;
    return 1;
}

/* Adds b's uses to the page's frontier and keeps only the maximal ones; 0 on out of memory.
   stamp[] (one int per position, none equal to mark on entry: a fresh mark per call) de-duplicates;
   reach_end[position] is the last position of that task's descendants (itself if none). */
AMK__FN int amk__lower_add_uses(const amk__lower_hb *hb, const amk__lower_uses *u,
                                amk__lower_color *pc, int b, int *stamp, int mark,
                                const int *reach_end) {
    int i, j, n_keep = 0;
    for (i = 0; i < pc->n_frontier; i++) stamp[pc->frontier[i]] = mark;
    for (j = u->use_start[b]; j < u->use_start[b + 1]; j++) {
        int x = u->uses[j];
        if (stamp[x] == mark) continue;
        stamp[x] = mark;
        if (!amk__grow((void **)&pc->frontier, &pc->cap_frontier, pc->n_frontier + 1, sizeof(int)))
            return 0;
        pc->frontier[pc->n_frontier++] = x;
    }
    pc->expiry = INT_MAX;
    for (i = 0; i < pc->n_frontier; i++) {
        int x = pc->frontier[i], dominated = 0;
        for (j = 0; j < pc->n_frontier && !dominated; j++)
            dominated = j != i && amk__lower_hb_before(hb, x, pc->frontier[j]);
        if (dominated) continue;
        pc->frontier[n_keep++] = x;
        if (reach_end[x] < pc->expiry) pc->expiry = reach_end[x];
    }
    pc->n_frontier = n_keep;
    return 1;
}

/* Greedy colouring (graph_color): buffers in order of first use (ties: the order the task names
   them), each on the lowest-id page of its space where it fits, else on a new page. why: a page
   fits only if all its uses precede the new buffer's first write in position, i.e. its live_end
   is behind the current position k, and only while k is not past its expiry (a write must be a
   descendant of every frontier task; programs with values nobody reads leave many such pages).
   Candidate pages are kept in the bit set free_pages (fed by a min-heap of live_end, pruned when
   expired), so the happens-before test runs only on them, not on every page. */
AMK__FN amk_result amk__lower_color_pages(const amk_program *p, const int *order,
                                          const amk__lower_uses *u, amk_page **pages_io,
                                          int *n_pages_io, int *buffer_page, amk_diag *d) {
    amk__lower_hb hb;
    amk__lower_color *colors = NULL;
    amk__lower_heap busy;     /* (live_end, page) of pages not yet in free */
    amk__word *free_pages = NULL;
    amk_page *pages = NULL;
    int *reach_end = NULL; /* [n_tasks] by position, then [n_counters] scratch */
    int *stamp = NULL;
    int n_pages = 0, cap_pages = 0, cap_colors = 0, cap_words = 0, mark = 0, n_act = 0, b, k, j, pg;
    amk_result r;
    memset(&hb, 0, sizeof hb);
    busy.n = 0;
    for (b = 0; b < p->n_buffers; b++) n_act += amk__lower_is_activation(p, b);
    busy.items = (amk__lower_hitem *)amk__malloc((size_t)(n_act + 1) * sizeof(amk__lower_hitem));
    stamp = (int *)amk__calloc((size_t)(p->n_tasks ? p->n_tasks : 1), sizeof(int));
    reach_end = (int *)amk__malloc(((size_t)p->n_tasks + (size_t)p->n_counters + 1) * sizeof(int));
    if (!busy.items || !stamp || !reach_end) { r = amk__lower_oom(d); goto done; }
    r = amk__lower_hb_build(&hb, p, order, d);
    if (r != AMK_OK) goto done;
    { /* reverse topological order: a counter reaches as far as its waiters do */
        int *counter_end = reach_end + p->n_tasks;
        for (j = 0; j < p->n_counters; j++) counter_end[j] = -1;
        for (k = p->n_tasks - 1; k >= 0; k--) {
            const amk_task *t = &p->tasks[order[k]];
            int c = t->out_counter, e = k;
            if (c >= 0 && c < p->n_counters && counter_end[c] > e) e = counter_end[c];
            reach_end[k] = e;
            for (j = 0; j < t->n_waits; j++) {
                c = t->waits[j].counter;
                if (c >= 0 && c < p->n_counters && counter_end[c] < e) counter_end[c] = e;
            }
        }
    }
    for (k = 0; k < p->n_tasks; k++) {
        const amk_task *t = &p->tasks[order[k]];
        while (busy.n > 0 && busy.items[0].key < k) {
            pg = amk__lower_hpop(&busy).val;
            free_pages[pg / 64] |= (amk__word)1 << (pg % 64);
        }
        for (j = 0; j < t->n_inputs + t->n_outputs; j++) {
            int bb = j < t->n_inputs ? t->inputs[j] : t->outputs[j - t->n_inputs], w;
            const amk_buffer *buf;
            int64_t nbytes;
            if (!amk__lower_is_activation(p, bb) || buffer_page[bb] >= 0) continue;
            buf = &p->buffers[bb];
            pg = n_pages;
            for (w = 0; w < cap_words && pg == n_pages; w++) {
                int i;
                if (!free_pages[w]) continue;
                for (i = 0; i < 64 && pg == n_pages; i++) {
                    if (!((free_pages[w] >> i) & 1)) continue;
                    if (colors[w * 64 + i].expiry < k) { /* for good: positions only grow */
                        free_pages[w] &= ~((amk__word)1 << i);
                        continue;
                    }
                    if (pages[w * 64 + i].space == buf->space && amk__lower_fits(&hb, u, &colors[w * 64 + i], bb))
                        pg = w * 64 + i;
                }
            }
            if (pg == n_pages) {
                if (!amk__grow((void **)&pages, &cap_pages, n_pages + 1, sizeof(amk_page)) ||
                    !amk__grow((void **)&colors, &cap_colors, n_pages + 1, sizeof(amk__lower_color))) {
                    r = amk__lower_oom(d);
                    goto done;
                }
                if ((int)AMK__WORDS(n_pages + 1) > cap_words) {
                    amk__word *nw = (amk__word *)amk__realloc(free_pages, (size_t)(cap_words + 1) * sizeof(amk__word));
                    if (!nw) { r = amk__lower_oom(d); goto done; }
                    free_pages = nw;
                    free_pages[cap_words++] = 0;
                }
                memset(&colors[pg], 0, sizeof colors[pg]);
                pages[pg].id = pg;
                pages[pg].space = buf->space;
                pages[pg].nbytes = 0;
                pages[pg].live_start = k; /* bb's first use */
                pages[pg].live_end = k;
                n_pages++;
            }
            free_pages[pg / 64] &= ~((amk__word)1 << (pg % 64));
            if (!amk__lower_add_uses(&hb, u, &colors[pg], bb, stamp, ++mark, reach_end)) { r = amk__lower_oom(d); goto done; }
            nbytes = amk__buffer_nbytes(buf);
            if (nbytes > pages[pg].nbytes) pages[pg].nbytes = nbytes;
            if (u->uses[u->use_start[bb + 1] - 1] > pages[pg].live_end)
                pages[pg].live_end = u->uses[u->use_start[bb + 1] - 1];
            if (colors[pg].expiry > pages[pg].live_end) amk__lower_hpush(&busy, pages[pg].live_end, pg);
            buffer_page[bb] = pg;
        }
    }
done:
    for (pg = 0; colors && pg < n_pages; pg++) amk__free(colors[pg].frontier);
    amk__free(colors);
    amk__free(free_pages);
    amk__free(busy.items);
    amk__free(reach_end);
    amk__free(stamp);
    amk__free(hb.anc);
    if (r != AMK_OK) { amk__free(pages); pages = NULL; n_pages = 0; }
    *pages_io = pages;
    *n_pages_io = n_pages;
    return r;
}

/* The page table of the activation buffers: *pages_out (n_pages) and buffer_page[n_buffers]. */
AMK__FN amk_result amk__lower_pages(const amk_program *p, const int *order, int mode,
                                    amk_page **pages_out, int *n_pages_out, int *buffer_page,
                                    amk_diag *d) {
    amk__lower_uses u;
    amk_page *pages = NULL;
    int nb = p->n_buffers, n_pages = 0, cap_pages = 0, b;
    amk_result r = AMK_OK;
    *pages_out = NULL;
    *n_pages_out = 0;
    for (b = 0; b < nb; b++) buffer_page[b] = -1;
    if (!amk__lower_uses_build(p, order, &u)) { amk__lower_uses_free(&u); return amk__lower_oom(d); }
    for (b = 0; b < nb; b++) /* every page's size must be representable */
        if (amk__lower_is_activation(p, b) && amk__buffer_nbytes(&p->buffers[b]) < 0) {
            if (d) {
                d->buffer = b;
                snprintf(d->check, sizeof d->check, "%s", amk_check_id(AMK_CHECK_BUFFER_SHAPE));
            }
            r = amk__fail(d, AMK_ERR_REJECTED, "buffer %d has no valid byte size", b);
            goto done;
        }
    if (mode == AMK_PAGES_GRAPH_COLOR) {
        r = amk__lower_color_pages(p, order, &u, &pages, &n_pages, buffer_page, d);
        goto done;
    }
    for (b = 0; b < nb; b++) { /* linear: one page per activation, in buffer id order */
        amk_page *pgp;
        if (!amk__lower_is_activation(p, b)) continue;
        if (!amk__grow((void **)&pages, &cap_pages, n_pages + 1, sizeof(amk_page))) { r = amk__lower_oom(d); goto done; }
        pgp = &pages[n_pages];
        pgp->id = n_pages;
        pgp->space = p->buffers[b].space;
        pgp->nbytes = amk__buffer_nbytes(&p->buffers[b]);
        pgp->live_start = pgp->live_end = -1;
        if (u.use_start[b] < u.use_start[b + 1]) {
            pgp->live_start = u.uses[u.use_start[b]]; /* uses are in position order */
            pgp->live_end = u.uses[u.use_start[b + 1] - 1];
        }
        buffer_page[b] = n_pages++;
    }
done:
    amk__lower_uses_free(&u);
    if (r != AMK_OK) { amk__free(pages); pages = NULL; n_pages = 0; }
    *pages_out = pages;
    *n_pages_out = n_pages;
    return r;
}

/* ---- the pass ----------------------------------------------------------------------------------- */

/* (task id, task index) pairs ordered by id, for amk__lower_pin's lookups. */
typedef struct amk__lower_idx { int id, index; } amk__lower_idx;
static int amk__lower_idx_cmp(const void *a, const void *b) {
    const int x = ((const amk__lower_idx *)a)->id, y = ((const amk__lower_idx *)b)->id;
    return (x > y) - (x < y);
}

/* Pins the tasks of (pin_task, pin_sm) in sm (sm[k]: the SM of the task at order position k) and
   records the whole assignment in cfg as explicit, in order (its arrays cfg's own). */
AMK__FN amk_result amk__lower_pin(const amk_program *p, const int *order, int n_pins, const int *pin_task,
                                  const int *pin_sm, int num_sms, int *sm, amk_config *cfg, amk_diag *d) {
    const int n = p->n_tasks;
    int *pos = (int *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(int)), *done = NULL, *et = NULL, *es = NULL;
    amk__lower_idx *by_id = (amk__lower_idx *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(amk__lower_idx));
    int i, k;
    amk_result r = AMK_OK;
    if (!pos || !by_id) { amk__free(pos); amk__free(by_id); return amk__lower_oom(d); }
    for (k = 0; k < n; k++) {
        pos[order[k]] = k;
        by_id[k].id = p->tasks[k].id;
        by_id[k].index = k;
    }
    qsort(by_id, (size_t)n, sizeof *by_id, amk__lower_idx_cmp); /* why: a scan a pin is n^2 for a step pinning most tasks */
    done = (int *)amk__calloc((size_t)(n > 0 ? n : 1), sizeof(int));
    et = (int *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    es = (int *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    if (!done || !et || !es) r = amk__lower_oom(d);
    for (i = 0; i < n_pins && r == AMK_OK; i++) {
        amk__lower_idx key, *hit;
        int ti;
        key.id = pin_task[i];
        hit = n > 0 ? (amk__lower_idx *)bsearch(&key, by_id, (size_t)n, sizeof *by_id, amk__lower_idx_cmp) : NULL;
        ti = hit ? hit->index : -1;
        if (ti < 0)
            r = amk__fail(d, AMK_ERR_INVALID_ARG, "SM pin %d names task id %d, which does not exist", i, pin_task[i]);
        else if (pin_sm[i] < 0 || pin_sm[i] >= num_sms)
            r = amk__fail(d, AMK_ERR_INVALID_ARG, "SM pin %d puts task id %d on SM %d, outside [0, %d)", i, pin_task[i],
                          pin_sm[i], num_sms);
        else if (done[ti]++)
            r = amk__fail(d, AMK_ERR_INVALID_ARG, "SM pins name task id %d twice", pin_task[i]);
        else
            sm[pos[ti]] = pin_sm[i];
    }
    if (r == AMK_OK) {
        for (k = 0; k < n; k++) {
            et[k] = p->tasks[order[k]].id;
            es[k] = sm[k];
        }
        amk__free(cfg->explicit_task);
        amk__free(cfg->explicit_sm);
        cfg->sm_assignment = AMK_SM_EXPLICIT;
        cfg->explicit_task = et;
        cfg->explicit_sm = es;
        cfg->n_explicit = n;
        et = es = NULL;
    }
    amk__free(pos);
    amk__free(by_id);
    amk__free(done);
    amk__free(et);
    amk__free(es);
    return r;
}

AMK_API amk_result amk_program_lower(amk_program *p, const amk_config *c, const amk_target *t,
                                     amk_diag *d) {
    return amk_program_lower_pinned(p, c, t, 0, NULL, NULL, d);
}

AMK_API amk_result amk_program_lower_pinned(amk_program *p, const amk_config *c, const amk_target *t, int n_pins,
                                            const int *pin_task, const int *pin_sm, amk_diag *d) {
    amk_config cfg;
    amk_target target;
    amk_task *tasks = NULL;
    amk_page *pages = NULL;
    int *order = NULL, *sm = NULL, *explicit_sm = NULL, *buffer_page = NULL;
    int n, n_pages = 0, k;
    amk_result r;
    amk_diag_clear(d);
    r = amk__lower_check_args(p, c, t, d);
    if (r == AMK_OK && (n_pins < 0 || (n_pins > 0 && (!pin_task || !pin_sm))))
        r = amk__fail(d, AMK_ERR_INVALID_ARG, "lower: %d SM pins without their arrays", n_pins);
    if (r != AMK_OK) return r;
    n = p->n_tasks;
    target = *t; /* why: c and t may point into p (re-lowering with p's own config) */
    amk_config_default(&cfg);
    if (!amk__config_copy(&cfg, c)) { amk__config_free(&cfg); return amk__lower_oom(d); }
    order = (int *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    sm = (int *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    explicit_sm = (int *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    buffer_page = (int *)amk__malloc((size_t)(p->n_buffers ? p->n_buffers : 1) * sizeof(int));
    tasks = (amk_task *)amk__malloc((size_t)(n > 0 ? n : 1) * sizeof(amk_task));
    if (!order || !sm || !explicit_sm || !buffer_page || !tasks) { r = amk__lower_oom(d); goto fail; }
    if (cfg.sm_assignment == AMK_SM_EXPLICIT &&
        (r = amk__lower_explicit(p, &cfg, target.num_sms, explicit_sm, d)) != AMK_OK)
        goto fail;
    if ((r = amk__lower_validate(p, 1, d)) != AMK_OK) goto fail;
    if ((r = amk__lower_order(p, order, d)) != AMK_OK) goto fail;
    if ((r = amk__lower_assign(p, order, &cfg, target.num_sms, explicit_sm, sm, d)) != AMK_OK) goto fail;
    if (n_pins > 0 && (r = amk__lower_pin(p, order, n_pins, pin_task, pin_sm, target.num_sms, sm, &cfg, d)) != AMK_OK)
        goto fail;
    if (cfg.page_allocation != AMK_PAGES_NONE &&
        (r = amk__lower_pages(p, order, cfg.page_allocation, &pages, &n_pages, buffer_page, d)) != AMK_OK)
        goto fail;

    /* commit: nothing below can fail */
    for (k = 0; k < n; k++) {
        tasks[k] = p->tasks[order[k]];
        tasks[k].sm = sm[k];
    }
    amk__free(p->tasks);
    p->tasks = tasks;
    p->cap_tasks = n ? n : 1;
    amk__free(p->pages);
    amk__free(p->buffer_page);
    p->pages = NULL;
    p->buffer_page = NULL;
    p->n_pages = 0;
    p->has_pages = cfg.page_allocation != AMK_PAGES_NONE;
    if (p->has_pages) {
        p->pages = pages;
        p->n_pages = n_pages;
        p->buffer_page = buffer_page;
        buffer_page = NULL;
    }
    amk__config_free(&p->config);
    p->config = cfg;
    p->has_config = 1;
    p->target = target;
    p->has_target = 1;
    amk__free(order);
    amk__free(sm);
    amk__free(explicit_sm);
    amk__free(buffer_page);
    return amk__lower_validate(p, 0, d);
fail:
    amk__config_free(&cfg);
    amk__free(order);
    amk__free(sm);
    amk__free(explicit_sm);
    amk__free(buffer_page);
    amk__free(tasks);
    amk__free(pages);
    return r;
}

#endif /* AMK_IMPLEMENTATION */

/* MIT License, Copyright (c) 2026 the AMK authors: the text is at the end of amk.h. */

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
/* A real param that converts to a finite float. */
AMK__FN int amk__opshape_finite(double v) { return v == v && fabs(v) <= (double)FLT_MAX; }

/* Checks that task t's buffers (shapes, dtypes) and param values fit its opcode. Precondition:
   every buffer id of t exists, the opcode is defined, the arity and the param types are right;
   these are re-checked defensively (OP_UNKNOWN, OP_ARITY, ABI_CAP, REF_BUFFER, PARAM_TYPE,
   BUFFER_ENUM, BUFFER_SHAPE) so a direct amk_ref_exec call can never read out of bounds.
   Returns 1 if fine; else 0 with *which (OP_SHAPE, OP_DTYPE, PARAM_VALUE or OP_UNSUPPORTED) and a
   message naming the buffers and numbers. */
AMK__FN int amk__op_check(const amk_program *p, const amk_task *t, amk_check *which, char *msg,
                          size_t msg_size) {
    amk__opshape c;
    const amk_op_spec *spec;
    const amk_buffer *in[AMK_MAX_INPUTS], *out = NULL;
    int64_t n_in[AMK_MAX_INPUTS], n_out = 0, v;
    amk_params_t P;
    int i, ni, max_in, quant;
    c.which = which;
    c.msg = msg;
    c.msg_size = msg_size;
    c.op = amk_op_name(t->op);
    if (msg && msg_size) msg[0] = 0;
    for (i = 0; i < AMK_MAX_INPUTS; i++) { in[i] = NULL; n_in[i] = 0; }

#define AMK__OPS_FAIL(check, ...) return amk__opshape_fail(&c, AMK_CHECK_##check, __VA_ARGS__)
    /* ---- the preconditions (validate checks them first) */
    spec = amk_op_spec_get(t->op);
    if (!spec) AMK__OPS_FAIL(OP_UNKNOWN, "opcode %d is not defined", t->op);
    quant = (t->op == AMK_OP_GEMV_TILE || t->op == AMK_OP_GEMM_TILE) &&
            amk_task_param(t, "qdtype") != NULL;
    max_in = quant ? 4 : spec->max_inputs < 0 ? AMK_MAX_INPUTS : spec->max_inputs;
    ni = t->n_inputs;
    if (ni > AMK_MAX_INPUTS || t->n_outputs > AMK_MAX_OUTPUTS)
        AMK__OPS_FAIL(ABI_CAP, "%d inputs, %d outputs exceed the ABI caps (%d/%d)", ni,
                      t->n_outputs, AMK_MAX_INPUTS, AMK_MAX_OUTPUTS);
    if (ni < spec->min_inputs || ni > max_in || t->n_outputs != spec->n_outputs ||
        (ni && !t->inputs) || (t->n_outputs && !t->outputs))
        AMK__OPS_FAIL(OP_ARITY, "takes %d..%d inputs and %d outputs, got %d and %d",
                      spec->min_inputs, max_in, spec->n_outputs, ni, t->n_outputs);
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
        if (i < ni) { in[i] = b; n_in[i] = amk_buffer_numel(b); }
        else { out = b; n_out = amk_buffer_numel(b); }
    }
    for (i = 0; i < t->n_params; i++) {
        const amk_param *pr = &t->params[i];
        char ty = pr->key ? amk__param_field_type(pr->key) : 0;
        if (ty == 'i' && (pr->type != AMK_PARAM_INT || pr->i < INT32_MIN || pr->i > INT32_MAX))
            AMK__OPS_FAIL(PARAM_TYPE, "param '%s' must be an int32", pr->key);
        if (ty == 'f' && pr->type != AMK_PARAM_REAL && pr->type != AMK_PARAM_INT)
            AMK__OPS_FAIL(PARAM_TYPE, "param '%s' must be a real number", pr->key);
    }
    amk_task_marshal_params(t, &P); /* int params are int32 now, so nothing truncates */

    /* ---- the opcode's own rules */
    switch (t->op) {
    case AMK_OP_NOP:
        break;

    case AMK_OP_COPY:
    case AMK_OP_GELU:
        if (n_out != n_in[0])
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, x '%s' has %lld",
                          amk__opshape_name(out), (long long)n_out, amk__opshape_name(in[0]),
                          (long long)n_in[0]);
        break;

    case AMK_OP_EMBED: {
        int64_t H;
        if (!amk__opshape_is_index(in[0]->dtype))
            AMK__OPS_FAIL(OP_DTYPE, "ids '%s' must be I32, I8 or U8, not %s",
                          amk__opshape_name(in[0]), amk_dtype_name(in[0]->dtype));
        if (P.hidden < 1) AMK__OPS_FAIL(PARAM_VALUE, "hidden = %d must be >= 1", P.hidden);
        if (in[1]->rank != 2 || in[1]->shape[1] != P.hidden)
            AMK__OPS_FAIL(OP_SHAPE, "table '%s' must be [V, hidden = %d]", amk__opshape_name(in[1]),
                          P.hidden);
        H = P.hidden;
        if (!amk__mul_i64(n_in[0], H, &v) || n_out != v)
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, ids*hidden = %lld*%lld",
                          amk__opshape_name(out), (long long)n_out, (long long)n_in[0], (long long)H);
        break;
    }

    case AMK_OP_RMSNORM:
    case AMK_OP_LAYERNORM: {
        double eps = amk__param_f(t, "eps", 0.0);
        if (P.hidden < 1) AMK__OPS_FAIL(PARAM_VALUE, "hidden = %d must be >= 1", P.hidden);
        if (n_in[0] % P.hidden)
            AMK__OPS_FAIL(OP_SHAPE, "x '%s' has %lld elements, not a multiple of hidden = %d",
                          amk__opshape_name(in[0]), (long long)n_in[0], P.hidden);
        for (i = 1; i < ni; i++)
            if (n_in[i] != P.hidden)
                AMK__OPS_FAIL(OP_SHAPE, "%s '%s' has %lld elements, hidden = %d", i == 1 ? "w" : "b",
                              amk__opshape_name(in[i]), (long long)n_in[i], P.hidden);
        if (n_out != n_in[0])
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, x '%s' has %lld",
                          amk__opshape_name(out), (long long)n_out, amk__opshape_name(in[0]),
                          (long long)n_in[0]);
        if (!amk__opshape_finite(eps) || eps < 0)
            AMK__OPS_FAIL(PARAM_VALUE, "eps = %g must be finite and >= 0", eps);
        break;
    }

    case AMK_OP_GEMV_TILE:
    case AMK_OP_GEMM_TILE: {
        int64_t K = P.K, M, N, end, n_out_last;
        const amk_buffer *W = in[1];
        if (K < 1) AMK__OPS_FAIL(PARAM_VALUE, "K = %lld must be >= 1", (long long)K);
        if (n_in[0] % K || n_in[0] / K < 1)
            AMK__OPS_FAIL(OP_SHAPE, "x '%s' has %lld elements, not a positive multiple of K = %lld",
                          amk__opshape_name(in[0]), (long long)n_in[0], (long long)K);
        M = n_in[0] / K;
        if (P.n_off < 0 || P.N_tile < 1)
            AMK__OPS_FAIL(PARAM_VALUE, "n_off = %d must be >= 0 and N_tile = %d >= 1", P.n_off,
                          P.N_tile);
        if (quant) {
            int64_t group = P.group, G;
            if (P.qdtype != AMK_DTYPE_I8 && P.qdtype != AMK_DTYPE_I4)
                AMK__OPS_FAIL(PARAM_VALUE, "qdtype = %d must be 6 (I8) or 7 (I4)", P.qdtype);
            if (ni < 3)
                AMK__OPS_FAIL(OP_SHAPE, "the quantized form takes x, qW, scales[, zeros], got %d inputs", ni);
            if (P.qdtype == AMK_DTYPE_I8 ? W->dtype != AMK_DTYPE_I8
                                         : W->dtype != AMK_DTYPE_I4 && W->dtype != AMK_DTYPE_U8)
                AMK__OPS_FAIL(OP_DTYPE, "qW '%s' is %s, qdtype %d needs %s", amk__opshape_name(W),
                              amk_dtype_name(W->dtype), P.qdtype,
                              P.qdtype == AMK_DTYPE_I8 ? "I8" : "I4 or U8 (packed)");
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
            if (!amk_dtype_is_float(in[2]->dtype))
                AMK__OPS_FAIL(OP_DTYPE, "scales '%s' must be a float dtype, not %s",
                              amk__opshape_name(in[2]), amk_dtype_name(in[2]->dtype));
            if (!amk__mul_i64(N, G, &v) || n_in[2] != v)
                AMK__OPS_FAIL(OP_SHAPE, "scales '%s' has %lld elements, N*(K/group) = %lld*%lld",
                              amk__opshape_name(in[2]), (long long)n_in[2], (long long)N, (long long)G);
            if (ni == 4 && n_in[3] != n_in[2])
                AMK__OPS_FAIL(OP_SHAPE, "zeros '%s' has %lld elements, scales has %lld",
                              amk__opshape_name(in[3]), (long long)n_in[3], (long long)n_in[2]);
        } else {
            if (W->rank != 2 || W->shape[1] != K)
                AMK__OPS_FAIL(OP_SHAPE, "W '%s' must be [N, K = %lld]", amk__opshape_name(W),
                              (long long)K);
            N = W->shape[0];
            if (ni == 3 && n_in[2] != N)
                AMK__OPS_FAIL(OP_SHAPE, "bias '%s' has %lld elements, W has %lld rows",
                              amk__opshape_name(in[2]), (long long)n_in[2], (long long)N);
        }
        end = (int64_t)P.n_off + P.N_tile;
        if (end > N)
            AMK__OPS_FAIL(PARAM_VALUE, "n_off+N_tile = %lld exceeds W rows %lld", (long long)end,
                          (long long)N);
        n_out_last = amk__opshape_last(out);
        if (n_out_last < end)
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' last dim %lld < n_off+N_tile = %lld",
                          amk__opshape_name(out), (long long)n_out_last, (long long)end);
        if (!amk__mul_i64(M, n_out_last, &v) || n_out != v)
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, M*N_out = %lld*%lld",
                          amk__opshape_name(out), (long long)n_out, (long long)M, (long long)n_out_last);
        if (t->op == AMK_OP_GEMM_TILE) {
            if (P.M_tile < 1 || P.m_off < 0)
                AMK__OPS_FAIL(PARAM_VALUE, "m_off = %d must be >= 0 and M_tile = %d >= 1", P.m_off,
                              P.M_tile);
            if ((int64_t)P.m_off + P.M_tile > M)
                AMK__OPS_FAIL(PARAM_VALUE, "m_off+M_tile = %lld exceeds x rows %lld",
                              (long long)P.m_off + P.M_tile, (long long)M);
        }
        break;
    }

    case AMK_OP_ATTENTION_TILE: {
        int64_t row, max_seq, want;
        double scale = amk__param_f(t, "scale", 1.0);
        if (ni == 4) AMK__OPS_FAIL(OP_UNSUPPORTED, "4th ATTENTION_TILE input is not supported");
        if (P.head_dim < 1 || P.n_heads < 1 || P.n_kv_heads < 1 || P.n_heads % P.n_kv_heads)
            AMK__OPS_FAIL(PARAM_VALUE,
                          "head_dim = %d, n_heads = %d, n_kv_heads = %d: each must be >= 1 and "
                          "n_kv_heads must divide n_heads", P.head_dim, P.n_heads, P.n_kv_heads);
        if (n_in[0] != (int64_t)P.n_heads * P.head_dim)
            AMK__OPS_FAIL(OP_SHAPE, "q '%s' has %lld elements, n_heads*head_dim = %lld",
                          amk__opshape_name(in[0]), (long long)n_in[0],
                          (long long)P.n_heads * P.head_dim);
        row = (int64_t)P.n_kv_heads * P.head_dim;
        if (n_in[1] % row || n_in[2] != n_in[1])
            AMK__OPS_FAIL(OP_SHAPE, "k '%s' (%lld) and v '%s' (%lld) must hold equal whole rows of "
                          "n_kv_heads*head_dim = %lld", amk__opshape_name(in[1]), (long long)n_in[1],
                          amk__opshape_name(in[2]), (long long)n_in[2], (long long)row);
        max_seq = n_in[1] / row;
        if (P.kv_start < 0 || P.kv_len < 0 || (int64_t)P.kv_start + P.kv_len > max_seq)
            AMK__OPS_FAIL(PARAM_VALUE, "window kv_start = %d, kv_len = %d is outside the %lld cache rows",
                          P.kv_start, P.kv_len, (long long)max_seq);
        if (!amk__opshape_finite(scale)) AMK__OPS_FAIL(PARAM_VALUE, "scale = %g must be finite", scale);
        want = (int64_t)P.n_heads * P.head_dim;
        if ((uint32_t)P.flags & AMK_ATTN_FLAG_PARTIAL) {
            if (out->dtype != AMK_DTYPE_F32)
                AMK__OPS_FAIL(OP_DTYPE, "partial out '%s' must be F32, not %s",
                              amk__opshape_name(out), amk_dtype_name(out->dtype));
            want = (int64_t)P.n_heads * (P.head_dim + 2);
        }
        if (n_out != want)
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, needs %lld", amk__opshape_name(out),
                          (long long)n_out, (long long)want);
        break;
    }

    case AMK_OP_ROPE: {
        int64_t S = n_in[1];
        double theta = amk__param_f(t, "theta", 10000.0), factor = amk__param_f(t, "rope_factor", 0.0);
        double lo = amk__param_f(t, "rope_low_freq_factor", 1.0);
        double hi = amk__param_f(t, "rope_high_freq_factor", 4.0);
        if (!amk__opshape_is_index(in[1]->dtype))
            AMK__OPS_FAIL(OP_DTYPE, "positions '%s' must be I32, I8 or U8, not %s",
                          amk__opshape_name(in[1]), amk_dtype_name(in[1]->dtype));
        if (S < 1) AMK__OPS_FAIL(OP_SHAPE, "positions '%s' is empty", amk__opshape_name(in[1]));
        if (P.head_dim < 2 || P.head_dim % 2)
            AMK__OPS_FAIL(PARAM_VALUE, "head_dim = %d must be even and >= 2", P.head_dim);
        if (!amk__mul_i64(S, P.head_dim, &v) || n_in[0] % v)
            AMK__OPS_FAIL(OP_SHAPE, "x '%s' has %lld elements, not a multiple of positions*head_dim "
                          "= %lld*%d", amk__opshape_name(in[0]), (long long)n_in[0], (long long)S,
                          P.head_dim);
        if (n_out != n_in[0])
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, x '%s' has %lld",
                          amk__opshape_name(out), (long long)n_out, amk__opshape_name(in[0]),
                          (long long)n_in[0]);
        if (!amk__opshape_finite(theta) || theta <= 0)
            AMK__OPS_FAIL(PARAM_VALUE, "theta = %g must be finite and > 0", theta);
        if (!amk__opshape_finite(factor))
            AMK__OPS_FAIL(PARAM_VALUE, "rope_factor = %g must be finite", factor);
        if (factor > 0 && (P.rope_orig_ctx < 1 || !amk__opshape_finite(lo) ||
                           !amk__opshape_finite(hi) || !(lo > 0) || !(lo < hi)))
            AMK__OPS_FAIL(PARAM_VALUE, "llama3 scaling needs rope_orig_ctx = %d >= 1 and 0 < "
                          "low_freq_factor = %g < high_freq_factor = %g", P.rope_orig_ctx, lo, hi);
        break;
    }

    case AMK_OP_SILU_MUL:
    case AMK_OP_ADD:
    case AMK_OP_ALLREDUCE_SHARD:
        for (i = 0; i < ni; i++)
            if (n_in[i] != n_out)
                AMK__OPS_FAIL(OP_SHAPE, "input %d '%s' has %lld elements, out '%s' has %lld", i,
                              amk__opshape_name(in[i]), (long long)n_in[i], amk__opshape_name(out),
                              (long long)n_out);
        break;

    case AMK_OP_MUL:
        if (n_out != n_in[0])
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, a '%s' has %lld",
                          amk__opshape_name(out), (long long)n_out, amk__opshape_name(in[0]),
                          (long long)n_in[0]);
        if (ni == 2 && n_in[1] != n_in[0] && n_in[1] != 1)
            AMK__OPS_FAIL(OP_SHAPE, "b '%s' has %lld elements, needs %lld or 1 (broadcast)",
                          amk__opshape_name(in[1]), (long long)n_in[1], (long long)n_in[0]);
        break;

    case AMK_OP_DEQUANT: {
        const amk_buffer *q = in[0];
        int64_t logical = n_in[0], last = amk__opshape_last(q);
        if (P.qdtype != AMK_DTYPE_I8 && P.qdtype != AMK_DTYPE_I4)
            AMK__OPS_FAIL(PARAM_VALUE, "qdtype = %d must be 6 (I8) or 7 (I4)", P.qdtype);
        if (P.qdtype == AMK_DTYPE_I8 ? q->dtype != AMK_DTYPE_I8
                                     : q->dtype != AMK_DTYPE_I4 && q->dtype != AMK_DTYPE_U8)
            AMK__OPS_FAIL(OP_DTYPE, "q '%s' is %s, qdtype %d needs %s", amk__opshape_name(q),
                          amk_dtype_name(q->dtype), P.qdtype,
                          P.qdtype == AMK_DTYPE_I8 ? "I8" : "I4 or U8 (packed)");
        if (q->dtype == AMK_DTYPE_U8) { /* two 4-bit values per byte */
            if (!amk__mul_i64(logical, 2, &logical) || !amk__mul_i64(last, 2, &last))
                AMK__OPS_FAIL(OP_SHAPE, "q '%s' is too large", amk__opshape_name(q));
        }
        if (P.group < 1 || last % P.group)
            AMK__OPS_FAIL(PARAM_VALUE, "group = %d must be >= 1 and divide the last dim %lld",
                          P.group, (long long)last);
        for (i = 1; i < ni; i++)
            if (n_in[i] != logical / P.group)
                AMK__OPS_FAIL(OP_SHAPE, "%s '%s' has %lld elements, needs %lld/group = %lld",
                              i == 1 ? "scales" : "zeros", amk__opshape_name(in[i]),
                              (long long)n_in[i], (long long)logical, (long long)(logical / P.group));
        if (!amk_dtype_is_float(out->dtype))
            AMK__OPS_FAIL(OP_DTYPE, "out '%s' must be a float dtype, not %s", amk__opshape_name(out),
                          amk_dtype_name(out->dtype));
        if (n_out != logical)
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, q holds %lld values",
                          amk__opshape_name(out), (long long)n_out, (long long)logical);
        break;
    }

    case AMK_OP_SOFTMAX:
        if (P.dim < -in[0]->rank || P.dim >= in[0]->rank)
            AMK__OPS_FAIL(PARAM_VALUE, "dim = %d is outside [%d, %d) for x '%s'", P.dim,
                          -in[0]->rank, in[0]->rank, amk__opshape_name(in[0]));
        if (n_out != n_in[0])
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, x '%s' has %lld",
                          amk__opshape_name(out), (long long)n_out, amk__opshape_name(in[0]),
                          (long long)n_in[0]);
        break;

    case AMK_OP_KV_APPEND: {
        int64_t R = n_in[0];
        if (R < 1) AMK__OPS_FAIL(OP_SHAPE, "new '%s' is empty", amk__opshape_name(in[0]));
        if (n_in[1] % R)
            AMK__OPS_FAIL(OP_SHAPE, "cache '%s' has %lld elements, not whole rows of %lld",
                          amk__opshape_name(in[1]), (long long)n_in[1], (long long)R);
        if (P.pos < 0 || P.pos >= n_in[1] / R)
            AMK__OPS_FAIL(PARAM_VALUE, "pos = %d is outside the %lld rows of cache '%s'", P.pos,
                          (long long)(n_in[1] / R), amk__opshape_name(in[1]));
        if (t->outputs[0] != t->inputs[1])
            AMK__OPS_FAIL(OP_SHAPE, "the output (buffer %d) must be the cache input (buffer %d)",
                          t->outputs[0], t->inputs[1]);
        break;
    }

    case AMK_OP_SAMPLE_ARGMAX: {
        int64_t L = amk__opshape_last(in[0]);
        if (in[0]->rank < 1 || L < 1)
            AMK__OPS_FAIL(OP_SHAPE, "logits '%s' needs rank >= 1 and a last dim >= 1",
                          amk__opshape_name(in[0]));
        if (!amk__opshape_is_index(out->dtype))
            AMK__OPS_FAIL(OP_DTYPE, "out '%s' must be I32, I8 or U8, not %s", amk__opshape_name(out),
                          amk_dtype_name(out->dtype));
        if (n_out != n_in[0] / L)
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, logits have %lld rows",
                          amk__opshape_name(out), (long long)n_out, (long long)(n_in[0] / L));
        break;
    }

    case AMK_OP_ATTENTION_COMBINE: {
        int64_t row = (int64_t)P.head_dim + 2;
        if (P.head_dim < 1) AMK__OPS_FAIL(PARAM_VALUE, "head_dim = %d must be >= 1", P.head_dim);
        for (i = 0; i < ni; i++) {
            if (in[i]->dtype != AMK_DTYPE_F32)
                AMK__OPS_FAIL(OP_DTYPE, "partial %d '%s' must be F32, not %s", i,
                              amk__opshape_name(in[i]), amk_dtype_name(in[i]->dtype));
            if (n_in[i] != n_in[0] || n_in[i] % row)
                AMK__OPS_FAIL(OP_SHAPE, "partial %d '%s' has %lld elements; every partial needs "
                              "%lld, a multiple of head_dim+2 = %lld", i, amk__opshape_name(in[i]),
                              (long long)n_in[i], (long long)n_in[0], (long long)row);
        }
        if (n_out != n_in[0] / row * P.head_dim)
            AMK__OPS_FAIL(OP_SHAPE, "out '%s' has %lld elements, n_heads*head_dim = %lld*%d",
                          amk__opshape_name(out), (long long)n_out, (long long)(n_in[0] / row),
                          P.head_dim);
        break;
    }

    default:
        AMK__OPS_FAIL(OP_UNKNOWN, "opcode %d is not defined", t->op);
    }
#undef AMK__OPS_FAIL
    return 1;
}

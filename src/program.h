/* ==== >>impl_program: registry, checks table, targets, building programs in code ============== */

/* OP_REGISTRY (spec §7). GEMV_TILE/GEMM_TILE also take a 4th input (zeros) when qdtype is set:
   validate handles that form (IR_SPEC_NOTES, weight-only quantized GEMV). */
static const amk_op_spec amk__op_specs[AMK_OP_COUNT] = {
    {"NOP", 0, 0, 0, {NULL}, "no-op"},
    {"COPY", 1, 1, 1, {NULL}, "out = x (cast)"},
    {"EMBED", 2, 2, 1, {"hidden", NULL}, "[ids, table[V,H]] -> gathered rows"},
    {"RMSNORM", 2, 2, 1, {"eps", "hidden", NULL}, "x*rsqrt(mean(x^2)+eps)*w"},
    {"LAYERNORM", 2, 3, 1, {"eps", "hidden", NULL}, "LayerNorm(x, w[, b])"},
    {"GEMV_TILE", 2, 3, 1, {"K", "N_tile", "n_off", NULL}, "out[..,n_off:n_off+N_tile] = x @ W[n_off:..].T"},
    {"GEMM_TILE", 2, 3, 1, {"M_tile", "K", "N_tile", "n_off", NULL}, "tiled GEMM (prefill/batch)"},
    {"ATTENTION_TILE", 3, 4, 1, {"head_dim", "kv_start", "kv_len", "scale", "n_heads", "n_kv_heads", NULL}, "GQA attention over a KV window"},
    {"ROPE", 2, 2, 1, {"head_dim", "theta", NULL}, "rotate-half rotary embedding"},
    {"SILU_MUL", 2, 2, 1, {NULL}, "silu(gate)*up"},
    {"GELU", 1, 1, 1, {NULL}, "exact GELU"},
    {"ADD", 2, 2, 1, {NULL}, "a + b"},
    {"MUL", 1, 2, 1, {NULL}, "a * b, or a * scale"},
    {"DEQUANT", 2, 3, 1, {"qdtype", "group", NULL}, "int4/int8 + scales -> fp"},
    {"SOFTMAX", 1, 1, 1, {NULL}, "softmax over dim"},
    {"ALLREDUCE_SHARD", 1, 8, 1, {NULL}, "sum of shards"},
    {"KV_APPEND", 2, 2, 1, {"pos", NULL}, "write row pos of the KV cache"},
    {"SAMPLE_ARGMAX", 1, 1, 1, {NULL}, "greedy argmax over the last axis"},
    {"ATTENTION_COMBINE", 2, 8, 1, {"head_dim", NULL}, "merge flash partials (acc, m, l)"},
};

AMK_API const amk_op_spec *amk_op_spec_get(int op) {
    return op >= 0 && op < AMK_OP_COUNT ? &amk__op_specs[op] : NULL;
}
AMK_API const char *amk_op_name(int op) { return op >= 0 && op < AMK_OP_COUNT ? amk__op_specs[op].name : "?"; }
AMK_API int amk_op_from_name(const char *name) {
    int i;
    if (!name) return -1;
    for (i = 0; i < AMK_OP_COUNT; i++)
        if (strcmp(amk__op_specs[i].name, name) == 0) return i;
    return -1;
}

/* The marshalled type of a known param key ('i' or 'f'), or 0 for an unknown key. */
AMK__FN char amk__param_field_type(const char *key) {
#define AMK__PF(name, ty) if (strcmp(key, #name) == 0) return ty;
    AMK_PARAM_FIELDS(AMK__PF)
#undef AMK__PF
    return 0;
}

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

/* ---- targets (spec §5.1) ------------------------------------------------------------------------ */

AMK_API amk_result amk_target_builtin(const char *name, amk_target *t) {
    if (!name || !t) return AMK_ERR_INVALID_ARG;
    memset(t, 0, sizeof *t);
    if (strcmp(name, "h100") == 0) {
        /* why: H100 SXM5 80GB datasheet values; 232448 B is the sm_90 dynamic smem opt-in cap */
        snprintf(t->name, sizeof t->name, "h100");
        t->sm_arch = 90; t->num_sms = 132;
        t->smem_bytes_per_sm = 233472; t->smem_bytes_per_block_optin = 232448;
        t->regs_per_sm = 65536; t->max_threads_per_sm = 2048; t->max_regs_per_thread = 255;
        t->l2_bytes = 52428800; t->hbm_bytes = 85899345920LL;
        t->hbm_bandwidth_gbs = 3350.0; t->fp16_tflops = 989.4; t->clock_ghz = 1.98;
        t->supports_cooperative = 1; t->wddm_tdr = 0;
        snprintf(t->note, sizeof t->note, "datasheet values");
        return AMK_OK;
    }
    if (strcmp(name, "h200") == 0) {
        snprintf(t->name, sizeof t->name, "h200");
        t->sm_arch = 90; t->num_sms = 132;
        t->smem_bytes_per_sm = 233472; t->smem_bytes_per_block_optin = 232448;
        t->regs_per_sm = 65536; t->max_threads_per_sm = 2048; t->max_regs_per_thread = 255;
        t->l2_bytes = 52428800; t->hbm_bytes = 151397597184LL;
        t->hbm_bandwidth_gbs = 4800.0; t->fp16_tflops = 989.4; t->clock_ghz = 1.98;
        t->supports_cooperative = 1; t->wddm_tdr = 0;
        snprintf(t->note, sizeof t->note, "datasheet values");
        return AMK_OK;
    }
    return AMK_ERR_NOT_FOUND;
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
    int i;
    if (!p) return 0;
    for (i = 0; i < p->n_buffers; i++) {
        const amk_buffer *b = &p->buffers[i];
        if (b->kind != AMK_KIND_WEIGHT && b->kind != AMK_KIND_CONST) continue;
        nb = amk__buffer_nbytes(b);
        if (nb < 0 || !amk__add_i64(total, nb, &total)) return -1;
    }
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
    AMK__MI(dim, -1);             /* SOFTMAX: the last axis */
    AMK__MI(rope_orig_ctx, 0);
    AMK__MF(eps, 0.0); AMK__MF(scale, 1.0); AMK__MF(theta, 10000.0);
    AMK__MF(rope_factor, 0.0);    /* 0: no llama3 RoPE scaling */
    AMK__MF(rope_low_freq_factor, 1.0); AMK__MF(rope_high_freq_factor, 4.0);
#undef AMK__MI
#undef AMK__MF
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

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
   for every size (IR_SPEC_NOTES 7): anc(counter) = union over producers p of anc(p) + {p} and
   anc(task) = union over its waited counters, as bit sets over tasks numbered by topological rank,
   computed one block of columns at a time so memory stays bounded. Every race question is then
   "is this set of tasks inside anc(t)?", answered block by block. */

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

/* Input j of t is KV_APPEND's cache, written in place: the op writes row pos and reads nothing
   of the cache, so it is not a read for the race rules. */
AMK__FN int amk__v_inplace_target(const amk_task *t, int j) {
    return t->op == AMK_OP_KV_APPEND && j == 1 && amk__v_len(t->n_outputs, t->outputs, 1) == 1 &&
           t->outputs[0] == t->inputs[1];
}

/* A task's param by key; unlike amk_task_param it survives NULL keys and malformed lists. */
AMK__FN const amk_param *amk__v_param(const amk_task *t, const char *key) {
    int i, np = amk__v_len(t->n_params, t->params, INT_MAX);
    for (i = 0; i < np; i++)
        if (t->params[i].key && strcmp(t->params[i].key, key) == 0) return &t->params[i];
    return NULL;
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

enum { AMK__VQ_READ, AMK__VQ_KV, AMK__VQ_WAW_COUNTER, AMK__VQ_WAW_OVERLAP, AMK__VQ_PAGE };

typedef struct amk__vctx {
    const amk_program *p;
    amk_report *rep;
    int keep;                 /* store issues (the caller passed a report) */
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
    for (k = 0; spec && k < 8 && spec->required[k]; k++)
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
        if (!bad && refs_ok && spec) {
            amk_check which = AMK_CHECK_OP_SHAPE;
            msg[0] = 0;
            if (!amk__op_check(p, t, &which, msg, sizeof msg)) {
                if ((int)which < 0 || which >= AMK_CHECK_COUNT) which = AMK_CHECK_OP_SHAPE;
                amk__v_issue(v, which, ti, -1, -1, "%s: %s", tn, msg);
                bad = 1;
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
        nbytes = v->buf_shape[x] ? -1 : amk__buffer_nbytes(b);
        if (nbytes > p->pages[pg].nbytes) {
            amk__v_issue(v, AMK_CHECK_PAGE_REF, -1, x, -1, "%s needs %lld bytes but page %d holds %lld", bn,
                         (long long)nbytes, pg, (long long)p->pages[pg].nbytes);
            ok = 0;
        }
        if (p->pages[pg].space != b->space) {
            amk__v_issue(v, AMK_CHECK_PAGE_REF, -1, x, -1, "%s is in %s but page %d is in %s", bn,
                         amk_space_name(b->space), pg, amk_space_name(p->pages[pg].space));
            ok = 0;
        }
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

/* The region a writer writes: columns [n0, n1) of rows [m0, m1) (IR_SPEC_NOTES 1). */
typedef struct amk__v_region { int64_t n0, n1, m0, m1; int task; } amk__v_region;

AMK__FN void amk__v_region_of(const amk_task *t, int ti, amk__v_region *r) {
    const amk_param *off = amk__v_param(t, "n_off"), *w = amk__v_param(t, "N_tile");
    r->task = ti;
    r->n0 = r->m0 = INT64_MIN;
    r->n1 = r->m1 = INT64_MAX;
    if ((t->op != AMK_OP_GEMV_TILE && t->op != AMK_OP_GEMM_TILE) || !off || !w) return;
    r->n0 = off->i; /* why: pass 2 proved these are int32, so the sums cannot overflow */
    r->n1 = off->i + w->i;
    if (t->op == AMK_OP_GEMM_TILE) {
        const amk_param *moff = amk__v_param(t, "m_off"), *mw = amk__v_param(t, "M_tile");
        if (!mw) return;
        r->m0 = moff ? moff->i : 0;
        r->m1 = r->m0 + mw->i;
    }
}

AMK__FN int amk__v_cmp_region(const void *x, const void *y) {
    const amk__v_region *a = (const amk__v_region *)x, *b = (const amk__v_region *)y;
    if (a->n0 != b->n0) return a->n0 < b->n0 ? -1 : 1;
    return (a->task > b->task) - (a->task < b->task);
}

AMK__FN int amk__v_overlap(const amk__v_region *a, const amk__v_region *b) {
    return a->n0 < a->n1 && a->m0 < a->m1 && b->n0 < b->n1 && b->m0 < b->m1 && a->n0 < b->n1 &&
           b->n0 < a->n1 && a->m0 < b->m1 && b->m0 < a->m1;
}

/* RACE_WAW questions for one buffer (IR_SPEC_NOTES 1). Writers signalling one counter form a
   group; writers of different groups must be ordered, and it is enough to ask it of consecutive
   groups sorted by their first topological rank (ordering is transitive through a non-empty
   group, and a later group can never precede an earlier one). Inside a group, overlapping
   regions (found by a sort on n_off) must be ordered too. */
AMK__FN void amk__v_waw(amk__vctx *v, int x, amk__v_key3 *tmp, amk__v_region *reg, amk__v_pair *grp) {
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
            amk__v_region_of(&v->p->tasks[t], t, &reg[k]);
        }
        qsort(reg, (size_t)len, sizeof *reg, amk__v_cmp_region);
        for (j = 0; j < len && overlaps < AMK__V_RACE_CAP; j++)
            for (k = j + 1; k < len && reg[k].n0 < reg[j].n1 && overlaps < AMK__V_RACE_CAP; k++) {
                int a = reg[j].task, b = reg[k].task, lo, hi;
                if (!amk__v_overlap(&reg[j], &reg[k])) continue;
                lo = g->rank[a] < g->rank[b] ? a : b;
                hi = lo == a ? b : a;
                amk__v_query(v, amk__v_pool_add(v, &lo, 1), 1, hi, 0, AMK__VQ_WAW_OVERLAP, x, -1);
                overlaps++;
            }
    }
}

/* Creates every happens-before question: RACE_READ / RACE_KV, RACE_WAW, PAGE_ALIAS. */
AMK__FN void amk__v_questions(amk__vctx *v) {
    const amk_program *p = v->p;
    const amk__vgraph *g = &v->g;
    int x, k, maxw = 1, npe = 0;
    amk__v_key3 *tmp = NULL;
    amk__v_region *reg = NULL;
    amk__v_pair *grp = NULL;
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
    if (!tmp || !reg || !grp) { v->oom = 1; goto done; }
    for (x = 0; x < v->nb && !v->oom; x++) {
        int kind = p->buffers[x].kind, nw = v->gwr_off[x + 1] - v->gwr_off[x], off;
        if (v->buf_enum[x] || !amk__v_transient_kind(kind) || nw == 0) continue;
        if (v->grd_off[x + 1] > v->grd_off[x]) {
            off = amk__v_pool_add(v, v->gwr + v->gwr_off[x], nw);
            for (k = v->grd_off[x]; k < v->grd_off[x + 1]; k++)
                amk__v_query(v, off, nw, v->grd[k], 1, kind == AMK_KIND_KV_CACHE ? AMK__VQ_KV : AMK__VQ_READ,
                             x, -1);
        }
        if (nw > 1) amk__v_waw(v, x, tmp, reg, grp);
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
    amk__free(tmp); amk__free(reg); amk__free(grp);
}

/* Answers every question: ancestor rows for one block of topological ranks at a time. */
AMK__FN void amk__v_answer(amk__vctx *v) {
    const amk__vgraph *g = &v->g;
    size_t total = (size_t)v->n + (size_t)v->nc, W = AMK__V_BLOCK_WORDS;
    amk__word *rows, *mask;
    int B, qi, k;
    if (!v->n_qs || !v->n) return;
    if (W > AMK__WORDS(v->n)) W = AMK__WORDS(v->n);
    while (W > 1 && total * W * sizeof(amk__word) > AMK__V_HB_BYTES) W /= 2;
    rows = (amk__word *)amk__calloc(total * W, sizeof(amk__word));
    mask = (amk__word *)amk__calloc(W, sizeof(amk__word));
    if (!rows || !mask) { v->oom = 1; amk__free(rows); amk__free(mask); return; }
    for (B = 0; B < v->n; B += (int)(W * 64)) {
        int width = v->n - B < (int)(W * 64) ? v->n - B : (int)(W * 64), lo = (int)W, hi = -1;
        int prev_off = -1, prev_len = -1;
        memset(mask, 0, W * sizeof(amk__word));
        for (k = 0; k < g->n_order; k++) {
            int node = g->order[k], j;
            amk__word *row = rows + (size_t)node * W;
            size_t w;
            memset(row, 0, W * sizeof(amk__word));
            if (node < v->n) {
                for (j = g->tw_off[node]; j < g->tw_off[node + 1]; j++) {
                    const amk__word *src = rows + ((size_t)v->n + (size_t)g->tw[j]) * W;
                    for (w = 0; w < W; w++) row[w] |= src[w];
                }
            } else {
                int c = node - v->n;
                for (j = g->prod_off[c]; j < g->prod_off[c + 1]; j++) {
                    int pt = g->prod[j], r = g->rank[pt] - B;
                    const amk__word *src = rows + (size_t)pt * W;
                    for (w = 0; w < W; w++) row[w] |= src[w];
                    if (r >= 0 && r < width) amk__bit_set(row, (size_t)r);
                }
            }
        }
        for (qi = 0; qi < v->n_qs; qi++) {
            amk__vq *q = &v->qs[qi];
            const amk__word *row;
            int tr, w;
            if (q->found >= 0) continue;
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
            row = rows + (size_t)q->target * W;
            tr = g->rank[q->target] - B;
            for (w = lo; w <= hi; w++) {
                amk__word miss = mask[w] & ~row[w];
                if (q->excl && tr >= 0 && tr < width && tr / 64 == w) miss &= ~((amk__word)1 << (tr % 64));
                if (miss) { q->found = g->by_rank[B + w * 64 + amk__v_ctz(miss)]; break; }
            }
        }
    }
    amk__free(rows);
    amk__free(mask);
}

/* Turns answered questions into issues, at most AMK__V_RACE_CAP per (kind, buffer, other), then
   one summary issue; one PAGE_ALIAS per pair of buffers. */
AMK__FN void amk__v_race_issues(amk__vctx *v) {
    static const amk_check checks[] = {AMK_CHECK_RACE_READ, AMK_CHECK_RACE_KV, AMK_CHECK_RACE_WAW,
                                       AMK_CHECK_RACE_WAW, AMK_CHECK_PAGE_ALIAS};
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

AMK_API amk_result amk_program_validate(const amk_program *p, amk_report *report) {
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
    int *wcount;         /* [nb] distinct writer tasks */
    int *wfired;         /* [nb] writers fired so far */
    int *victims, n_victims; /* tasks writing a buffer some task reads */
} amk__vsim;

AMK__FN void amk__vsim_free(amk__vsim *s) {
    amk__free(s->out_c); amk__free(s->n_waits); amk__free(s->w_off); amk__free(s->w);
    amk__free(s->pending); amk__free(s->value); amk__free(s->ptr); amk__free(s->ready);
    amk__free(s->fired); amk__free(s->rd_off); amk__free(s->rd); amk__free(s->wcount);
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

/* t just became ready: an adversary may fire it now, so every transient buffer it reads must
   already have all its writers (other than t) fired. */
AMK__FN void amk__vsim_check(const amk_program *p, amk__vsim *s, int t, amk__vsim_race *race, int order) {
    int k, j;
    const amk_task *tk = &p->tasks[t];
    int no = amk__v_len(tk->n_outputs, tk->outputs, AMK_MAX_OUTPUTS);
    for (k = s->rd_off[t]; k < s->rd_off[t + 1]; k++) {
        int x = s->rd[k], self = 0;
        for (j = 0; j < no; j++) self |= tk->outputs[j] == x;
        if (s->wfired[x] >= s->wcount[x] - self) continue;
        if (race->count++ == 0) {
            int w, i;
            race->task = t;
            race->buffer = x;
            race->order = order;
            race->writer = -1;
            for (w = 0; w < s->n && race->writer < 0; w++) { /* name one writer not yet fired */
                const amk_task *wk = &p->tasks[w];
                int nwo = amk__v_len(wk->n_outputs, wk->outputs, AMK_MAX_OUTPUTS);
                if (w == t || s->fired[w]) continue;
                for (i = 0; i < nwo; i++)
                    if (wk->outputs[i] == x) race->writer = w;
            }
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
    int t, j, i, pass, n_rd = 0;
    unsigned char *is_read;
    s->rd_off = (int *)amk__calloc((size_t)s->n + 1, sizeof(int));
    s->wcount = (int *)amk__calloc((size_t)s->nb + 1, sizeof(int));
    s->wfired = (int *)amk__calloc((size_t)s->nb + 1, sizeof(int));
    s->victims = (int *)amk__calloc((size_t)s->n + 1, sizeof(int));
    is_read = (unsigned char *)amk__calloc((size_t)s->nb + 1, 1);
    if (!s->rd_off || !s->wcount || !s->wfired || !s->victims || !is_read) { amk__free(is_read); return 0; }
    for (t = 0; t < s->n; t++) {
        const amk_task *tk = &p->tasks[t];
        int no = amk__v_len(tk->n_outputs, tk->outputs, AMK_MAX_OUTPUTS);
        for (j = 0; j < no; j++) {
            int x = tk->outputs[j], dup = 0;
            for (i = 0; i < j; i++) dup |= tk->outputs[i] == x;
            if (x >= 0 && x < s->nb && !dup) s->wcount[x]++;
        }
    }
    for (pass = 0; pass < 2; pass++) {
        n_rd = 0;
        for (t = 0; t < s->n; t++) {
            const amk_task *tk = &p->tasks[t];
            int ni = amk__v_len(tk->n_inputs, tk->inputs, AMK_MAX_INPUTS);
            s->rd_off[t] = n_rd;
            for (j = 0; j < ni; j++) {
                int x = tk->inputs[j], dup = 0;
                for (i = 0; i < j; i++) dup |= tk->inputs[i] == x;
                if (x < 0 || x >= s->nb || dup || !s->wcount[x] || amk__v_inplace_target(tk, j)) continue;
                if (!amk__v_transient_kind(p->buffers[x].kind)) continue;
                if (pass) s->rd[n_rd] = x;
                is_read[x] = 1;
                n_rd++;
            }
        }
        s->rd_off[s->n] = n_rd;
        if (pass == 0 && !(s->rd = (int *)amk__calloc((size_t)n_rd + 1, sizeof(int)))) { amk__free(is_read); return 0; }
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

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

/* Validates p. AMK_OK when accepted; else AMK_ERR_REJECTED with the first error in d (skipping
   the checks of a schedule when before is set: lowering replaces the schedule), or the
   validator's failure (out of memory). */
AMK__FN amk_result amk__lower_validate(const amk_program *p, int before, amk_diag *d) {
    amk_report rep;
    amk_result r;
    int i;
    memset(&rep, 0, sizeof rep);
    r = amk_program_validate(p, &rep);
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

/* sm[k] for the task at position k. explicit_sm is sm_of[original index] (explicit mode). */
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
    if (c->sm_assignment == AMK_SM_LOAD_BALANCE) {
        /* why: with ties going to the lowest index, n tasks never reach an SM index >= n, so
           loads beyond min(num_sms, n) need no memory (num_sms comes from the caller) */
        load = (int64_t *)amk__calloc((size_t)(m ? m : 1), sizeof(int64_t));
        heap.items = (amk__lower_hitem *)amk__malloc(((size_t)m + (size_t)n + 1) * sizeof(amk__lower_hitem));
        if (!load || !heap.items) { r = amk__lower_oom(d); goto done; }
        for (j = 0; j < m; j++) amk__lower_hpush(&heap, 0, j);
    }
    for (k = 0; k < n; k++) {
        int g = amk__lower_find(parent, k), s = group_sm[g];
        if (c->sm_assignment == AMK_SM_ROUND_ROBIN) {
            if (s < 0) s = k % num_sms;
        } else {
            int64_t cost = p->tasks[order[k]].est_bytes;
            if (cost < 1) cost = 1; /* why: zero-cost tasks still spread over the SMs */
            while (s < 0) { /* the least-loaded SM; heap entries left stale by followers are skipped */
                amk__lower_hitem top = amk__lower_hpop(&heap);
                if (top.key == load[top.val]) s = top.val;
            }
            load[s] = load[s] > INT64_MAX - cost ? INT64_MAX : load[s] + cost;
            amk__lower_hpush(&heap, load[s], s);
        }
        group_sm[g] = s;
        sm[k] = s;
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

AMK_API amk_result amk_program_lower(amk_program *p, const amk_config *c, const amk_target *t,
                                     amk_diag *d) {
    amk_config cfg;
    amk_target target;
    amk_task *tasks = NULL;
    amk_page *pages = NULL;
    int *order = NULL, *sm = NULL, *explicit_sm = NULL, *buffer_page = NULL;
    int n, n_pages = 0, k;
    amk_result r;
    amk_diag_clear(d);
    r = amk__lower_check_args(p, c, t, d);
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

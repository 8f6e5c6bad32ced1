/* Lowering (spec §5): order, SM assignment, pages, config checks. Random programs come from
   randprog.h; every property is checked against an independent oracle written here (a plain
   O(n^2) reachability closure and a naive stable Kahn), not against lower's own helpers. */
#include "../amk.h"
#include "amk_test.h"
#include "randprog.h"

static amk_target target_with(int num_sms) {
    amk_target t;
    amk_target_builtin("h100", &t);
    t.num_sms = num_sms;
    return t;
}

/* ---- oracle: happens-before over list positions ------------------------------------------------ */

typedef struct oracle {
    int n;
    unsigned char *hb; /* [n][n]: hb[u*n+v] = 1 if task u happens-before task v (positions) */
} oracle;

/* Transitive closure of producer -> waiter edges by repeated relaxation (small n only). */
static void oracle_build(const amk_program *p, oracle *o) {
    int n = p->n_tasks, u, v, j, changed = 1;
    o->n = n;
    o->hb = (unsigned char *)calloc((size_t)n * (size_t)n + 1, 1);
    for (v = 0; v < n; v++)
        for (j = 0; j < p->tasks[v].n_waits; j++)
            for (u = 0; u < n; u++)
                if (p->tasks[u].out_counter == p->tasks[v].waits[j].counter) o->hb[u * n + v] = 1;
    while (changed) {
        changed = 0;
        for (u = 0; u < n; u++)
            for (v = 0; v < n; v++) {
                int w;
                if (!o->hb[u * n + v]) continue;
                for (w = 0; w < n; w++)
                    if (o->hb[v * n + w] && !o->hb[u * n + w]) { o->hb[u * n + w] = 1; changed = 1; }
            }
    }
}

static int task_uses(const amk_task *t, int b, int writes_only) {
    int j;
    for (j = 0; j < t->n_outputs; j++)
        if (t->outputs[j] == b) return 1;
    if (!writes_only)
        for (j = 0; j < t->n_inputs; j++)
            if (t->inputs[j] == b) return 1;
    return 0;
}

/* The PAGE_ALIAS rule between buffers a and b: every use of one happens-before every write of the
   other (in one of the two directions). */
static int oracle_may_share(const amk_program *p, const oracle *o, int a, int b) {
    int dir;
    for (dir = 0; dir < 2; dir++) {
        int x = dir ? b : a, y = dir ? a : b, u, w, ok = 1;
        for (u = 0; u < p->n_tasks && ok; u++) {
            if (!task_uses(&p->tasks[u], x, 0)) continue;
            for (w = 0; w < p->n_tasks && ok; w++)
                if (task_uses(&p->tasks[w], y, 1) && !o->hb[u * o->n + w]) ok = 0;
        }
        if (ok) return 1;
    }
    return 0;
}

/* 1 if the list is a topological order: every producer of a counter a task waits on is earlier. */
static int is_topological(const amk_program *p) {
    int v, u, j;
    for (v = 0; v < p->n_tasks; v++)
        for (j = 0; j < p->tasks[v].n_waits; j++)
            for (u = v; u < p->n_tasks; u++)
                if (p->tasks[u].out_counter == p->tasks[v].waits[j].counter) return 0;
    return 1;
}

/* The naive stable Kahn: repeatedly take the lowest-index task whose producers are all taken.
   ids_out gets the task ids in that order. */
static void naive_stable_order(const amk_program *p, int *ids_out) {
    int n = p->n_tasks, k, i, j, u;
    unsigned char *done = (unsigned char *)calloc((size_t)n + 1, 1);
    for (k = 0; k < n; k++) {
        for (i = 0; i < n; i++) {
            int ready = !done[i];
            for (j = 0; j < p->tasks[i].n_waits && ready; j++)
                for (u = 0; u < n && ready; u++)
                    if (!done[u] && p->tasks[u].out_counter == p->tasks[i].waits[j].counter) ready = 0;
            if (ready) break;
        }
        if (i == n) break;
        done[i] = 1;
        ids_out[k] = p->tasks[i].id;
    }
    free(done);
}

static int has_onchip(const amk_program *p) {
    int b;
    for (b = 0; b < p->n_buffers; b++)
        if (p->buffers[b].space == AMK_SPACE_SMEM || p->buffers[b].space == AMK_SPACE_REGISTER) return 1;
    return 0;
}

static int count_activations(const amk_program *p) {
    int b, n = 0;
    for (b = 0; b < p->n_buffers; b++) n += p->buffers[b].kind == AMK_KIND_ACTIVATION;
    return n;
}

/* Checks every property of a lowered program q (lowered from the topologically ordered orig). */
static void check_lowered(const amk_program *orig, const amk_program *q, const amk_config *c,
                          int num_sms, const char *what) {
    int k, b, a, n = q->n_tasks;
    CHECK_EQ_INT(n, orig->n_tasks);
    CHECK(q->has_target && q->target.num_sms == num_sms);
    CHECK(q->has_config && q->config.sm_assignment == c->sm_assignment &&
          q->config.page_allocation == c->page_allocation);
    CHECK_MSG(amk_program_validate(q, NULL) == AMK_OK, "%s: the lowered program does not validate", what);
    CHECK_MSG(is_topological(q), "%s: order is not topological", what);
    for (k = 0; k < n; k++) {
        CHECK_MSG(q->tasks[k].sm >= 0 && q->tasks[k].sm < num_sms, "%s: task %d sm %d", what, k, q->tasks[k].sm);
        /* orig was topological, so the order is kept exactly, and the tasks are intact */
        CHECK_EQ_INT(q->tasks[k].id, orig->tasks[k].id);
        CHECK_EQ_INT(q->tasks[k].op, orig->tasks[k].op);
        CHECK_EQ_INT(q->tasks[k].out_counter, orig->tasks[k].out_counter);
    }
    /* on-chip buffers: all users on one SM */
    for (b = 0; b < q->n_buffers; b++) {
        int sm = -1;
        if (q->buffers[b].space != AMK_SPACE_SMEM && q->buffers[b].space != AMK_SPACE_REGISTER) continue;
        for (k = 0; k < n; k++) {
            if (!task_uses(&q->tasks[k], b, 0)) continue;
            if (sm < 0) sm = q->tasks[k].sm;
            CHECK_MSG(q->tasks[k].sm == sm, "%s: on-chip buffer %d used on SMs %d and %d", what, b, sm, q->tasks[k].sm);
        }
    }
    if (c->sm_assignment == AMK_SM_ROUND_ROBIN && !has_onchip(q))
        for (k = 0; k < n; k++) CHECK_EQ_INT(q->tasks[k].sm, k % num_sms);
    if (c->sm_assignment == AMK_SM_LOAD_BALANCE && !has_onchip(q)) {
        /* greedy bound within each dependency level (level = 1 + the deepest producer a task waits
           on; computed here from the waits, independently of the lowering): the level's max SM
           load <= its min load + its largest single cost (cost = max(est, 1)). With fewer tasks than
           SMs in a level, no SM gets two before every SM has one. */
        int *lvl = (int *)calloc((size_t)n + 1, sizeof(int)), *cl = (int *)calloc((size_t)q->n_counters + 1, sizeof(int));
        int max_lv = 0, lv, j;
        int64_t *load = (int64_t *)calloc((size_t)num_sms, sizeof(int64_t));
        int *cnt = (int *)calloc((size_t)num_sms, sizeof(int));
        for (k = 0; k < n; k++) {
            const amk_task *t = &q->tasks[k];
            for (j = 0; j < t->n_waits; j++)
                if (cl[t->waits[j].counter] > lvl[k]) lvl[k] = cl[t->waits[j].counter];
            lvl[k]++;
            if (cl[t->out_counter] < lvl[k]) cl[t->out_counter] = lvl[k];
            if (lvl[k] > max_lv) max_lv = lvl[k];
        }
        for (lv = 1; lv <= max_lv; lv++) {
            int64_t big = 0, lo, hi;
            int n_lv = 0, most = 0;
            memset(load, 0, (size_t)num_sms * sizeof(int64_t));
            memset(cnt, 0, (size_t)num_sms * sizeof(int));
            for (k = 0; k < n; k++) {
                int64_t cost = q->tasks[k].est_bytes > 0 ? q->tasks[k].est_bytes : 1;
                if (lvl[k] != lv) continue;
                load[q->tasks[k].sm] += cost;
                if (++cnt[q->tasks[k].sm] > most) most = cnt[q->tasks[k].sm];
                if (cost > big) big = cost;
                n_lv++;
            }
            lo = hi = load[0];
            for (k = 1; k < num_sms; k++) {
                if (load[k] < lo) lo = load[k];
                if (load[k] > hi) hi = load[k];
            }
            if (n_lv >= num_sms)
                CHECK_MSG(hi <= lo + big, "%s: level %d loads %lld..%lld, largest task %lld", what, lv,
                          (long long)lo, (long long)hi, (long long)big);
            else
                CHECK_MSG(most == 1, "%s: level %d has %d tasks on %d SMs but %d on one", what, lv, n_lv, num_sms, most);
        }
        free(lvl); free(cl); free(load); free(cnt);
    }
    /* pages */
    if (c->page_allocation == AMK_PAGES_NONE) {
        CHECK(!q->has_pages && q->n_pages == 0 && q->buffer_page == NULL);
        return;
    }
    CHECK(q->has_pages && q->buffer_page != NULL);
    if (!q->has_pages || !q->buffer_page) return;
    if (c->page_allocation == AMK_PAGES_LINEAR) CHECK_EQ_INT(q->n_pages, count_activations(q));
    else CHECK_MSG(q->n_pages <= count_activations(q), "%s: %d pages", what, q->n_pages);
    for (b = 0; b < q->n_buffers; b++) {
        int pg = q->buffer_page[b], used = 0, first = -1, last = -1;
        const amk_page *page;
        for (k = 0; k < n; k++)
            if (task_uses(&q->tasks[k], b, 0)) { used = 1; if (first < 0) first = k; last = k; }
        if (q->buffers[b].kind != AMK_KIND_ACTIVATION) { CHECK_EQ_INT(pg, -1); continue; }
        if (c->page_allocation == AMK_PAGES_LINEAR || used) CHECK_MSG(pg >= 0, "%s: buffer %d has no page", what, b);
        if (pg < 0 || pg >= q->n_pages) continue;
        page = &q->pages[pg];
        CHECK_EQ_INT(page->id, pg);
        CHECK_EQ_INT(page->space, q->buffers[b].space);
        if (c->page_allocation == AMK_PAGES_LINEAR) {
            CHECK_EQ_INT(page->nbytes, amk_dtype_nbytes(q->buffers[b].dtype, amk_buffer_numel(&q->buffers[b])));
            CHECK_EQ_INT(page->live_start, first);
            CHECK_EQ_INT(page->live_end, last);
        } else {
            CHECK(page->nbytes >= amk_dtype_nbytes(q->buffers[b].dtype, amk_buffer_numel(&q->buffers[b])));
            if (used) CHECK(page->live_start <= first && page->live_end >= last);
        }
    }
    if (c->page_allocation == AMK_PAGES_GRAPH_COLOR) {
        oracle o;
        oracle_build(q, &o);
        for (a = 0; a < q->n_buffers; a++)
            for (b = a + 1; b < q->n_buffers; b++)
                if (q->buffer_page[a] >= 0 && q->buffer_page[a] == q->buffer_page[b])
                    CHECK_MSG(oracle_may_share(q, &o, a, b), "%s: buffers %d and %d share page %d unordered",
                              what, a, b, q->buffer_page[a]);
        free(o.hb);
    }
}

static void lower_ok(amk_program *p, const amk_config *c, int num_sms) {
    amk_target t = target_with(num_sms);
    amk_diag d;
    amk_result r = amk_program_lower(p, c, &t, &d);
    CHECK_MSG(r == AMK_OK, "lower: %s [%s]", amk_result_str(r), d.message);
}

/* ---- random programs ----------------------------------------------------------------------------- */

static void test_randprog_validates(void) {
    int seed, n_bad = 0, counts[RANDPROG_FORM_COUNT] = {0};
    for (seed = 0; seed < 200; seed++) {
        randprog_opts o;
        amk_program *p;
        amk_report rep;
        amk_result r;
        o.n_tasks = 8 + seed % 40;
        o.kv = -1;
        o.onchip = seed % 3 == 0;
        o.ops = RANDPROG_OPS_ALL;
        p = randprog_make((uint64_t)seed, &o);
        CHECK(p != NULL);
        if (!p) continue;
        CHECK(p->n_tasks >= 3);
        CHECK(is_topological(p));
        randprog_count_forms(p, counts);
        r = amk_program_validate(p, &rep);
        if (r != AMK_OK && n_bad++ < 3) {
            char line[512];
            int i;
            for (i = 0; i < rep.n_items; i++) {
                if (!rep.items[i].is_error) continue;
                amk_report_format_issue(p, &rep.items[i], line, sizeof line);
                fprintf(stderr, "seed %d: %s\n", seed, line);
                break;
            }
        }
        CHECK_MSG(r == AMK_OK, "seed %d: %s", seed, amk_result_str(r));
        amk_report_free(&rep);
        amk_program_free(p);
    }
    randprog_check_fused_coverage(counts, 200, "randprog validates");
}

static void test_random_all_modes(void) {
    static const int sms[3] = {1, 3, 132};
    static const amk_sm_assignment assign[2] = {AMK_SM_LOAD_BALANCE, AMK_SM_ROUND_ROBIN};
    static const amk_page_allocation pages[3] = {AMK_PAGES_GRAPH_COLOR, AMK_PAGES_LINEAR, AMK_PAGES_NONE};
    int seed, s, a, g;
    for (seed = 0; seed < 120; seed++) {
        randprog_opts o;
        amk_program *orig;
        o.n_tasks = 6 + seed % 30;
        o.kv = -1;
        o.onchip = seed % 4 == 1;
        o.ops = RANDPROG_OPS_ALL;
        orig = randprog_make((uint64_t)seed + 1000, &o);
        CHECK(orig != NULL);
        if (!orig) continue;
        for (s = 0; s < 3; s++)
            for (a = 0; a < 2; a++)
                for (g = 0; g < 3; g++) {
                    amk_program *q = amk_program_clone(orig);
                    amk_config c;
                    char what[64];
                    amk_config_default(&c);
                    c.sm_assignment = assign[a];
                    c.page_allocation = pages[g];
                    snprintf(what, sizeof what, "seed %d sms %d assign %d pages %d", seed, sms[s], a, g);
                    lower_ok(q, &c, sms[s]);
                    check_lowered(orig, q, &c, sms[s], what);
                    amk_program_free(q);
                }
        amk_program_free(orig);
    }
}

/* A shuffled (not topological) list comes out in exactly the naive stable Kahn order. */
static void test_random_shuffled_order(void) {
    int seed;
    for (seed = 0; seed < 100; seed++) {
        randprog_opts o;
        randprog_rng rng;
        amk_program *p;
        amk_config c;
        int *expect, i, n;
        o.n_tasks = 5 + seed % 25;
        o.kv = -1;
        o.onchip = 0;
        o.ops = RANDPROG_OPS_ALL;
        p = randprog_make((uint64_t)seed + 5000, &o);
        CHECK(p != NULL);
        if (!p) continue;
        n = p->n_tasks;
        rng.s = (uint64_t)seed;
        for (i = n - 1; i > 0; i--) {
            int j = randprog_below(&rng, i + 1);
            amk_task tmp = p->tasks[i];
            p->tasks[i] = p->tasks[j];
            p->tasks[j] = tmp;
        }
        expect = (int *)malloc((size_t)n * sizeof(int));
        naive_stable_order(p, expect);
        amk_config_default(&c);
        lower_ok(p, &c, 3);
        CHECK(is_topological(p));
        for (i = 0; i < n; i++) CHECK_EQ_INT(p->tasks[i].id, expect[i]);
        free(expect);
        amk_program_free(p);
    }
}

/* Explicit maps taken as given on random programs. */
static void test_random_explicit(void) {
    int seed;
    for (seed = 0; seed < 60; seed++) {
        randprog_opts o;
        randprog_rng rng;
        amk_program *p;
        amk_config c;
        int i, n, *want;
        o.n_tasks = 10;
        o.kv = -1;
        o.onchip = 0;
        o.ops = RANDPROG_OPS_ALL;
        p = randprog_make((uint64_t)seed + 9000, &o);
        CHECK(p != NULL);
        if (!p) continue;
        n = p->n_tasks;
        amk_config_default(&c);
        c.sm_assignment = AMK_SM_EXPLICIT;
        c.n_explicit = n;
        c.explicit_task = (int *)malloc((size_t)n * sizeof(int));
        c.explicit_sm = (int *)malloc((size_t)n * sizeof(int));
        want = (int *)malloc((size_t)n * sizeof(int));
        rng.s = (uint64_t)seed;
        for (i = 0; i < n; i++) { /* listed back to front, ids mapped to random SMs */
            c.explicit_task[i] = p->tasks[n - 1 - i].id;
            c.explicit_sm[i] = randprog_below(&rng, 5);
            want[n - 1 - i] = c.explicit_sm[i];
        }
        lower_ok(p, &c, 5);
        for (i = 0; i < n; i++) CHECK_EQ_INT(p->tasks[i].sm, want[i]);
        CHECK_EQ_INT(p->config.n_explicit, n);
        free(want);
        free(c.explicit_task);
        free(c.explicit_sm);
        amk_program_free(p);
    }
}

/* ---- hand-made programs ----------------------------------------------------------------------- */

/* x -> A -> a0 -> B -> a1 -> C -> a2 -> D -> a3 (each an elementwise op on the previous). */
/* An F32 [1, 16] buffer: an input in HBM or an activation in global scratch. */
static int vec16(amk_program *p, const char *name, int input) {
    int64_t shape[2];
    shape[0] = 1; shape[1] = 16;
    return amk_program_add_buffer(p, name, input ? AMK_KIND_IO_INPUT : AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, shape,
                                  input ? AMK_SPACE_HBM : AMK_SPACE_GLOBAL_SCRATCH, NULL);
}

static amk_program *chain_program(int n_links) {
    amk_program *p = amk_program_create();
    int prev = vec16(p, "x", 1), i;
    for (i = 0; i < n_links; i++) {
        char name[16];
        int out, c, t;
        snprintf(name, sizeof name, "a%d", i);
        out = vec16(p, name, 0);
        c = amk_program_add_counter(p, name);
        t = amk_program_add_task(p, AMK_OP_COPY, &prev, 1, &out, 1, c, name);
        if (i > 0) amk_task_add_wait(p, t, c - 1, 1);
        prev = out;
    }
    return p;
}

static void test_chain_reuses_two_pages(void) {
    amk_program *p = chain_program(4), *q = amk_program_clone(p);
    amk_config c;
    amk_config_default(&c);
    lower_ok(p, &c, 3);
    CHECK_EQ_INT(p->n_pages, 2);
    CHECK_EQ_INT(p->buffer_page[0], -1); /* the IO_INPUT */
    CHECK_EQ_INT(p->buffer_page[1], 0);
    CHECK_EQ_INT(p->buffer_page[2], 1);
    CHECK_EQ_INT(p->buffer_page[3], 0);
    CHECK_EQ_INT(p->buffer_page[4], 1);
    CHECK_EQ_INT(p->pages[0].nbytes, 64);
    CHECK_EQ_INT(p->pages[0].live_start, 0);
    CHECK_EQ_INT(p->pages[0].live_end, 3); /* a2: written by task 2, read by task 3 */
    CHECK_EQ_INT(p->pages[1].live_start, 1);
    CHECK_EQ_INT(p->pages[1].live_end, 3);
    c.page_allocation = AMK_PAGES_LINEAR;
    lower_ok(q, &c, 3);
    CHECK_EQ_INT(q->n_pages, 4);
    CHECK_EQ_INT(q->pages[3].live_start, 3);
    CHECK_EQ_INT(q->pages[3].live_end, 3);
    amk_program_free(p);
    amk_program_free(q);
}

/* Two independent branches x -> A -> a -> B -> b and x -> C -> c -> D -> d listed one after the
   other: the position ranges of a and c do not overlap, but nothing orders them. */
static void test_unordered_branches_never_share(void) {
    amk_program *p = amk_program_create();
    int64_t shape[2];
    int x, a, b, cc, dd, c0, c1, c2, c3, t;
    amk_config c;
    shape[0] = 1; shape[1] = 8;
    x = amk_program_add_buffer(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, shape, AMK_SPACE_HBM, NULL);
    a = amk_program_add_buffer(p, "a", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, shape, AMK_SPACE_HBM, NULL);
    b = amk_program_add_buffer(p, "b", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, shape, AMK_SPACE_HBM, NULL);
    cc = amk_program_add_buffer(p, "c", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, shape, AMK_SPACE_HBM, NULL);
    dd = amk_program_add_buffer(p, "d", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, shape, AMK_SPACE_HBM, NULL);
    c0 = amk_program_add_counter(p, "a");
    c1 = amk_program_add_counter(p, "b");
    c2 = amk_program_add_counter(p, "c");
    c3 = amk_program_add_counter(p, "d");
    amk_program_add_task(p, AMK_OP_COPY, &x, 1, &a, 1, c0, "A");
    t = amk_program_add_task(p, AMK_OP_COPY, &a, 1, &b, 1, c1, "B");
    amk_task_add_wait(p, t, c0, 1);
    amk_program_add_task(p, AMK_OP_COPY, &x, 1, &cc, 1, c2, "C");
    t = amk_program_add_task(p, AMK_OP_COPY, &cc, 1, &dd, 1, c3, "D");
    amk_task_add_wait(p, t, c2, 1);
    amk_config_default(&c);
    lower_ok(p, &c, 2);
    CHECK_EQ_INT(p->n_pages, 2);
    CHECK(p->buffer_page[a] >= 0 && p->buffer_page[cc] >= 0 && p->buffer_page[a] != p->buffer_page[cc]);
    CHECK_EQ_INT(p->pages[p->buffer_page[a]].live_end, 1);
    CHECK_EQ_INT(p->pages[p->buffer_page[cc]].live_start, 2);
    /* now order C after B: c may reuse a's page */
    amk_task_add_wait(p, 2, c1, 1); /* the task list is unchanged: C is index 2 */
    lower_ok(p, &c, 2);
    CHECK_EQ_INT(p->n_pages, 1);
    CHECK_EQ_INT(p->buffer_page[a], p->buffer_page[cc]);
    amk_program_free(p);
}

/* Pages never mix spaces; a page is as large as its largest buffer; round robin keeps the users
   of an SMEM buffer on one SM. */
static void test_pages_space_and_size(void) {
    amk_program *p = amk_program_create();
    int64_t s8[2];
    int x, a, b, cbuf, out, c0, c1, c2, c3, t;
    amk_config c;
    s8[0] = 1; s8[1] = 8;
    x = amk_program_add_buffer(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, s8, AMK_SPACE_HBM, NULL);
    a = amk_program_add_buffer(p, "a", AMK_KIND_ACTIVATION, AMK_DTYPE_BF16, 2, s8, AMK_SPACE_SMEM, NULL);
    b = amk_program_add_buffer(p, "b", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, s8, AMK_SPACE_GLOBAL_SCRATCH, NULL);
    cbuf = amk_program_add_buffer(p, "c", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, s8, AMK_SPACE_SMEM, NULL);
    out = amk_program_add_buffer(p, "out", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, s8, AMK_SPACE_HBM, NULL);
    c0 = amk_program_add_counter(p, "");
    c1 = amk_program_add_counter(p, "");
    c2 = amk_program_add_counter(p, "");
    c3 = amk_program_add_counter(p, "");
    amk_program_add_task(p, AMK_OP_COPY, &x, 1, &a, 1, c0, "a");
    t = amk_program_add_task(p, AMK_OP_COPY, &a, 1, &b, 1, c1, "b");
    amk_task_add_wait(p, t, c0, 1);
    t = amk_program_add_task(p, AMK_OP_COPY, &b, 1, &cbuf, 1, c2, "c");
    amk_task_add_wait(p, t, c1, 1);
    t = amk_program_add_task(p, AMK_OP_COPY, &b, 1, &out, 1, c3, "out");
    amk_task_add_wait(p, t, c1, 1);
    amk_config_default(&c);
    c.sm_assignment = AMK_SM_ROUND_ROBIN;
    lower_ok(p, &c, 4);
    CHECK_EQ_INT(p->n_pages, 2);
    CHECK_EQ_INT(p->buffer_page[a], p->buffer_page[cbuf]); /* both SMEM; a is dead before c is written */
    CHECK(p->buffer_page[b] != p->buffer_page[a]);
    CHECK_EQ_INT(p->pages[p->buffer_page[a]].space, AMK_SPACE_SMEM);
    CHECK_EQ_INT(p->pages[p->buffer_page[a]].nbytes, 32); /* max(16 B of bf16 x 8, 32 B of f32 x 8) */
    CHECK_EQ_INT(p->pages[p->buffer_page[b]].space, AMK_SPACE_GLOBAL_SCRATCH);
    CHECK_EQ_INT(p->tasks[0].sm, 0);
    CHECK_EQ_INT(p->tasks[1].sm, 0); /* follows the writer of a */
    CHECK_EQ_INT(p->tasks[2].sm, 2); /* c has a single user: its own round-robin slot */
    CHECK_EQ_INT(p->tasks[3].sm, 3);
    amk_program_free(p);
}

/* n independent NOPs with the given est_bytes. */
/* Task k of p is on SM want[k], for k < n. */
static void check_sms(const amk_program *p, const int *want, int n) {
    int k;
    for (k = 0; k < n; k++) CHECK_MSG(p->tasks[k].sm == want[k], "task %d on SM %d, want %d", k, p->tasks[k].sm, want[k]);
}

static amk_program *nops(const int64_t *est, int n) {
    amk_program *p = amk_program_create();
    int i;
    for (i = 0; i < n; i++) {
        int c = amk_program_add_counter(p, "");
        int t = amk_program_add_task(p, AMK_OP_NOP, NULL, 0, NULL, 0, c, "nop");
        p->tasks[t].est_bytes = est[i];
    }
    return p;
}

static void test_load_balance_exact(void) {
    static const int64_t est[6] = {100, 30, 30, 30, 50, 0};
    static const int64_t zero[4] = {0, 0, 0, 0};
    amk_program *p = nops(est, 6), *z = nops(zero, 4);
    amk_config c;
    amk_config_default(&c);
    lower_ok(p, &c, 2);
    /* loads: 100|0 -> 100|30 -> 100|60 -> 100|90 -> 100|140 -> 101|140 */
    { static const int want[6] = {0, 1, 1, 1, 1, 0}; check_sms(p, want, 6); }
    lower_ok(z, &c, 3); /* zero-cost tasks spread: 0, 1, 2, then 0 */
    { static const int want[4] = {0, 1, 2, 0}; check_sms(z, want, 4); }
    amk_program_free(p);
    amk_program_free(z);
}

/* load_balance: among SMs with the same load in a level, a task goes to one that already runs a
   task of its opcode (the op's code is warm there), before the least total load. Level 1: a NOP
   of 100 bytes (SM 0), a COPY of 50 (SM 1), a NOP of 1 (SM 2); level 2 (waits on all three): a
   COPY of 10 goes to SM 1, not to the least loaded SM 2; a NOP after it (same level) to SM 2,
   whose level load is now the least (SM 0 runs NOPs too, but carries 100). */
static void test_load_balance_op_affinity(void) {
    amk_program *p = amk_program_create();
    int x = vec16(p, "x", 1), a = vec16(p, "a", 0), b = vec16(p, "b", 0), c1, c2, t;
    amk_config c;
    c1 = amk_program_add_counter(p, "level 1");
    c2 = amk_program_add_counter(p, "level 2");
    t = amk_program_add_task(p, AMK_OP_NOP, NULL, 0, NULL, 0, c1, "nop 100");
    p->tasks[t].est_bytes = 100;
    t = amk_program_add_task(p, AMK_OP_COPY, &x, 1, &a, 1, c1, "copy 50");
    p->tasks[t].est_bytes = 50;
    t = amk_program_add_task(p, AMK_OP_NOP, NULL, 0, NULL, 0, c1, "nop 1");
    p->tasks[t].est_bytes = 1;
    t = amk_program_add_task(p, AMK_OP_COPY, &a, 1, &b, 1, c2, "copy 10");
    p->tasks[t].est_bytes = 10;
    amk_task_add_wait(p, t, c1, 3);
    t = amk_program_add_task(p, AMK_OP_NOP, NULL, 0, NULL, 0, c2, "nop 10");
    p->tasks[t].est_bytes = 10;
    amk_task_add_wait(p, t, c1, 3);
    amk_config_default(&c);
    lower_ok(p, &c, 3);
    { static const int want[5] = {0, 1, 2, 1, 2}; check_sms(p, want, 5); }
    amk_program_free(p);
}

/* The affinity is bounded: an SM that runs the op may carry at most the largest task so far (or
   1/8 of the least loaded SM's bytes) more than the least loaded SM. Two SMs, a chain of levels
   of 30 bytes each: COPY (SM 0) beside a NOP (SM 1), then NOPs alone: the first two follow SM 1
   (30 and 60 against 30), the third goes to SM 0 (90 would be 60 over). */
static void test_load_balance_affinity_bound(void) {
    amk_program *p = amk_program_create();
    int x = vec16(p, "x", 1), a = vec16(p, "a", 0), c, prev, i, t;
    amk_config cfg;
    prev = amk_program_add_counter(p, "level 1");
    t = amk_program_add_task(p, AMK_OP_COPY, &x, 1, &a, 1, prev, "copy");
    p->tasks[t].est_bytes = 30;
    t = amk_program_add_task(p, AMK_OP_NOP, NULL, 0, NULL, 0, prev, "nop");
    p->tasks[t].est_bytes = 30;
    for (i = 0; i < 3; i++) {
        c = amk_program_add_counter(p, "level");
        t = amk_program_add_task(p, AMK_OP_NOP, NULL, 0, NULL, 0, c, "nop");
        p->tasks[t].est_bytes = 30;
        amk_task_add_wait(p, t, prev, i == 0 ? 2 : 1);
        prev = c;
    }
    amk_config_default(&cfg);
    lower_ok(p, &cfg, 2);
    { static const int want[5] = {0, 1, 1, 1, 0}; check_sms(p, want, 5); }
    amk_program_free(p);
}

/* A huge num_sms costs no memory and all tasks land on distinct low SMs. */
static void test_many_sms(void) {
    static const int64_t est[3] = {5, 5, 5};
    amk_program *p = nops(est, 3);
    amk_config c;
    amk_config_default(&c);
    lower_ok(p, &c, 2000000000);
    CHECK_EQ_INT(p->tasks[0].sm, 0);
    CHECK_EQ_INT(p->tasks[1].sm, 1);
    CHECK_EQ_INT(p->tasks[2].sm, 2);
    c.sm_assignment = AMK_SM_ROUND_ROBIN;
    lower_ok(p, &c, 2000000000);
    CHECK_EQ_INT(p->tasks[2].sm, 2);
    amk_program_free(p);
}

/* A rejected call leaves p as it was. */
static void check_untouched(const amk_program *p, const amk_program *before) {
    int k;
    CHECK_EQ_INT(p->n_tasks, before->n_tasks);
    for (k = 0; k < p->n_tasks && k < before->n_tasks; k++) {
        CHECK_EQ_INT(p->tasks[k].id, before->tasks[k].id);
        CHECK_EQ_INT(p->tasks[k].sm, before->tasks[k].sm);
    }
    CHECK_EQ_INT(p->has_pages, before->has_pages);
    CHECK_EQ_INT(p->has_config, before->has_config);
    CHECK_EQ_INT(p->has_target, before->has_target);
}

static void expect_invalid(amk_program *p, const amk_config *c, int num_sms, const char *needle) {
    amk_program *before = amk_program_clone(p);
    amk_target t = target_with(num_sms);
    amk_diag d;
    amk_result r = amk_program_lower(p, c, &t, &d);
    CHECK_MSG(r == AMK_ERR_INVALID_ARG, "expected INVALID_ARG, got %s", amk_result_str(r));
    CHECK_EQ_INT(d.result, AMK_ERR_INVALID_ARG);
    CHECK_MSG(strstr(d.message, needle) != NULL, "message '%s' lacks '%s'", d.message, needle);
    check_untouched(p, before);
    amk_program_free(before);
}

static void test_explicit_errors(void) {
    static const int64_t est[3] = {1, 1, 1};
    amk_program *p = nops(est, 3);
    amk_config c;
    int ids[3], sms[3];
    amk_config_default(&c);
    c.sm_assignment = AMK_SM_EXPLICIT;
    c.explicit_task = ids;
    c.explicit_sm = sms;
    ids[0] = 0; ids[1] = 1; ids[2] = 2;
    sms[0] = 1; sms[1] = 0; sms[2] = 1;
    c.n_explicit = 3;
    lower_ok(p, &c, 2);
    CHECK_EQ_INT(p->tasks[0].sm, 1);
    CHECK_EQ_INT(p->tasks[1].sm, 0);
    CHECK_EQ_INT(p->tasks[2].sm, 1);
    CHECK(p->config.explicit_task != ids && p->config.explicit_task[2] == 2); /* deep copy */
    p->tasks[0].sm = p->tasks[1].sm = p->tasks[2].sm = -1;
    ids[1] = 7; /* unknown task id */
    expect_invalid(p, &c, 2, "task id 7, which does not exist");
    ids[1] = 1;
    sms[2] = 2; /* SM out of range */
    expect_invalid(p, &c, 2, "SM 2, outside [0, 2)");
    sms[2] = -1;
    expect_invalid(p, &c, 2, "SM -1");
    sms[2] = 1;
    c.n_explicit = 2; /* task id 2 missing */
    expect_invalid(p, &c, 2, "missing task id 2");
    ids[1] = 0; /* task id 0 twice */
    expect_invalid(p, &c, 2, "task id 0 twice");
    c.n_explicit = 1;
    c.explicit_task = NULL;
    expect_invalid(p, &c, 2, "no arrays");
    amk_program_free(p);
}

/* Pins (amk_program_lower_pinned): random programs on 5 SMs, a random third of the tasks pinned;
   the pinned tasks land on their SMs, every other task where plain load balancing puts it, and
   the config records the whole assignment as explicit, so lowering the result again keeps it.
   Bad pins: an unknown task, a task twice, an SM outside the target, pins without arrays. */
static void test_pinned(void) {
    static const int64_t est[3] = {1, 1, 1};
    int seed;
    for (seed = 0; seed < 40; seed++) {
        randprog_opts o;
        randprog_rng rng;
        amk_program *p, *q;
        amk_config c;
        amk_target t;
        amk_diag d;
        int i, n, np = 0, *pt, *ps, *want;
        o.n_tasks = 12;
        o.kv = -1;
        o.onchip = 0;
        o.ops = RANDPROG_OPS_ALL;
        p = randprog_make((uint64_t)seed + 7100, &o);
        q = p ? amk_program_clone(p) : NULL;
        CHECK(p != NULL && q != NULL);
        if (!p || !q) { amk_program_free(p); amk_program_free(q); continue; }
        n = p->n_tasks;
        amk_config_default(&c);
        amk_target_builtin("h100", &t);
        t.num_sms = 5;
        CHECK_EQ_INT(amk_program_lower(q, &c, &t, &d), AMK_OK); /* the balancer's assignment */
        pt = (int *)malloc((size_t)n * sizeof(int));
        ps = (int *)malloc((size_t)n * sizeof(int));
        want = (int *)malloc((size_t)n * sizeof(int));
        rng.s = (uint64_t)seed + 1;
        for (i = 0; i < n; i++) {
            want[i] = q->tasks[i].sm;
            if (randprog_below(&rng, 3) == 0) {
                pt[np] = q->tasks[i].id;
                ps[np] = randprog_below(&rng, 5);
                want[i] = ps[np++];
            }
        }
        CHECK_EQ_INT(amk_program_lower_pinned(p, &c, &t, np, pt, ps, &d), AMK_OK);
        for (i = 0; i < n; i++) CHECK_EQ_INT(p->tasks[i].sm, want[amk_program_task_index(q, p->tasks[i].id)]);
        CHECK_EQ_INT(p->config.sm_assignment, AMK_SM_EXPLICIT);
        CHECK_EQ_INT(p->config.n_explicit, n);
        CHECK_EQ_INT(amk_program_lower(p, &p->config, &t, &d), AMK_OK); /* again: the same */
        for (i = 0; i < n; i++) CHECK_EQ_INT(p->tasks[i].sm, want[amk_program_task_index(q, p->tasks[i].id)]);
        free(pt);
        free(ps);
        free(want);
        amk_program_free(p);
        amk_program_free(q);
    }
    {
        amk_program *p = nops(est, 3);
        amk_config c;
        amk_target t;
        amk_diag d;
        int ids[2] = {0, 7}, sms[2] = {1, 0};
        amk_config_default(&c);
        amk_target_builtin("h100", &t);
        t.num_sms = 2;
        amk_diag_clear(&d);
        CHECK_EQ_INT(amk_program_lower_pinned(p, &c, &t, 2, ids, sms, &d), AMK_ERR_INVALID_ARG);
        CHECK(strstr(d.message, "task id 7, which does not exist") != NULL);
        ids[1] = 0;
        CHECK_EQ_INT(amk_program_lower_pinned(p, &c, &t, 2, ids, sms, &d), AMK_ERR_INVALID_ARG);
        CHECK(strstr(d.message, "task id 0 twice") != NULL);
        ids[1] = 1;
        sms[1] = 2;
        CHECK_EQ_INT(amk_program_lower_pinned(p, &c, &t, 2, ids, sms, &d), AMK_ERR_INVALID_ARG);
        CHECK(strstr(d.message, "SM 2, outside [0, 2)") != NULL);
        CHECK_EQ_INT(amk_program_lower_pinned(p, &c, &t, 1, NULL, sms, &d), AMK_ERR_INVALID_ARG);
        sms[1] = 0;
        CHECK_EQ_INT(amk_program_lower_pinned(p, &c, &t, 2, ids, sms, &d), AMK_OK);
        CHECK_EQ_INT(p->tasks[amk_program_task_index(p, 0)].sm, 1);
        CHECK_EQ_INT(p->tasks[amk_program_task_index(p, 1)].sm, 0);
        amk_program_free(p);
    }
}

static void test_bad_config(void) {
    static const int64_t est[2] = {1, 1};
    amk_program *p = nops(est, 2);
    amk_config c;
    amk_target t = target_with(4);
    amk_diag d;
    amk_config_default(&c);
    c.threads_per_block = 0;    expect_invalid(p, &c, 4, "threads_per_block");
    c.threads_per_block = 100;  expect_invalid(p, &c, 4, "threads_per_block");
    c.threads_per_block = 2048; expect_invalid(p, &c, 4, "threads_per_block");
    c.threads_per_block = 1024;
    c.pipelining_depth = -1;    expect_invalid(p, &c, 4, "pipelining_depth");
    c.pipelining_depth = 0;
    c.smem_bytes_per_block = -1; expect_invalid(p, &c, 4, "smem_bytes_per_block");
    c.smem_bytes_per_block = t.smem_bytes_per_block_optin + 1; expect_invalid(p, &c, 4, "smem_bytes_per_block");
    c.smem_bytes_per_block = t.smem_bytes_per_block_optin;
    c.sm_assignment = (amk_sm_assignment)7; expect_invalid(p, &c, 4, "sm_assignment");
    c.sm_assignment = AMK_SM_ROUND_ROBIN;
    c.page_allocation = (amk_page_allocation)-1; expect_invalid(p, &c, 4, "page_allocation");
    c.page_allocation = AMK_PAGES_LINEAR;
    expect_invalid(p, &c, 0, "num_sms");
    expect_invalid(p, &c, -3, "num_sms");
    CHECK_EQ_INT(amk_program_lower(NULL, &c, &t, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_program_lower(p, NULL, &t, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_program_lower(p, &c, NULL, NULL), AMK_ERR_INVALID_ARG);
    lower_ok(p, &c, 4); /* the edges themselves are fine */
    CHECK_EQ_INT(p->config.threads_per_block, 1024);
    CHECK_EQ_INT(p->config.smem_bytes_per_block, t.smem_bytes_per_block_optin);
    amk_program_free(p);
}

static void test_cycle_rejected(void) {
    amk_program *p = amk_program_create(), *before;
    amk_target t = target_with(2);
    amk_config c;
    amk_diag d;
    int c0 = amk_program_add_counter(p, ""), c1 = amk_program_add_counter(p, ""), c2, t0, t1, t2;
    c2 = amk_program_add_counter(p, "");
    t0 = amk_program_add_task(p, AMK_OP_NOP, NULL, 0, NULL, 0, c0, "first");
    t1 = amk_program_add_task(p, AMK_OP_NOP, NULL, 0, NULL, 0, c1, "loop a");
    t2 = amk_program_add_task(p, AMK_OP_NOP, NULL, 0, NULL, 0, c2, "loop b");
    amk_task_add_wait(p, t1, c2, 1);
    amk_task_add_wait(p, t2, c1, 1);
    amk_task_add_wait(p, t2, c0, 1);
    CHECK_EQ_INT(t0, 0);
    before = amk_program_clone(p);
    amk_config_default(&c);
    CHECK_EQ_INT(amk_program_lower(p, &c, &t, &d), AMK_ERR_REJECTED);
    CHECK_STR(d.check, "CYCLE");
    CHECK(d.task == 1 || d.task == 2);
    check_untouched(p, before);
    amk_program_free(before);
    amk_program_free(p);
}

/* Re-lowering with the program's own config and target (aliased arguments), then with none. */
static void test_relower_aliased(void) {
    randprog_opts o;
    amk_program *p, *once;
    amk_config c;
    amk_diag d;
    int k, b;
    o.n_tasks = 30; o.kv = 1; o.onchip = 1; o.ops = RANDPROG_OPS_ALL;
    p = randprog_make(77, &o);
    CHECK(p != NULL);
    if (!p) return;
    amk_config_default(&c);
    c.pipelining_depth = 5;
    lower_ok(p, &c, 7);
    once = amk_program_clone(p);
    CHECK_EQ_INT(amk_program_lower(p, &p->config, &p->target, &d), AMK_OK);
    CHECK_EQ_INT(p->config.pipelining_depth, 5);
    CHECK_EQ_INT(p->target.num_sms, 7);
    for (k = 0; k < p->n_tasks; k++) { /* lowering is idempotent */
        CHECK_EQ_INT(p->tasks[k].id, once->tasks[k].id);
        CHECK_EQ_INT(p->tasks[k].sm, once->tasks[k].sm);
    }
    CHECK_EQ_INT(p->n_pages, once->n_pages);
    for (b = 0; b < p->n_buffers; b++) CHECK_EQ_INT(p->buffer_page[b], once->buffer_page[b]);
    c.page_allocation = AMK_PAGES_NONE;
    lower_ok(p, &c, 7);
    CHECK(!p->has_pages && p->pages == NULL && p->buffer_page == NULL && p->n_pages == 0);
    amk_program_free(once);
    amk_program_free(p);
}

/* A stale schedule (SMs outside the old target, a broken page table, a bad old config) does not
   stop lowering: lowering replaces all of it. */
static void test_stale_schedule_ignored(void) {
    amk_program *p = chain_program(4);
    amk_config c;
    int k;
    amk_config_default(&c);
    lower_ok(p, &c, 3);
    p->target.num_sms = 1;           /* SM_RANGE for the tasks on SMs 1 and 2 */
    p->tasks[0].sm = 5;
    p->buffer_page[1] = 42;          /* PAGE_REF */
    p->config.threads_per_block = 7; /* CONFIG_VALUE */
    c.page_allocation = AMK_PAGES_LINEAR;
    lower_ok(p, &c, 2);
    for (k = 0; k < p->n_tasks; k++) CHECK(p->tasks[k].sm >= 0 && p->tasks[k].sm < 2);
    CHECK_EQ_INT(p->n_pages, 4);
    CHECK_EQ_INT(p->buffer_page[1], 0);
    CHECK_EQ_INT(p->config.threads_per_block, 256);
    amk_program_free(p);
}

/* A program the validator rejects for a reason of its own is not lowered; d names the check. */
static void test_invalid_program_rejected(void) {
    amk_program *p = chain_program(3), *before;
    amk_config c;
    amk_target t = target_with(2);
    amk_diag d;
    p->tasks[2].inputs[0] = 99; /* REF_BUFFER */
    before = amk_program_clone(p);
    amk_config_default(&c);
    CHECK_EQ_INT(amk_program_lower(p, &c, &t, &d), AMK_ERR_REJECTED);
    CHECK_STR(d.check, "REF_BUFFER");
    CHECK_EQ_INT(d.task, 2);
    check_untouched(p, before);
    amk_program_free(before);
    amk_program_free(p);
}

/* Random corruptions of valid programs: lowering never crashes (the sanitizers watch), and when
   it says AMK_OK the result validates; otherwise d says why. */
static void test_hostile_programs(void) {
    int seed;
    for (seed = 0; seed < 400; seed++) {
        randprog_opts o;
        randprog_rng rng;
        amk_program *p;
        amk_config c;
        amk_target t;
        amk_diag d;
        amk_result r;
        int k, n_mut;
        o.n_tasks = 6 + seed % 20;
        o.kv = -1;
        o.onchip = seed % 2;
        o.ops = RANDPROG_OPS_ALL;
        p = randprog_make((uint64_t)seed + 20000, &o);
        CHECK(p != NULL);
        if (!p) continue;
        rng.s = (uint64_t)seed * 77;
        n_mut = 1 + randprog_below(&rng, 3);
        for (k = 0; k < n_mut; k++) {
            amk_task *tk = &p->tasks[randprog_below(&rng, p->n_tasks)];
            int v = randprog_below(&rng, 7) - 3; /* -3..3 */
            switch (randprog_below(&rng, 9)) {
            case 0: if (tk->n_inputs) tk->inputs[0] = v < 0 ? v : p->n_buffers + v; break;
            case 1: tk->out_counter = v < 0 ? v : p->n_counters + v; break;
            case 2: if (tk->n_waits) tk->waits[0].counter = randprog_below(&rng, p->n_counters + 2) - 1; break;
            case 3: if (tk->n_waits) tk->waits[0].threshold = v; break;
            case 4: tk->est_bytes = v < 0 ? INT64_MIN : INT64_MAX; break;
            case 5: tk->id = p->tasks[0].id; break;
            case 6: p->buffers[randprog_below(&rng, p->n_buffers)].shape[0] = v < 0 ? -1 : INT64_MAX / 2; break;
            case 7: tk->out_counter = p->n_counters ? randprog_below(&rng, p->n_counters) : 0; break;
            default: tk->sm = v * 1000; break;
            }
        }
        amk_config_default(&c);
        c.sm_assignment = (amk_sm_assignment)randprog_below(&rng, 2);
        c.page_allocation = (amk_page_allocation)randprog_below(&rng, 3);
        t = target_with(1 + randprog_below(&rng, 9));
        r = amk_program_lower(p, &c, &t, &d);
        if (r == AMK_OK) CHECK_EQ_INT(amk_program_validate(p, NULL), AMK_OK);
        else CHECK_MSG(d.result == r && d.message[0] != 0, "seed %d: %s without a message", seed, amk_result_str(r));
        amk_program_free(p);
    }
}

/* A program with a few thousand tasks lowers quickly in every page mode. */
static void test_scale(void) {
    randprog_opts o;
    amk_program *p, *q;
    amk_config c;
    int k, max_sm = 0;
    o.n_tasks = 6000; o.kv = 1; o.onchip = 0; o.ops = RANDPROG_OPS_ALL;
    p = randprog_make(4242, &o);
    CHECK(p != NULL);
    if (!p) return;
    CHECK(p->n_tasks >= 5000);
    q = amk_program_clone(p);
    amk_config_default(&c);
    lower_ok(p, &c, 132);
    for (k = 0; k < p->n_tasks; k++)
        if (p->tasks[k].sm > max_sm) max_sm = p->tasks[k].sm;
    CHECK_EQ_INT(max_sm, 131);
    c.page_allocation = AMK_PAGES_LINEAR;
    c.sm_assignment = AMK_SM_ROUND_ROBIN;
    lower_ok(q, &c, 132);
    printf("scale: %d tasks, %d buffers: graph_color %d pages, linear %d\n", p->n_tasks, p->n_buffers, p->n_pages, q->n_pages);
    CHECK_MSG(p->n_pages < q->n_pages, "graph_color %d pages vs linear %d", p->n_pages, q->n_pages);
    amk_program_free(p);
    amk_program_free(q);
}

int main(void) {
    RUN(test_randprog_validates);
    RUN(test_random_all_modes);
    RUN(test_random_shuffled_order);
    RUN(test_random_explicit);
    RUN(test_chain_reuses_two_pages);
    RUN(test_unordered_branches_never_share);
    RUN(test_pages_space_and_size);
    RUN(test_load_balance_exact);
    RUN(test_load_balance_op_affinity);
    RUN(test_load_balance_affinity_bound);
    RUN(test_many_sms);
    RUN(test_explicit_errors);
    RUN(test_pinned);
    RUN(test_bad_config);
    RUN(test_cycle_rejected);
    RUN(test_relower_aliased);
    RUN(test_stale_schedule_ignored);
    RUN(test_invalid_program_rejected);
    RUN(test_hostile_programs);
    RUN(test_scale);
    TEST_SUMMARY();
}

/* Random valid programs run identically under many adversarial orders. Each randprog program is
   lowered (load_balance, graph_color pages, 8 SMs) and run on the reference VM in list order and
   in 20 seeded random orders of ready tasks: every IO_OUTPUT and KV_CACHE buffer must come out
   bitwise identical, the static counter simulation must fire every task, and the adversarial
   simulation must find no violation. Pages are shared memory in the VM, so a page allocation
   that let two live buffers alias would show up here as a difference between orders. */
#include "../amk.h"
#include "amk_test.h"
#include "randprog.h"

#define DAG_SEEDS 36
#define DAG_ORDERS 20

/* The bytes of every IO_OUTPUT and KV_CACHE buffer, concatenated. */
static unsigned char *snapshot(amk_refvm *vm, const amk_program *p, size_t *len) {
    size_t total = 0, off = 0, nb;
    unsigned char *s;
    int b;
    for (b = 0; b < p->n_buffers; b++)
        if (p->buffers[b].kind == AMK_KIND_IO_OUTPUT || p->buffers[b].kind == AMK_KIND_KV_CACHE) {
            nb = 0;
            amk_refvm_buffer(vm, b, &nb);
            total += nb;
        }
    s = (unsigned char *)malloc(total + 1);
    for (b = 0; s && b < p->n_buffers; b++)
        if (p->buffers[b].kind == AMK_KIND_IO_OUTPUT || p->buffers[b].kind == AMK_KIND_KV_CACHE) {
            const void *data = amk_refvm_buffer(vm, b, &nb);
            if (data && nb) memcpy(s + off, data, nb);
            off += nb;
        }
    *len = total;
    return s;
}

/* Lowers p; 0 (after failing a check) if lowering did not succeed. */
static int lower(amk_program *p, amk_page_allocation pages, int num_sms, int seed) {
    amk_config c;
    amk_target t;
    amk_diag d;
    amk_result r;
    amk_config_default(&c);
    c.page_allocation = pages;
    amk_target_builtin("h100", &t);
    t.num_sms = num_sms;
    r = amk_program_lower(p, &c, &t, &d);
    CHECK_MSG(r == AMK_OK, "seed %d: lower: %s [%s] %s", seed, amk_result_str(r), d.check, d.message);
    return r == AMK_OK;
}

/* Runs p with run seed run_seed on a fresh VM filled from seed; the snapshot of its outputs, or
   NULL after failing a check. */
static unsigned char *run_once(const amk_program *p, int seed, uint64_t run_seed, size_t *len,
                               amk_refvm **keep) {
    amk_refvm *vm = NULL;
    amk_refvm_opts o;
    amk_diag d;
    amk_result r = amk_refvm_create(p, &vm, &d);
    unsigned char *s;
    CHECK_MSG(r == AMK_OK, "seed %d: refvm_create: %s [%s] %s", seed, amk_result_str(r), d.check, d.message);
    if (r != AMK_OK) return NULL;
    CHECK(randprog_fill(vm, p, (uint64_t)seed));
    o.seed = run_seed;
    r = amk_refvm_run(vm, &o, &d);
    CHECK_MSG(r == AMK_OK, "seed %d: run: %s %s", seed, amk_result_str(r), d.message);
    s = snapshot(vm, p, len);
    if (keep) *keep = vm;
    else amk_refvm_free(vm);
    return s;
}

static void test_random_dags_order_independent(void) {
    int seed, i, n_checked = 0, n_tasks = 0, n_kv = 0, n_pages = 0;
    for (seed = 0; seed < DAG_SEEDS; seed++) {
        randprog_opts o;
        amk_program *p;
        amk_refvm *vm = NULL;
        unsigned char *base;
        size_t base_len = 0;
        o.n_tasks = 12 + seed % 24;
        o.kv = -1;
        o.onchip = seed % 3 == 2;
        p = randprog_make((uint64_t)seed + 300, &o);
        CHECK(p != NULL);
        if (!p) continue;
        if (!lower(p, AMK_PAGES_GRAPH_COLOR, 8, seed)) { amk_program_free(p); continue; }
        {
            int n_fired = -1, n_stuck = -1, adv;
            amk_diag d;
            amk_result r = amk_program_simulate(p, NULL, &n_fired, NULL, &n_stuck);
            adv = amk_program_simulate_adversarial(p, (uint64_t)seed, 16, &d);
            CHECK_MSG(r == AMK_OK && n_fired == p->n_tasks && n_stuck == 0,
                      "seed %d: simulate %s, %d fired, %d stuck", seed, amk_result_str(r), n_fired, n_stuck);
            CHECK_MSG(adv == 0, "seed %d: %d adversarial violations: %s", seed, adv, d.message);
        }
        base = run_once(p, seed, 0, &base_len, &vm);
        if (!base) { amk_program_free(p); continue; }
        for (i = 1; i <= DAG_ORDERS; i++) { /* the same VM, again: KV appends rewrite the same rows */
            amk_refvm_opts ro;
            amk_diag d;
            amk_result r;
            unsigned char *again;
            size_t len = 0;
            ro.seed = (uint64_t)seed * 1000 + (uint64_t)i;
            r = amk_refvm_run(vm, &ro, &d);
            CHECK_MSG(r == AMK_OK, "seed %d order %d: %s %s", seed, i, amk_result_str(r), d.message);
            again = snapshot(vm, p, &len);
            CHECK_MSG(again && len == base_len && memcmp(again, base, len) == 0,
                      "seed %d: outputs differ under run seed %d", seed, (int)ro.seed);
            free(again);
        }
        n_checked++;
        n_tasks += p->n_tasks;
        n_pages += p->n_pages;
        for (i = 0; i < p->n_buffers; i++) n_kv += p->buffers[i].kind == AMK_KIND_KV_CACHE;
        free(base);
        amk_refvm_free(vm);
        amk_program_free(p);
    }
    CHECK_EQ_INT(n_checked, DAG_SEEDS);
    printf("order independence: %d programs, %d tasks, %d KV caches, %d pages, %d orders each\n",
           n_checked, n_tasks, n_kv, n_pages, DAG_ORDERS + 1);
}

/* The schedule does not change the numbers: the same program lowered with each page mode and SM
   count gives the same bytes as graph_color on 8 SMs. */
static void test_schedule_does_not_change_results(void) {
    static const amk_page_allocation pages[3] = {AMK_PAGES_GRAPH_COLOR, AMK_PAGES_LINEAR, AMK_PAGES_NONE};
    static const int sms[3] = {8, 1, 132};
    int seed, m;
    for (seed = 0; seed < 10; seed++) {
        randprog_opts o;
        unsigned char *base = NULL;
        size_t base_len = 0;
        o.n_tasks = 20;
        o.kv = 1;
        o.onchip = seed % 2;
        for (m = 0; m < 3; m++) {
            amk_program *p = randprog_make((uint64_t)seed + 700, &o);
            unsigned char *s;
            size_t len = 0;
            CHECK(p != NULL);
            if (!p) break;
            if (lower(p, pages[m], sms[m], seed) &&
                (s = run_once(p, seed, (uint64_t)seed + 1, &len, NULL)) != NULL) {
                if (!base) { base = s; base_len = len; }
                else {
                    CHECK_MSG(len == base_len && memcmp(s, base, len) == 0, "seed %d: page mode %d differs", seed, m);
                    free(s);
                }
            }
            amk_program_free(p);
        }
        free(base);
    }
}

int main(void) {
    RUN(test_random_dags_order_independent);
    RUN(test_schedule_does_not_change_results);
    TEST_SUMMARY();
}

/* libFuzzer harness for the program JSON format (spec §6): load; if it loads, the canonical
   writer must accept it and be byte-stable (write(read(write(p))) == write(p)); then validate,
   and run a small accepted program once on the reference VM. Any abort() is a finding.
   Seeds: fuzz/seeds-fuzz_program (the golden files of tests/data/json/golden). */
#define AMK_IMPLEMENTATION
#include "../amk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* why: keeps one reference-VM run well under a millisecond so the fuzzer stays fast */
#define FUZZ_MAX_TASKS 64
#define FUZZ_MAX_BYTES ((int64_t)1 << 20)

static int small_enough(const amk_program *p) {
    int64_t total = 0;
    int i;
    if (p->n_tasks >= FUZZ_MAX_TASKS) return 0;
    for (i = 0; i < p->n_buffers; i++) {
        int64_t nb = amk__buffer_nbytes(&p->buffers[i]);
        if (nb < 0 || !amk__add_i64(total, nb, &total) || total >= FUZZ_MAX_BYTES) return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    amk_program *p = NULL, *q = NULL;
    char *w1 = NULL, *w2 = NULL;
    size_t n1 = 0, n2 = 0;
    amk_diag d;
    amk_report report;
    if (amk_program_load_json((const char *)data, size, &p, &d) != AMK_OK) {
        if (p || d.result == AMK_OK || !d.message[0]) abort(); /* a failure always explains itself */
        return 0;
    }
    /* everything the loader accepts, the writer must write, and the result must be canonical */
    if (amk_program_write_json(p, &w1, &n1) != AMK_OK) abort();
    if (amk_program_load_json(w1, n1, &q, &d) != AMK_OK) abort();
    if (amk_program_write_json(q, &w2, &n2) != AMK_OK) abort();
    if (n1 != n2 || memcmp(w1, w2, n1) != 0) abort();
    if (amk_program_validate(p, &report) == AMK_OK && small_enough(p)) {
        amk_refvm *vm = NULL;
        if (amk_refvm_create(p, &vm, &d) == AMK_OK) {
            amk_refvm_run(vm, NULL, &d);
            amk_refvm_free(vm);
        }
    }
    amk_report_free(&report);
    amk_free(w1);
    amk_free(w2);
    amk_program_free(q);
    amk_program_free(p);
    return 0;
}

/* The CUDA runtime's host side without a GPU (part of `make test`): a machine without the
   driver gets AMK_ERR_NO_DRIVER with a clear message, never a crash; bad programs and arguments
   are refused before the driver is touched. AMK_CUDA_LIBRARY forces "no driver" even on a GPU
   machine, so every assertion here holds everywhere. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#define AMK_STATIC         /* why: the runtime's internal prefetch ranges (amk__cuda_prefetches) are tested too */
#define AMK_IMPLEMENTATION
#if defined(__GNUC__)
/* why: AMK_STATIC turns every API function this file does not call into an unused static */
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "../../amk.h"
#include "../amk_test.h"

static const unsigned char fake_image[] = "// not a real image: the driver is never reached\n";

/* The form planner (amk_plan.h) on task ti's context before placement: the shared memory it
   wants, its lean form's and its ring form's least (0: the form does not take it), its form. */
static int64_t plan_want(const amk_program *p, int ti, int threads) {
    amk_vm_ctx_t x;
    amk_task_context(p, ti, &x);
    return amk_plan_want(&x, threads);
}
static int64_t plan_lean(const amk_program *p, int ti, int threads) {
    amk_vm_ctx_t x;
    amk_task_context(p, ti, &x);
    return amk_plan_lean_bytes(&x, threads);
}
static int64_t plan_ring(const amk_program *p, int ti, int threads) {
    amk_vm_ctx_t x;
    amk_task_context(p, ti, &x);
    return amk_plan_ring_least(&x, threads);
}
static unsigned plan_form(const amk_program *p, int ti, int threads, int64_t smem) {
    amk_vm_ctx_t x;
    amk_task_context(p, ti, &x);
    return amk_plan_form(&x, threads, smem, AMK_PLAN_FORMS_LEAN);
}

/* x[16] F32 -> COPY -> y[16] F32 on SM sm of a 2-SM target. */
static amk_program *small_program(int sm) {
    amk_program *p = amk_program_create();
    amk_target t;
    int64_t shape[1] = {16};
    int x, y, c, task;
    amk_target_builtin("h100", &t);
    t.num_sms = 2;
    amk_program_set_target(p, &t);
    x = amk_program_add_buffer(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 1, shape, AMK_SPACE_HBM, NULL);
    y = amk_program_add_buffer(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 1, shape, AMK_SPACE_HBM, NULL);
    c = amk_program_add_counter(p, "copied");
    task = amk_program_add_task(p, AMK_OP_COPY, &x, 1, &y, 1, c, "copy");
    p->tasks[task].sm = sm;
    return p;
}

static void test_no_driver(void) {
    amk_program *p = small_program(1);
    amk_cuda *c = (amk_cuda *)(uintptr_t)1;
    amk_diag d;
    amk_diag_clear(&d);
    setenv("AMK_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    CHECK_EQ_INT(amk_cuda_create(p, fake_image, sizeof fake_image, &c, &d), AMK_ERR_NO_DRIVER);
    CHECK(c == NULL);
    CHECK_EQ_INT(d.result, AMK_ERR_NO_DRIVER);
    CHECK_MSG(strstr(d.message, "no CUDA driver") != NULL, "message: %s", d.message);
    CHECK_MSG(strstr(d.message, "/nonexistent/libcuda.so.1") != NULL, "message: %s", d.message);
    { /* the device query, and the image pick that rests on it, without a driver */
        int major = 1, minor = 1, sms = 1;
        const char *old = getenv("AMK_CUDA_IMAGE");
        char *saved = old ? strdup(old) : NULL;
        amk_diag_clear(&d);
        CHECK_EQ_INT(amk_cuda_device_query(&major, &minor, &sms, &d), AMK_ERR_NO_DRIVER);
        CHECK(major == 0 && minor == 0 && sms == 0 && strstr(d.message, "no CUDA driver") != NULL);
        CHECK_EQ_INT(amk_cuda_device_query(NULL, &minor, &sms, &d), AMK_ERR_INVALID_ARG);
        unsetenv("AMK_CUDA_IMAGE");
        CHECK_EQ_INT(amk_cuda_picks_portable(), -1);
        if (saved) setenv("AMK_CUDA_IMAGE", saved, 1);
        free(saved);
    }
    amk_program_free(p);
}

/* amk_llm says why it runs where it does: AUTO with a device image but no driver falls back to the
   reference VM and names the driver's error; without an image it says so; --cpu is asked for. */
static void test_llm_backend_reason(void) {
    static const amk_backend backends[3] = {AMK_BACKEND_AUTO, AMK_BACKEND_AUTO, AMK_BACKEND_CPU};
    static const char *const want[3] = {"no usable GPU: no CUDA driver", "no device image in this program",
                                        "the reference VM asked for"};
    int k;
    setenv("AMK_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    for (k = 0; k < 3; k++) {
        amk_llm_opts o;
        amk_llm *m = NULL;
        amk_diag d;
        amk_diag_clear(&d);
        amk_llm_opts_default(&o);
        o.backend = backends[k];
        o.build.max_seq = 8;
        if (k == 0) {
            o.device_image = fake_image;
            o.device_image_size = sizeof fake_image;
        }
        CHECK_EQ_INT(amk_llm_open("tests/data/families/llama", &o, &m, &d), AMK_OK);
        if (!m) continue;
        CHECK(strcmp(amk_llm_backend_name(m), "cpu") == 0);
        CHECK_MSG(strstr(amk_llm_backend_reason(m), want[k]) != NULL, "reason: %s", amk_llm_backend_reason(m));
        amk_llm_close(m);
    }
    CHECK(strcmp(amk_llm_backend_reason(NULL), "") == 0);
}

static void test_library_without_cuda_symbols(void) {
    amk_program *p = small_program(0);
    amk_cuda *c = NULL;
    amk_diag d;
    amk_diag_clear(&d);
    setenv("AMK_CUDA_LIBRARY", "libm.so.6", 1); /* a real library, but not a CUDA driver */
    CHECK_EQ_INT(amk_cuda_create(p, fake_image, sizeof fake_image, &c, &d), AMK_ERR_NO_DRIVER);
    CHECK(c == NULL);
    CHECK_MSG(strstr(d.message, "cuInit") != NULL, "message: %s", d.message);
    amk_program_free(p);
}

static void test_unlowered_program_refused_first(void) {
    amk_program *p = small_program(-1); /* no SM: not lowered */
    amk_cuda *c = NULL;
    amk_diag d;
    amk_diag_clear(&d);
    setenv("AMK_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    CHECK_EQ_INT(amk_cuda_create(p, fake_image, sizeof fake_image, &c, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(d.task, 0);
    CHECK_MSG(strstr(d.message, "lower") != NULL, "message: %s", d.message);
    p->tasks[0].sm = 2; /* outside the target's 2 SMs: validate refuses it */
    CHECK_EQ_INT(amk_cuda_create(p, fake_image, sizeof fake_image, &c, &d), AMK_ERR_REJECTED);
    CHECK_STR(d.check, "SM_RANGE");
    amk_program_free(p);
}

static void test_bad_references_refused(void) {
    amk_program *p = small_program(0);
    amk_cuda *c = NULL;
    amk_diag d;
    amk_diag_clear(&d);
    setenv("AMK_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    p->tasks[0].out_counter = 7; /* no such counter */
    CHECK_EQ_INT(amk_cuda_create(p, fake_image, sizeof fake_image, &c, &d), AMK_ERR_REJECTED);
    CHECK(c == NULL);
    p->tasks[0].out_counter = 0;
    p->tasks[0].inputs[0] = 9; /* no such buffer */
    CHECK_EQ_INT(amk_cuda_create(p, fake_image, sizeof fake_image, &c, &d), AMK_ERR_REJECTED);
    p->tasks[0].inputs[0] = 0;
    amk_task_add_wait(p, 0, 0, 0); /* threshold 0 can never be a real wait */
    CHECK_EQ_INT(amk_cuda_create(p, fake_image, sizeof fake_image, &c, &d), AMK_ERR_REJECTED);
    amk_program_free(p);
}

/* Forms the reference VM runs and the device does not are refused before the driver: a batch of
   KV caches (rank 4, B > 1), attention partials not in F32. */
static void test_reference_only_forms_refused(void) {
    amk_program *p = amk_program_create();
    amk_target t;
    amk_cuda *c = NULL;
    amk_diag d;
    int64_t s_new[2] = {2, 4}, s_cache[4] = {2, 8, 1, 4}, s_q[2] = {2, 4}, s_part[2] = {2, 6};
    int kn, kc, q, part, ins[3], ctr, task;
    amk_target_builtin("h100", &t);
    amk_program_set_target(p, &t);
    kn = amk_program_add_buffer(p, "k_new", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, s_new, AMK_SPACE_HBM, NULL);
    kc = amk_program_add_buffer(p, "k_cache", AMK_KIND_KV_CACHE, AMK_DTYPE_F32, 4, s_cache, AMK_SPACE_HBM, NULL);
    ctr = amk_program_add_counter(p, "");
    ins[0] = kn; ins[1] = kc;
    task = amk_program_add_task(p, AMK_OP_KV_APPEND, ins, 2, &kc, 1, ctr, "append");
    amk_task_set_int(p, task, "pos", 3);
    p->tasks[task].sm = 0;
    amk_diag_clear(&d);
    setenv("AMK_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    CHECK_EQ_INT(amk_program_validate(p, NULL), AMK_OK);
    CHECK_EQ_INT(amk_cuda_create(p, fake_image, sizeof fake_image, &c, &d), AMK_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(d.message, "batch") != NULL, "message: %s", d.message);
    amk_program_free(p);

    p = amk_program_create(); /* one cache, F16 partials */
    amk_program_set_target(p, &t);
    s_cache[0] = 8; s_cache[1] = 1; s_cache[2] = 4;
    q = amk_program_add_buffer(p, "q", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, s_q, AMK_SPACE_HBM, NULL);
    kc = amk_program_add_buffer(p, "k_cache", AMK_KIND_KV_CACHE, AMK_DTYPE_F32, 3, s_cache, AMK_SPACE_HBM, NULL);
    part = amk_program_add_buffer(p, "part", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F16, 2, s_part, AMK_SPACE_HBM, NULL);
    ins[0] = q; ins[1] = kc; ins[2] = kc;
    task = amk_program_add_task(p, AMK_OP_ATTENTION_TILE, ins, 3, &part, 1, amk_program_add_counter(p, ""), "attn");
    amk_t_attn(p, task, 4, 2, 1, 0, 8, 0.5);
    amk_task_set_int(p, task, "flags", 2);
    p->tasks[task].sm = 0;
    CHECK_EQ_INT(amk_program_validate(p, NULL), AMK_OK); /* with an OP_LENIENT warning */
    CHECK_EQ_INT(amk_cuda_create(p, fake_image, sizeof fake_image, &c, &d), AMK_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(d.message, "F16") != NULL, "message: %s", d.message);
    p->buffers[part].dtype = AMK_DTYPE_F32; /* the device's: on to the driver, which is absent */
    CHECK_EQ_INT(amk_cuda_create(p, fake_image, sizeof fake_image, &c, &d), AMK_ERR_NO_DRIVER);
    amk_program_free(p);

    p = amk_program_create(); /* a GEMV tile over a Q4_K weight: the device takes it (on to the absent driver) */
    amk_program_set_target(p, &t);
    s_q[0] = 1; s_q[1] = 256;
    q = amk_program_add_buffer(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, s_q, AMK_SPACE_HBM, NULL);
    s_new[0] = 4; s_new[1] = 256;
    kn = amk_program_add_buffer(p, "w", AMK_KIND_WEIGHT, AMK_DTYPE_Q4_K, 2, s_new, AMK_SPACE_HBM, "w");
    s_part[0] = 1; s_part[1] = 4;
    part = amk_program_add_buffer(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, s_part, AMK_SPACE_HBM, NULL);
    ins[0] = q; ins[1] = kn;
    task = amk_program_add_task(p, AMK_OP_GEMV_TILE, ins, 2, &part, 1, amk_program_add_counter(p, ""), "gemv");
    amk_task_set_int(p, task, "K", 256); amk_task_set_int(p, task, "N_tile", 4); amk_task_set_int(p, task, "n_off", 0);
    p->tasks[task].sm = 0;
    CHECK_EQ_INT(amk_program_validate(p, NULL), AMK_OK);
    CHECK_EQ_INT(amk_cuda_create(p, fake_image, sizeof fake_image, &c, &d), AMK_ERR_NO_DRIVER);
    amk_program_free(p);

    { /* an MLP tile whose W_down [H, N] is in a block format: the device's when K is a multiple of
         32 and N_tile at most K, else the reference VM's (K 8, then N_tile 64 against K 32) */
        int64_t sx[2] = {1, 8}, sn[1] = {8}, sg[2] = {64, 8}, sd[2] = {8, 64}, so[2] = {1, 8};
        int b[6], k;
        for (k = 0; k < 3; k++) {
            const int K = k == 0 ? 8 : 32, nt = k == 1 ? 64 : 32;
            sx[1] = sn[0] = sg[1] = sd[0] = so[1] = K;
            p = amk_program_create();
            amk_program_set_target(p, &t);
            b[0] = amk_program_add_buffer(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, sx, AMK_SPACE_HBM, NULL);
            b[1] = amk_program_add_buffer(p, "norm", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 1, sn, AMK_SPACE_HBM, "norm");
            b[2] = amk_program_add_buffer(p, "gate", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 2, sg, AMK_SPACE_HBM, "gate");
            b[3] = amk_program_add_buffer(p, "up", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 2, sg, AMK_SPACE_HBM, "up");
            b[4] = amk_program_add_buffer(p, "down", AMK_KIND_WEIGHT, AMK_DTYPE_Q8_0, 2, sd, AMK_SPACE_HBM, "down");
            b[5] = amk_program_add_buffer(p, "out", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, so, AMK_SPACE_HBM, NULL);
            ctr = amk_program_add_counter(p, "");
            task = amk_program_add_task(p, AMK_OP_FILL, NULL, 0, &b[5], 1, ctr, "fill"); /* the sum's start */
            p->tasks[task].sm = 0;
            task = amk_program_add_task(p, AMK_OP_RMSNORM_MLP, b, 5, &b[5], 1, amk_program_add_counter(p, ""), "mlp");
            amk_task_set_real(p, task, "eps", 1e-5); amk_task_set_int(p, task, "K", K);
            amk_task_set_int(p, task, "N_tile", nt); amk_task_set_int(p, task, "n_off", 0);
            amk_task_add_wait(p, task, ctr, 1);
            p->tasks[task].sm = 0;
            CHECK_EQ_INT(amk_program_validate(p, NULL), AMK_OK);
            CHECK_EQ_INT(amk_cuda_create(p, fake_image, sizeof fake_image, &c, &d), k < 2 ? AMK_ERR_UNSUPPORTED : AMK_ERR_NO_DRIVER);
            if (k < 2) CHECK_MSG(strstr(d.message, "W_down") != NULL && strstr(d.message, "Q8_0") != NULL, "message: %s", d.message);
            amk_program_free(p);
        }
    }
}

static void test_null_arguments(void) {
    amk_program *p = small_program(0);
    amk_cuda *c = NULL;
    amk_cuda_info info;
    amk_cuda_timing_record rec;
    int n = 5;
    amk_diag d;
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_cuda_create(NULL, fake_image, sizeof fake_image, &c, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_create(p, NULL, 0, &c, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_create(p, fake_image, 0, &c, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_create(p, fake_image, sizeof fake_image, NULL, &d), AMK_ERR_INVALID_ARG);
    { /* a share map without a runtime to share with: refused before the driver */
        int share[16], b;
        for (b = 0; b < p->n_buffers && b < 16; b++) share[b] = b ? -1 : 0;
        CHECK_EQ_INT(amk_cuda_create_shared(p, fake_image, sizeof fake_image, NULL, share, &c, &d), AMK_ERR_INVALID_ARG);
        CHECK_MSG(strstr(d.message, "no runtime to share with") != NULL, "message: %s", d.message);
        CHECK(c == NULL);
    }
    CHECK_EQ_INT(amk_cuda_run(NULL, 100.0, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_run_io(NULL, NULL, 0, NULL, 0, 100.0, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_upload(NULL, 0, &n, 4, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_download(NULL, 0, &n, 4, NULL), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_update_params(NULL, p, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_update_task_params(NULL, p, NULL, 0, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_timing(NULL, &rec, 1, &n, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(n, 0);
    amk_cuda_get_info(NULL, &info);
    CHECK_EQ_INT(info.grid, 0);
    amk_cuda_set_timing(NULL, 1);
    amk_cuda_free(NULL);
    amk_program_free(p);
}

static void test_service_null_arguments(void) {
    double g = -1.0, cg = -1.0, med = -1.0, times[2];
    amk_diag d;
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk_cuda_read_bandwidth(NULL, 1u << 20, 5, &g, &cg, &d), AMK_ERR_INVALID_ARG);
    CHECK(g == 0.0 && cg == 0.0); /* outputs cleared even on failure */
    g = -1.0;
    CHECK_EQ_INT(amk_cuda_tensor_peak(NULL, 5, &g, &d), AMK_ERR_INVALID_ARG);
    CHECK(g == 0.0);
    CHECK_EQ_INT(amk_cuda_fill_random(NULL, 0, 1, 0.5f, &d), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_fill_value(NULL, 0, 1.0f, NULL), AMK_ERR_INVALID_ARG);
    CHECK_EQ_INT(amk_cuda_time_runs(NULL, 1, 2, &med, times, &d), AMK_ERR_INVALID_ARG);
    CHECK(med == 0.0);
    CHECK_MSG(strstr(d.message, "time_runs") != NULL, "message: %s", d.message);
}

/* The status words and timing records are one layout for host and device (amk_ir.h). */
static void test_vm_layouts(void) {
    CHECK_EQ_INT(sizeof(amk_vm_timing_t), 40);
    CHECK_EQ_INT(offsetof(amk_vm_timing_t, t_end), 16);
    CHECK_EQ_INT(offsetof(amk_vm_timing_t, block), 24);
    CHECK_EQ_INT(offsetof(amk_vm_timing_t, done), 36);
    CHECK_EQ_INT(AMK_VM_STATUS_PROGRESS, 4);
    CHECK(AMK_VM_STATUS_ABORT < AMK_VM_STATUS_PROGRESS && AMK_VM_STATUS_ERR_VALUE < AMK_VM_STATUS_PROGRESS);
}

/* The dynamic shared memory a launch asks for is what its tasks would like (the rest of the
   SM's 256 KB stays L1: amk_plan_want), never less than amk__cuda_check_task requires. */
static void test_smem_want(void) {
    amk_program *p = amk_program_create();
    const int threads = 512;
    int x = -1, W, y, xm, ym, q, qb, kc, vc, pos, o, c, t, t2, ins[4];
    int64_t s2[2], s3[3];
    s2[0] = 1; s2[1] = 2048;
    x = amk_program_add_buffer(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, s2, AMK_SPACE_HBM, NULL);
    s2[0] = 256;
    W = amk_program_add_buffer(p, "W", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, s2, AMK_SPACE_HBM, NULL);
    s2[0] = 1; s2[1] = 256;
    y = amk_program_add_buffer(p, "y", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, s2, AMK_SPACE_HBM, NULL);
    s2[0] = 64; s2[1] = 2048;
    xm = amk_program_add_buffer(p, "xm", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, s2, AMK_SPACE_HBM, NULL);
    s2[1] = 256;
    ym = amk_program_add_buffer(p, "ym", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, s2, AMK_SPACE_HBM, NULL);
    s2[0] = 1; s2[1] = 32 * 64;
    q = amk_program_add_buffer(p, "q", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, s2, AMK_SPACE_HBM, NULL);
    qb = amk_program_add_buffer(p, "qb", AMK_KIND_ACTIVATION, AMK_DTYPE_BF16, 2, s2, AMK_SPACE_HBM, NULL);
    o = amk_program_add_buffer(p, "o", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 2, s2, AMK_SPACE_HBM, NULL);
    s3[0] = 4096; s3[1] = 8; s3[2] = 64;
    kc = amk_program_add_buffer(p, "k", AMK_KIND_KV_CACHE, AMK_DTYPE_BF16, 3, s3, AMK_SPACE_HBM, NULL);
    vc = amk_program_add_buffer(p, "v", AMK_KIND_KV_CACHE, AMK_DTYPE_BF16, 3, s3, AMK_SPACE_HBM, NULL);
    s2[0] = 1; s2[1] = 1;
    pos = amk_program_add_buffer(p, "pos", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, s2, AMK_SPACE_HBM, NULL);
    c = amk_program_add_counter(p, "");
    CHECK(x >= 0 && pos >= 0 && c >= 0);

    /* a GEMV tile: one staged row of K floats */
    ins[0] = x; ins[1] = W;
    t = amk_program_add_task(p, AMK_OP_GEMV_TILE, ins, 2, &y, 1, c, "gemv");
    amk_task_set_int(p, t, "K", 2048);
    CHECK_EQ_INT(plan_want(p, t, threads), 4 * 2048);
    /* 64 rows: the tensor-core ring, 4 stages of f32 x (64 x 64 x 4) + 4 W tiles (64 x 64 x 2),
       and the bf16 halves of the split x */
    ins[0] = xm;
    t = amk_program_add_task(p, AMK_OP_GEMV_TILE, ins, 2, &ym, 1, c, "gemm");
    amk_task_set_int(p, t, "K", 2048);
    CHECK_EQ_INT(plan_want(p, t, threads), 2 * 8192 + 4 * (16384 + 4 * 8192));
    /* decode attention, head_dim 64, bf16 cache: fixed 4 * (4*64*(1 + 16) + 16) = 17472 bytes and
       304 a row (16 of scores, two 144-byte K/V rows) for the key range rounded to 32, at most 512 */
    ins[0] = q; ins[1] = kc; ins[2] = vc; ins[3] = pos;
    t = amk_program_add_task(p, AMK_OP_ATTENTION_DECODE, ins, 4, &o, 1, c, "attention");
    amk_task_set_int(p, t, "head_dim", 64);
    amk_task_set_int(p, t, "kv_len", 129);
    CHECK_EQ_INT(plan_want(p, t, threads), 17472 + 160 * 304);
    amk_task_set_int(p, t, "kv_len", 4096);
    CHECK_EQ_INT(plan_want(p, t, threads), 17472 + 512 * 304);
    /* a short range: still the 32 rows at 4 bytes an element that the launch check requires */
    amk_task_set_int(p, t, "kv_len", 8);
    CHECK_EQ_INT(plan_want(p, t, threads), 17472 + 32 * (16 + 2 * 272));
    /* bf16 q, K and V: the tensor-core path's layout, 4 query heads a kv head: fixed 16 q rows of
       144 bytes + 4 * 16 * (64 + 4) = 6656, then per 16 keys two 16-row K/V blocks (4608) and the
       group's sums and m, l (4 * 4 * 66 = 1056), for 129 keys rounded to 144 */
    ins[0] = qb;
    t2 = amk_program_add_task(p, AMK_OP_ATTENTION_DECODE, ins, 4, &o, 1, c, "attention mma");
    amk_task_set_int(p, t2, "head_dim", 64);
    amk_task_set_int(p, t2, "n_heads", 32);
    amk_task_set_int(p, t2, "n_kv_heads", 8);
    amk_task_set_int(p, t2, "kv_len", 129);
    CHECK_EQ_INT(plan_want(p, t2, threads), 6656 + 9 * (4608 + 1056));
    ins[0] = q;
    /* a bad buffer id (a program created unchecked) is left to the launch check, not read */
    p->tasks[t].inputs[1] = 999;
    CHECK_EQ_INT(plan_want(p, t, threads), 17472 + 32 * (16 + 2 * 272));
    p->tasks[t].inputs[1] = kc;
    /* a copy stages nothing */
    t = amk_program_add_task(p, AMK_OP_COPY, &x, 1, &q, 1, c, "copy");
    CHECK_EQ_INT(plan_want(p, t, threads), 0);
    amk_program_free(p);
}

/* A buffer of shape [n0] (n1 0) or [n0, n1]. */
static int lean_buf(amk_program *p, const char *name, amk_buffer_kind kind, amk_dtype t, int64_t n0, int64_t n1) {
    const int64_t s[2] = {n0, n1};
    return amk_program_add_buffer(p, name, kind, t, n1 ? 2 : 1, s, AMK_SPACE_HBM, NULL);
}

/* The lean decode tiles' shared memory (amk_plan_lean_bytes, the device's amk_norm_gemv_lean
   layout, AMK_LEAN_BYTES): SmolLM2's Q/K/V tile (8 rows of 576: [x | 8 floats, 16-aligned |
   norm_w | rows]) and its MLP tile (12 gate, up and W_downT rows); none for a tile outside the
   form (K = 2048, a bf16 x, a RoPE tile whose 16 row warps leave none for the trig), whose want
   stays the general one. The ring form's least (amk_plan_ring_least) for an LM-head tile. The
   form each plans (amk_plan_form). */
static void test_lean_bytes(void) {
    amk_program *p = amk_program_create();
    const int threads = 512;
    const int x = lean_buf(p, "x", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 1, 576);
    const int xb = lean_buf(p, "xb", AMK_KIND_ACTIVATION, AMK_DTYPE_BF16, 1, 576);
    const int y = lean_buf(p, "y", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 1, 576);
    const int xk = lean_buf(p, "xk", AMK_KIND_ACTIVATION, AMK_DTYPE_F32, 1, 2048);
    const int nwk = lean_buf(p, "nwk", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 2048, 0);
    const int Wk = lean_buf(p, "Wk", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 192, 2048);
    const int W = lean_buf(p, "W", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 192, 576);
    const int nw = lean_buf(p, "nw", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 576, 0);
    int cache = lean_buf(p, "k_cache", AMK_KIND_KV_CACHE, AMK_DTYPE_BF16, 129, 192);
    int cachek = lean_buf(p, "k_cache2", AMK_KIND_KV_CACHE, AMK_DTYPE_BF16, 129, 192);
    const int Wg = lean_buf(p, "Wg", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 1536, 576);
    const int Wu = lean_buf(p, "Wu", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 1536, 576);
    const int Wd = lean_buf(p, "WdT", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 1536, 576);
    const int pos = lean_buf(p, "pos", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, 0);
    int c, t, ins[6];
    c = amk_program_add_counter(p, "");
    CHECK(pos >= 0 && c >= 0);

    /* Q/K/V: 32 + 2304 + 8 * 576 * 2 = 11552, and x's 2304 */
    ins[0] = x; ins[1] = nw; ins[2] = W; ins[3] = pos;
    t = amk_program_add_task(p, AMK_OP_RMSNORM_GEMV_ROPE_KV, ins, 4, &cache, 1, c, "k");
    amk_task_set_int(p, t, "K", 576);
    amk_task_set_int(p, t, "N_tile", 8);
    CHECK_EQ_INT(plan_lean(p, t, threads), 11552 + 2304);
    CHECK_EQ_INT(plan_want(p, t, threads), 11552 + 2304);
    /* the form: lean where the launch's shared memory holds it, else the general one (its K floats
       of x and the cos and sin suffice) */
    CHECK_EQ_INT(plan_form(p, t, threads, 11552 + 2304), AMK_FORM_LEAN);
    CHECK_EQ_INT(plan_form(p, t, threads, 11552 + 2303), AMK_FORM_GENERAL);
    /* 32 rows with RoPE: 16 row warps, none left for the trig */
    amk_task_set_int(p, t, "N_tile", 32);
    CHECK_EQ_INT(plan_lean(p, t, threads), 0);
    CHECK_EQ_INT(plan_want(p, t, threads), 4 * (576 + 2 * 32));
    /* without RoPE the same 32 rows are two a warp: 128 + 2304 + 36864, and x */
    p->tasks[t].op = AMK_OP_RMSNORM_GEMV_KV;
    CHECK_EQ_INT(plan_lean(p, t, threads), 128 + 2304 + 36864 + 2304);
    /* a bf16 x, or K = 2048: the general form */
    p->tasks[t].inputs[0] = xb;
    CHECK_EQ_INT(plan_lean(p, t, threads), 0);
    ins[0] = xk; ins[1] = nwk; ins[2] = Wk;
    t = amk_program_add_task(p, AMK_OP_RMSNORM_GEMV_KV, ins, 4, &cachek, 1, c, "k 2048");
    amk_task_set_int(p, t, "K", 2048);
    amk_task_set_int(p, t, "N_tile", 8);
    CHECK_EQ_INT(plan_lean(p, t, threads), 0);
    CHECK_EQ_INT(plan_want(p, t, threads), 4 * 2048);
    /* MLP: 48 + 2304 + 2 * 12 * 576 * 2 + 12 * 576 * 2 = 43824, and x's 2304 */
    ins[0] = x; ins[1] = nw; ins[2] = Wg; ins[3] = Wu; ins[4] = Wd; ins[5] = x;
    t = amk_program_add_task(p, AMK_OP_RMSNORM_MLP, ins, 6, &y, 1, c, "mlp");
    amk_task_set_int(p, t, "K", 576);
    amk_task_set_int(p, t, "N_tile", 12);
    CHECK_EQ_INT(plan_lean(p, t, threads), 43824 + 2304);
    CHECK_EQ_INT(plan_want(p, t, threads), 43824 + 2304);
    /* 17 gate/up rows: more than the 16 warps */
    amk_task_set_int(p, t, "N_tile", 17);
    CHECK_EQ_INT(plan_lean(p, t, threads), 0);
    CHECK_EQ_INT(plan_ring(p, t, threads), 0);
    /* an LM-head tile (no flags, 100 rows: more than two a warp): the ring form's slots, one row of
       576 a warp each (AMK_RING_SLOTS * 16 * 1152); at 256 threads 8 warps a slot; 32 rows: the
       lean form */
    ins[0] = x; ins[1] = nw; ins[2] = W;
    t = amk_program_add_task(p, AMK_OP_RMSNORM_GEMV, ins, 3, &y, 1, c, "head");
    amk_task_set_int(p, t, "K", 576);
    amk_task_set_int(p, t, "N_tile", 100);
    CHECK_EQ_INT(plan_lean(p, t, threads), 0);
    CHECK_EQ_INT(plan_ring(p, t, threads), 2 * 16 * 1152); /* the least: two slots */
    CHECK_EQ_INT(plan_want(p, t, threads), AMK_RING_SLOTS * 16 * 1152);
    CHECK_EQ_INT(plan_ring(p, t, 256), 2 * 8 * 1152);
    CHECK_EQ_INT(plan_form(p, t, threads, 2 * 16 * 1152), AMK_FORM_RING);
    CHECK_EQ_INT(plan_form(p, t, threads, 2 * 16 * 1152 - 1), AMK_FORM_GENERAL);
    amk_task_set_int(p, t, "N_tile", 32);
    CHECK_EQ_INT(plan_ring(p, t, threads), 0);
    CHECK_EQ_INT(plan_want(p, t, threads), 16 * 8 + 2304 + 32 * 1152 + 2304);
    /* a bf16 x, or a variant: neither form */
    amk_task_set_int(p, t, "N_tile", 100);
    p->tasks[t].inputs[0] = xb;
    CHECK_EQ_INT(plan_ring(p, t, threads), 0);
    p->tasks[t].inputs[0] = x;
    p->tasks[t].op = AMK_OP_RMSNORM_GEMV_ROPE;
    CHECK_EQ_INT(plan_ring(p, t, threads), 0);
    amk_program_free(p);
}

/* The L2 prefetches the host puts in an instruction: a GEMV tile's first AMK_VM_PREFETCH_BYTES of
   weight rows (16-byte aligned, never past the buffer), a fused tile's norm weight, SWIGLU's gate
   and up rows sharing the budget, nothing for a tile under AMK_VM_PREFETCH_MIN_ELEMS elements or
   an activation used as W; the runtime's per-task form (amk__cuda_task_prefetches). */
static void test_prefetches(void) {
    amk_buffer_t bt[5];
    amk_instruction_t in;
    memset(bt, 0, sizeof bt);
    bt[0].ptr = 0x100000; bt[0].numel = 2048; bt[0].dtype = AMK_DTYPE_F32; bt[0].kind = AMK_KIND_ACTIVATION; /* x */
    bt[1].ptr = 0x200000; bt[1].numel = 2048; bt[1].dtype = AMK_DTYPE_F32; bt[1].kind = AMK_KIND_WEIGHT;     /* norm */
    bt[2].ptr = 0x300000; bt[2].numel = 8192LL * 2048; bt[2].dtype = AMK_DTYPE_BF16; bt[2].kind = AMK_KIND_WEIGHT;
    bt[3].ptr = 0x900000000ULL; bt[3].numel = 8192LL * 2048; bt[3].dtype = AMK_DTYPE_BF16; bt[3].kind = AMK_KIND_WEIGHT;
    bt[4] = bt[2]; bt[4].kind = AMK_KIND_ACTIVATION;
    memset(&in, 0, sizeof in);
    in.op = AMK_OP_GEMV_TILE; in.n_inputs = 2; in.inputs[0] = 0; in.inputs[1] = 2;
    in.params.K = 2048; in.params.n_off = 63; in.params.N_tile = 63;
    amk__cuda_prefetches(bt, 5, &in);
    CHECK(in.prefetch_addr[0] == 0x300000 + 63ULL * 2048 * 2 && in.prefetch_bytes[0] == AMK_VM_PREFETCH_BYTES);
    CHECK(in.prefetch_bytes[1] == 0 && in.prefetch_bytes[2] == 0);
    in.params.n_off = 8192 - 3; in.params.N_tile = 3; /* 3 x 2048 elements: under AMK_VM_PREFETCH_MIN_ELEMS */
    amk__cuda_prefetches(bt, 5, &in);
    CHECK(in.prefetch_bytes[0] == 0);
    in.params.N_tile = 16; in.params.n_off = 8192 - 16; /* the last 16 rows: exactly the budget */
    amk__cuda_prefetches(bt, 5, &in);
    CHECK(in.prefetch_addr[0] == 0x300000 + (8192ULL - 16) * 2048 * 2 && in.prefetch_bytes[0] == 16 * 2048 * 2);
    in.params.n_off = 8192 - 8; /* rows past the buffer (an unchecked program): cut at its end */
    amk__cuda_prefetches(bt, 5, &in);
    CHECK(in.prefetch_addr[0] == 0x300000 + (8192ULL - 8) * 2048 * 2 && in.prefetch_bytes[0] == 8 * 2048 * 2);
    in.inputs[1] = 4; /* an activation as W: it may be written during the launch */
    amk__cuda_prefetches(bt, 5, &in);
    CHECK(in.prefetch_bytes[0] == 0);
    bt[4].numel = 8192LL * 1024; bt[4].dtype = AMK_DTYPE_U8; bt[4].kind = AMK_KIND_WEIGHT; /* I4 packed in bytes */
    in.params.qdtype = AMK_DTYPE_I4; in.params.n_off = 63; in.params.N_tile = 63;
    amk__cuda_prefetches(bt, 5, &in);
    CHECK(in.prefetch_addr[0] == 0x300000 + 63ULL * 1024 && in.prefetch_bytes[0] == 63 * 1024);
    bt[4].numel = 100LL * 512; bt[4].dtype = AMK_DTYPE_Q4_K; /* a block format: rows of 2 x 144 bytes */
    in.params.qdtype = 0; in.params.K = 512; in.params.n_off = 1; in.params.N_tile = 40;
    amk__cuda_prefetches(bt, 5, &in);
    CHECK(in.prefetch_addr[0] == 0x300000 + 288 && in.prefetch_bytes[0] == 40 * 288);
    in.params.n_off = 90; in.params.N_tile = 40; /* past the buffer's 100 rows: cut at its end */
    amk__cuda_prefetches(bt, 5, &in);
    CHECK(in.prefetch_addr[0] == 0x300000 + 90 * 288 && in.prefetch_bytes[0] == 10 * 288);
    memset(&in, 0, sizeof in); /* RMSNORM_SWIGLU: norm weight, then gate and up share the budget */
    in.op = AMK_OP_RMSNORM_SWIGLU; in.n_inputs = 4; in.inputs[0] = 0; in.inputs[1] = 1; in.inputs[2] = 2; in.inputs[3] = 3;
    in.params.K = 2048; in.params.n_off = 62; in.params.N_tile = 62;
    amk__cuda_prefetches(bt, 5, &in);
    CHECK(in.prefetch_addr[0] == 0x200000 && in.prefetch_bytes[0] == 2048 * 4);
    CHECK(in.prefetch_addr[1] == 0x300000 + 62ULL * 4096 && in.prefetch_bytes[1] == AMK_VM_PREFETCH_BYTES / 2);
    CHECK(in.prefetch_addr[2] == 0x900000000ULL + 62ULL * 4096 && in.prefetch_bytes[2] == AMK_VM_PREFETCH_BYTES / 2);
    {   /* a task's prefetches in the runtime: the same; none at all with the config's
           pipelining_depth 0 */
        amk_cuda c;
        memset(&c, 0, sizeof c);
        in.op = AMK_OP_GEMV_TILE; in.n_inputs = 2; in.inputs[1] = 2; in.params.qdtype = 0;
        c.bufs = bt; c.n_buffers = 5; c.ins = &in;
        amk__cuda_task_prefetches(&c, 0);
        CHECK(in.prefetch_addr[0] == 0x300000 + 62ULL * 4096 && in.prefetch_bytes[0] == AMK_VM_PREFETCH_BYTES);
        CHECK(in.prefetch_bytes[1] == 0 && in.form == 0);
        CHECK(in.prefetch_bytes[2] == 0);
        c.no_prefetch = 1;
        amk__cuda_task_prefetches(&c, 0);
        CHECK(in.prefetch_bytes[0] == 0 && in.prefetch_bytes[1] == 0 && in.prefetch_bytes[2] == 0 && in.form == 0);
    }
    in.op = AMK_OP_COPY; /* nothing for other opcodes */
    amk__cuda_prefetches(bt, 5, &in);
    CHECK(in.prefetch_bytes[0] == 0 && in.prefetch_bytes[1] == 0 && in.prefetch_bytes[2] == 0);
}

/* The context table: entry q holds task queue[q]'s instruction, the descriptors of its inputs
   and outputs in slot order (the slots past them zero) and its index. */
static void test_context_entry(void) {
    amk_buffer_t bt[3];
    amk_instruction_t ins[2];
    int32_t queue[2] = {1, 0};
    amk_vm_ctx_t ctxs[2];
    amk_cuda c;
    int j;
    memset(bt, 0, sizeof bt);
    memset(ins, 0, sizeof ins);
    memset(&c, 0, sizeof c);
    memset(ctxs, 0xAB, sizeof ctxs); /* poison: every byte must be written */
    for (j = 0; j < 3; j++) { bt[j].ptr = 0x1000u * (j + 1); bt[j].numel = 7 + j; bt[j].dtype = AMK_DTYPE_BF16; }
    ins[0].op = AMK_OP_COPY; ins[0].n_inputs = 1; ins[0].inputs[0] = 2; ins[0].n_outputs = 1; ins[0].outputs[0] = 0;
    ins[1].op = AMK_OP_ADD; ins[1].n_inputs = 2; ins[1].inputs[0] = 0; ins[1].inputs[1] = 1;
    ins[1].n_outputs = 1; ins[1].outputs[0] = 2; ins[1].out_counter = 5;
    c.bufs = bt; c.ins = ins; c.queue = queue; c.ctxs = ctxs; c.n_tasks = 2; c.n_buffers = 3;
    amk__cuda_context(&c, 0);
    amk__cuda_context(&c, 1);
    CHECK(memcmp(&ctxs[0].ins, &ins[1], sizeof ins[1]) == 0 && ctxs[0].index == 1);
    CHECK(ctxs[0].in[0].ptr == 0x1000u && ctxs[0].in[1].ptr == 0x2000u && ctxs[0].out[0].ptr == 0x3000u);
    CHECK(ctxs[0].in[1].numel == 8 && ctxs[0].in[2].ptr == 0 && ctxs[0].out[1].ptr == 0 && ctxs[0].kv_rows == 0 &&
          ctxs[0].maps == 0);
    CHECK(memcmp(&ctxs[1].ins, &ins[0], sizeof ins[0]) == 0 && ctxs[1].index == 0);
    CHECK(ctxs[1].in[0].ptr == 0x3000u && ctxs[1].out[0].ptr == 0x1000u && ctxs[1].in[1].ptr == 0);
}

/* The lowered decode step of a preset shape with bf16 weights (and bf16 activations when
   act_bf16) at context 128; NULL (a failed check) if it does not build. */
static amk_program *lowered_step_fold(const char *shape, int act_bf16, int qkv_fold) {
    amk_llama_config cfg;
    amk_llama_build_opts o;
    amk_program *p = NULL;
    amk_diag d;
    amk_diag_clear(&d);
    CHECK(amk_llama_config_preset(shape, &cfg) == AMK_OK);
    amk_llama_build_opts_default(&o);
    o.weight_dtype = AMK_DTYPE_BF16;
    if (act_bf16) o.act_dtype = AMK_DTYPE_BF16;
    o.max_seq = 129;
    o.qkv_fold = qkv_fold;
    CHECK_MSG(amk_llama_build_lowered(&cfg, &o, &p, &d) == AMK_OK, "%s: %s", shape, d.message);
    return p;
}
static amk_program *lowered_step(const char *shape, int act_bf16) { return lowered_step_fold(shape, act_bf16, -1); }

/* A set as embed --set writes it: the header, n entries {kind, 0, offset, size}. */
static size_t make_set(unsigned char *b, size_t cap, int n, const uint32_t *kinds, const uint64_t *offs,
                       const uint64_t *sizes) {
    size_t i, k, end = 16 + 24 * (size_t)n;
    memset(b, 0, cap);
    memcpy(b, "AMKIMGS1", 8);
    b[8] = (unsigned char)n;
    for (i = 0; i < (size_t)n; i++)
        for (k = 0; k < 8; k++) {
            if (k < 4) b[16 + 24 * i + k] = (unsigned char)(kinds[i] >> (8 * k));
            b[16 + 24 * i + 8 + k] = (unsigned char)(offs[i] >> (8 * k));
            b[16 + 24 * i + 16 + k] = (unsigned char)(sizes[i] >> (8 * k));
        }
    for (i = 0; i < (size_t)n; i++)
        if (offs[i] + sizes[i] > end && offs[i] + sizes[i] <= cap) end = (size_t)(offs[i] + sizes[i]);
    return end;
}

/* The image set: the entry of a kind, unknown kinds skipped, every malformed header or entry
   (count 0 or past the cap, entries past the end, an image outside the set or of 0 bytes, offset
   + size wrapping) refused with PARSE, a missing kind with NOT_FOUND, a blob without the magic
   not a set. */
static void test_image_set(void) {
    unsigned char b[512];
    const void *img = NULL;
    size_t n = 0, len;
    amk_diag d;
    const uint32_t kinds[3] = {7, AMK_IMAGE_GENERAL, AMK_IMAGE_FULL};
    uint64_t offs[3] = {96, 112, 128}, sizes[3] = {16, 8, 40};
    len = make_set(b, sizeof b, 3, kinds, offs, sizes);
    CHECK(len == 168 && amk_image_set_is(b, len) && !amk_image_set_is(b, 7) && !amk_image_set_is(fake_image, sizeof fake_image));
    CHECK_EQ_INT(amk_image_set_find(b, len, AMK_IMAGE_FULL, &img, &n, &d), AMK_OK);
    CHECK(img == (const void *)(b + 128) && n == 40);
    CHECK_EQ_INT(amk_image_set_find(b, len, AMK_IMAGE_GENERAL, &img, &n, &d), AMK_OK);
    CHECK(img == (const void *)(b + 112) && n == 8);
    img = b; n = 1; /* a found image before a malformed entry: refused, the outputs left empty */
    CHECK_EQ_INT(amk_image_set_find(b, 160, AMK_IMAGE_GENERAL, &img, &n, &d), AMK_ERR_PARSE);
    CHECK(img == NULL && n == 0);
    len = make_set(b, sizeof b, 1, kinds + 1, offs, sizes);
    CHECK_EQ_INT(amk_image_set_find(b, len, AMK_IMAGE_FULL, &img, &n, &d), AMK_ERR_NOT_FOUND);
    CHECK(img == NULL && n == 0);
    CHECK_EQ_INT(amk_image_set_find(b, 15, AMK_IMAGE_GENERAL, &img, &n, &d), AMK_ERR_PARSE);
    CHECK_EQ_INT(amk_image_set_find(b, 39, AMK_IMAGE_GENERAL, &img, &n, &d), AMK_ERR_PARSE); /* the entry cut */
    CHECK_EQ_INT(amk_image_set_find(b, 111, AMK_IMAGE_GENERAL, &img, &n, &d), AMK_ERR_PARSE); /* the image cut */
    CHECK_EQ_INT(amk_image_set_find(fake_image, sizeof fake_image, AMK_IMAGE_FULL, &img, &n, &d), AMK_ERR_PARSE);
    CHECK_EQ_INT(amk_image_set_find(NULL, 0, AMK_IMAGE_FULL, &img, &n, &d), AMK_ERR_INVALID_ARG);
    b[8] = 0;
    CHECK_EQ_INT(amk_image_set_find(b, len, AMK_IMAGE_GENERAL, &img, &n, &d), AMK_ERR_PARSE);
    b[8] = AMK_IMAGE_SET_MAX + 1;
    CHECK_EQ_INT(amk_image_set_find(b, sizeof b, AMK_IMAGE_GENERAL, &img, &n, &d), AMK_ERR_PARSE);
    sizes[0] = 0; /* an empty image, then one that wraps: offset + size past 2^64 */
    len = make_set(b, sizeof b, 2, kinds + 1, offs, sizes);
    CHECK_EQ_INT(amk_image_set_find(b, len, AMK_IMAGE_GENERAL, &img, &n, &d), AMK_ERR_PARSE);
    offs[0] = 100; sizes[0] = ~(uint64_t)0 - 50;
    make_set(b, sizeof b, 2, kinds + 1, offs, sizes);
    CHECK_EQ_INT(amk_image_set_find(b, 200, AMK_IMAGE_GENERAL, &img, &n, &d), AMK_ERR_PARSE);
    CHECK_MSG(strstr(d.message, "not inside") != NULL, "message: %s", d.message);
}

/* Which programs the full build serves: SmolLM2's step (short rows, ATTENTION_O), not 1B's or
   8B's (K = 2048, 4096: no short rows, no ATTENTION_O); NULL none. */
static void wants_full_on(const char *shape, int want) {
    amk_program *p = lowered_step(shape, 0);
    if (!p) return;
    CHECK_MSG(amk_cuda_wants_full(p) == want, "%s: wants_full %d", shape, amk_cuda_wants_full(p));
    amk_program_free(p);
}
static void test_wants_full(void) {
    wants_full_on("smollm2-135m", 1);
    wants_full_on("llama3.2-1b", 0);
    wants_full_on("llama3-8b", 0);
    CHECK(amk_cuda_wants_full(NULL) == 0);
}

/* AMK_VM_HINT_KV_EARLY: every ATTENTION_O task of SmolLM2's step gets it (the caches' only
   writers are the K/V tiles' row stores at the step's position); once one of those tiles loses
   KV_ROW (it would write rows 0.. of the cache), none of that layer's attention tasks does. */
/* The folded step's forms (RMSNORM_MLP FOLD, ATTENTION_O PRENORM) run only in the full build's lean
   tiles: amk__cuda_check_task takes them there at 512 threads, and refuses them (UNSUPPORTED,
   naming the form) on the general build, and where the lean form does not take the task (an MLP
   tile of 16 rows at 256 threads: a warp a row; an attention task without its shared memory). */
static void test_folded_refused(void) {
    amk_program *p = lowered_step_fold("smollm2-135m", 1, 1);
    const int64_t smem = 200 * 1024;
    int i, mlp = -1, att = -1;
    amk_diag d;
    if (!p) return;
    for (i = 0; i < p->n_tasks; i++) {
        if (mlp < 0 && p->tasks[i].op == AMK_OP_RMSNORM_MLP_FOLD) mlp = i;
        if (att < 0 && p->tasks[i].op == AMK_OP_ATTENTION_O_PRENORM) att = i;
    }
    CHECK(mlp >= 0 && att >= 0);
    if (mlp < 0 || att < 0) { amk_program_free(p); return; }
    amk_diag_clear(&d);
    CHECK_EQ_INT(amk__cuda_check_task(p, mlp, 132, 512, smem, AMK_IMAGE_FULL, &d), AMK_OK);
    CHECK_EQ_INT(amk__cuda_check_task(p, att, 132, 512, smem, AMK_IMAGE_FULL, &d), AMK_OK);
    CHECK_EQ_INT(amk__cuda_check_task(p, mlp, 132, 512, smem, AMK_IMAGE_GENERAL, &d), AMK_ERR_UNSUPPORTED);
    CHECK(strstr(d.message, "FOLD") && strstr(d.message, "general, prefill or portable build"));
    CHECK_EQ_INT(amk__cuda_check_task(p, att, 132, 512, smem, AMK_IMAGE_GENERAL, &d), AMK_ERR_UNSUPPORTED);
    CHECK(strstr(d.message, "PRENORM") && strstr(d.message, "general, prefill or portable build"));
    CHECK_EQ_INT(amk__cuda_check_task(p, mlp, 132, 512, smem, AMK_IMAGE_PORTABLE, &d), AMK_ERR_UNSUPPORTED);
    CHECK(strstr(d.message, "FOLD") && strstr(d.message, "portable build"));
    CHECK_EQ_INT(amk__cuda_check_task(p, att, 132, 512, smem, AMK_IMAGE_PORTABLE, &d), AMK_ERR_UNSUPPORTED);
    CHECK_EQ_INT(amk__cuda_check_task(p, mlp, 132, 256, smem, AMK_IMAGE_FULL, &d), AMK_ERR_UNSUPPORTED);
    CHECK(strstr(d.message, "FOLD") != NULL);
    {
        amk_vm_ctx_t x;
        amk_task_context(p, att, &x);
        CHECK_EQ_INT(amk__cuda_check_task(p, att, 132, 512, amk_plan_attn_lean_bytes(&x, 512, 0), AMK_IMAGE_FULL, &d), AMK_OK);
        CHECK_EQ_INT(amk__cuda_check_task(p, att, 132, 512, amk_plan_attn_lean_bytes(&x, 512, 0) - 1, AMK_IMAGE_FULL, &d),
                     AMK_ERR_UNSUPPORTED);
    }
    CHECK(strstr(d.message, "PRENORM") != NULL);
    amk_program_free(p);
}

/* The step amk_llm builds for a GPU whose image lacks the lean forms (the portable build: a GPU
   other than sm_90): the builder's folded step (SmolLM2 BF16 folds by default) is built unfolded,
   so every task passes the portable build's check; for the full build's forms it stays folded;
   an explicit qkv_fold 1 is dropped only for the portable forms (and said so). */
static void test_portable_step(void) {
    amk_llama_config cfg;
    amk_llama_build_opts o;
    amk_llama_step st;
    int forms, fold, i, dropped;
    amk_diag d;
    CHECK(amk_llama_config_preset("smollm2-135m", &cfg) == AMK_OK);
    for (fold = -1; fold <= 1; fold += 2)
        for (forms = 0; forms < 2; forms++) {
            const int f = forms ? AMK_IMAGE_FORMS(AMK_IMAGE_PORTABLE) : AMK_PLAN_FORMS_LEAN;
            int folded = 0;
            amk_llama_build_opts_default(&o);
            o.weight_dtype = AMK_DTYPE_BF16;
            o.act_dtype = AMK_DTYPE_BF16;
            o.max_seq = 129;
            o.qkv_fold = fold;
            amk_diag_clear(&d);
            CHECK_EQ_INT(amk__llama_build_step(&cfg, &o, 1, f, &st, &dropped, &d), AMK_OK);
            if (!st.program) continue;
            for (i = 0; i < st.program->n_tasks; i++) {
                amk_vm_ctx_t x;
                amk_task_context(st.program, i, &x);
                folded += amk_plan_folded(&x);
                if (forms)
                    CHECK_MSG(amk__cuda_check_task(st.program, i, 132, 512, 99 * 1024, AMK_IMAGE_PORTABLE, &d) == AMK_OK,
                              "task %d: %s", i, d.message);
            }
            CHECK_MSG((folded > 0) == !forms, "qkv_fold %d, %s forms: %d folded tasks", fold, forms ? "portable" : "lean", folded);
            CHECK_EQ_INT(dropped, forms && fold == 1);
            amk_llama_step_free(&st);
        }
}

/* The build a device loads from a set: the portable one on every GPU but sm_90 (Ampere 8.0 / 8.6,
   Ada 8.9, Blackwell 10.0 / 12.0), or where AMK_CUDA_IMAGE=portable says so on sm_90; a set
   without it on such a GPU is refused by name (UNSUPPORTED), not loaded to fail in the driver; an
   AMK_CUDA_IMAGE that names no build is INVALID_ARG. */
static void test_pick_portable(void) {
    static const int cc[6][3] = {{8, 0, 1}, {8, 6, 1}, {8, 9, 1}, {9, 0, 0}, {10, 0, 1}, {12, 0, 1}};
    unsigned char b[512];
    const uint32_t kinds[3] = {AMK_IMAGE_FULL, AMK_IMAGE_GENERAL, AMK_IMAGE_PORTABLE};
    uint64_t offs[3] = {96, 112, 128}, sizes[3] = {16, 8, 40};
    const size_t len = make_set(b, 256, 3, kinds, offs, sizes), len2 = make_set(b + 256, 256, 2, kinds, offs, sizes);
    amk_program *p = lowered_step("llama3.2-1b", 0);
    const char *old = getenv("AMK_CUDA_IMAGE");
    char *saved = old ? strdup(old) : NULL;
    int i, kind;
    amk_diag d;
    if (!p) { free(saved); return; }
    unsetenv("AMK_CUDA_IMAGE");
    CHECK_EQ_INT(amk__cuda_portable(-1, 0), -1); /* no device and no variable: cannot tell */
    for (i = 0; i < 6; i++) {
        const void *img = b;
        size_t n = len;
        CHECK_EQ_INT(amk__cuda_portable(cc[i][0], cc[i][1]), cc[i][2]);
        amk_diag_clear(&d);
        CHECK_EQ_INT(amk__cuda_pick_image(p, cc[i][0], cc[i][1], &img, &n, &kind, &d), AMK_OK);
        CHECK_EQ_INT(kind, cc[i][2] ? AMK_IMAGE_PORTABLE : AMK_IMAGE_GENERAL);
        CHECK(img == b + (cc[i][2] ? 128 : 112) && n == (cc[i][2] ? 40u : 8u));
        img = b + 256;
        n = len2;
        CHECK_EQ_INT(amk__cuda_pick_image(p, cc[i][0], cc[i][1], &img, &n, &kind, &d), cc[i][2] ? AMK_ERR_UNSUPPORTED : AMK_OK);
        if (cc[i][2]) CHECK(strstr(d.message, "no portable build") != NULL);
    }
    {
        const void *img = b;
        size_t n = len;
        setenv("AMK_CUDA_IMAGE", "portable", 1);
        CHECK_EQ_INT(amk__cuda_portable(9, 0), 1);
        CHECK_EQ_INT(amk__cuda_portable(-1, 0), 1); /* the variable decides without the device */
        CHECK_EQ_INT(amk_cuda_picks_portable(), 1);
        CHECK_EQ_INT(amk__cuda_pick_image(p, 9, 0, &img, &n, &kind, &d), AMK_OK);
        CHECK_EQ_INT(kind, AMK_IMAGE_PORTABLE);
        setenv("AMK_CUDA_IMAGE", "general", 1);
        CHECK_EQ_INT(amk__cuda_portable(8, 6), 0);
        CHECK_EQ_INT(amk_cuda_picks_portable(), 0);
        setenv("AMK_CUDA_IMAGE", "sm80", 1);
        CHECK_EQ_INT(amk__cuda_portable(8, 6), -1);
        CHECK_EQ_INT(amk_cuda_picks_portable(), -1);
        CHECK_EQ_INT(amk__cuda_pick_image(p, 8, 6, &img, &n, &kind, &d), AMK_ERR_INVALID_ARG);
        CHECK(strstr(d.message, "portable") != NULL);
    }
    if (saved) setenv("AMK_CUDA_IMAGE", saved, 1);
    else unsetenv("AMK_CUDA_IMAGE");
    free(saved);
    amk_program_free(p);
}

/* ATTENTION_PREFILL on the device: a warp stages a query row of head_dim floats and keeps
   head_dim / 32 accumulators a lane, so a head_dim past the VM's (or q staging past the shared
   memory) is refused at load, by name, not failed at run time. */
static void test_prefill_refused(void) {
    int hd;
    for (hd = 64; hd <= 512; hd *= 8) {
        amk_program *p = amk_program_create();
        int64_t sh[3];
        int in[4], o, t;
        amk_diag d;
        sh[0] = 4; sh[1] = 2 * hd;
        in[0] = amk_program_add_buffer(p, "q", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, sh, AMK_SPACE_HBM, NULL);
        o = amk_program_add_buffer(p, "out", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, sh, AMK_SPACE_HBM, NULL);
        sh[0] = 16; sh[1] = 1; sh[2] = hd;
        in[1] = amk_program_add_buffer(p, "k", AMK_KIND_KV_CACHE, AMK_DTYPE_F32, 3, sh, AMK_SPACE_HBM, NULL);
        in[2] = amk_program_add_buffer(p, "v", AMK_KIND_KV_CACHE, AMK_DTYPE_F32, 3, sh, AMK_SPACE_HBM, NULL);
        sh[0] = 1;
        in[3] = amk_program_add_buffer(p, "pos", AMK_KIND_IO_INPUT, AMK_DTYPE_I32, 1, sh, AMK_SPACE_HBM, NULL);
        t = amk_program_add_task(p, AMK_OP_ATTENTION_PREFILL, in, 4, &o, 1, amk_program_add_counter(p, ""), "prefill");
        amk_task_set_int(p, t, "head_dim", hd);
        amk_task_set_int(p, t, "n_heads", 2);
        amk_task_set_int(p, t, "n_kv_heads", 1);
        amk_task_set_real(p, t, "scale", 0.125);
        amk_task_set_int(p, t, "n_off", 0);
        amk_task_set_int(p, t, "N_tile", 1);
        amk_task_set_int(p, t, "m_off", 0);
        amk_task_set_int(p, t, "M_tile", 4);
        p->tasks[t].sm = 0;
        amk_diag_clear(&d);
        const amk_result want = hd == 64 ? AMK_OK : AMK_ERR_UNSUPPORTED;
        CHECK_EQ_INT(amk__cuda_check_task(p, t, 132, 512, 200 * 1024, AMK_IMAGE_FULL, &d), want);
        if (hd != 64) CHECK(strstr(d.message, "head_dim 512") != NULL);
        CHECK_EQ_INT(amk__cuda_check_task(p, t, 132, 512, 16 * 64 * 4 - 1, AMK_IMAGE_FULL, &d), AMK_ERR_UNSUPPORTED);
        amk_program_free(p);
    }
}

static void test_kv_hints(void) {
    amk_program *p = lowered_step("smollm2-135m", 0);
    amk_instruction_t *ins;
    int i, n_attn = 0, n_hint = 0, writer = -1, cache = -1, n_cache = 0, n_cache_hint = 0;
    if (!p) return;
    ins = (amk_instruction_t *)calloc((size_t)p->n_tasks, sizeof *ins);
    CHECK(ins != NULL);
    CHECK(amk__cuda_kv_hints(p, ins) > 0);
    for (i = 0; i < p->n_tasks; i++) {
        if (amk_op_device(p->tasks[i].op, NULL) != AMK_OP_ATTENTION_O) {
            CHECK(ins[i].hints == 0);
            continue;
        }
        n_attn++;
        n_hint += ins[i].hints == AMK_VM_HINT_KV_EARLY;
        if (cache < 0) cache = p->tasks[i].inputs[1];
    }
    CHECK_MSG(n_attn > 0 && n_hint == n_attn, "%d of %d attention tasks hinted", n_hint, n_attn);
    CHECK(amk__cuda_kv_hints(p, ins) == 0); /* nothing changed */
    for (i = 0; i < p->n_tasks && writer < 0; i++)
        if (p->tasks[i].op == AMK_OP_RMSNORM_GEMV_ROPE_KV && p->tasks[i].n_outputs > 0 && p->tasks[i].outputs[0] == cache)
            writer = i;
    CHECK(writer >= 0);
    if (writer >= 0) p->tasks[writer].op = AMK_OP_RMSNORM_GEMV_ROPE; /* it writes its whole tile now */
    CHECK(amk__cuda_kv_hints(p, ins) > 0);
    for (i = 0; i < p->n_tasks; i++) {
        if (amk_op_device(p->tasks[i].op, NULL) != AMK_OP_ATTENTION_O) continue;
        if (p->tasks[i].inputs[1] == cache) {
            n_cache++;
            n_cache_hint += ins[i].hints != 0;
        } else {
            CHECK(ins[i].hints == AMK_VM_HINT_KV_EARLY); /* the other layers' keep it */
        }
    }
    CHECK_MSG(n_cache > 0 && n_cache_hint == 0, "%d of %d tasks on the cache still hinted", n_cache_hint, n_cache);
    free(ins);
    amk_program_free(p);
}

/* A stand-in for cuTensorMapEncodeTiled: records the geometry of each map it is asked for. */
static int g_maps, g_map_bad;
static amk__CUresult fake_encode(void *map, int dtype, uint32_t rank, void *addr, const uint64_t *dim,
                                 const uint64_t *stride, const uint32_t *box, const uint32_t *estride, int il,
                                 int swz, int l2, int oob) {
    g_maps++;
    /* bf16 bytes as UINT16, 2-D [rows, n_kv * 64], a box of 64 x kv_len, 128-byte swizzle */
    if ((uintptr_t)map % 64 != 0 || dtype != 1 || rank != 2u || !addr || dim[0] != 192u || dim[1] != 129u ||
        stride[0] != 384u || box[0] != 64u || box[1] != 129u || estride[0] != 1u || estride[1] != 1u || il != 0 ||
        swz != 3 || l2 != 0 || oob != 0)
        g_map_bad++;
    return AMK__CUDA_SUCCESS;
}
static size_t g_upload_bytes;
static amk__CUdeviceptr g_upload_to;
static amk__CUresult fake_upload(amk__CUdeviceptr to, const void *from, size_t n, amk__CUstream s) {
    (void)s;
    g_upload_to = to;
    g_upload_bytes = from ? n : 0;
    return AMK__CUDA_SUCCESS;
}
static amk__CUresult fake_sync(amk__CUstream s) {
    (void)s;
    return AMK__CUDA_SUCCESS;
}

/* The lean attention's tensor maps (amk__cuda_kv_pairs, amk__cuda_kv_maps' geometry, the
   context's maps): SmolLM2's bf16 step at context 129 has one pair a layer (its ATTENTION_O
   tasks share their caches), every task gets its layer's; a task's context carries the pair's
   address and rows only with AMK_VM_HINT_KV_EARLY; F32 caches, a driver without the call or the
   general build loaded: no pairs. */
static void test_kv_pairs(void) {
    amk_program *p = lowered_step("smollm2-135m", 1), *pf = lowered_step("smollm2-135m", 0);
    amk_cuda c;
    amk_buffer_t *bt;
    amk_vm_ctx_t ctx;
    int i, n_attn = 0, first = -1, queue[1];
    if (!p || !pf) { amk_program_free(p); amk_program_free(pf); return; }
    memset(&c, 0, sizeof c);
    c.threads = 512;
    c.smem_bytes = 200 * 1024;
    CHECK(amk__cuda_kv_pairs(&c, p) == 0 && c.n_kv_pairs == 0 && c.kv_pair == NULL); /* no driver call */
    c.TensorMapEncodeTiled = fake_encode;
    c.info.image_kind = AMK_IMAGE_GENERAL; /* the general build has no lean attention */
    CHECK(amk__cuda_kv_pairs(&c, p) == 0 && c.n_kv_pairs == 0);
    amk__free(c.kv_pair); amk__free(c.kv_pair_task); amk__free(c.kv_pair_rows);
    c.kv_pair = c.kv_pair_task = c.kv_pair_rows = NULL;
    c.info.image_kind = AMK_IMAGE_FULL;
    CHECK(amk__cuda_kv_pairs(&c, pf) == 0 && c.n_kv_pairs == 0); /* F32 caches */
    amk__free(c.kv_pair); amk__free(c.kv_pair_task); amk__free(c.kv_pair_rows);
    c.kv_pair = c.kv_pair_task = c.kv_pair_rows = NULL;
    CHECK(amk__cuda_kv_pairs(&c, p) == 0);
    CHECK_MSG(c.n_kv_pairs == 30, "%d pairs", c.n_kv_pairs);
    for (i = 0; i < p->n_tasks; i++) {
        const amk_task *t = &p->tasks[i];
        if (amk_op_device(t->op, NULL) != AMK_OP_ATTENTION_O) {
            CHECK(c.kv_pair[i] == -1);
            continue;
        }
        n_attn++;
        if (first < 0) first = i;
        CHECK(c.kv_pair[i] >= 0 && c.kv_pair[i] < c.n_kv_pairs);
        if (c.kv_pair[i] < 0 || c.kv_pair[i] >= c.n_kv_pairs) continue;
        CHECK(p->tasks[c.kv_pair_task[c.kv_pair[i]]].inputs[1] == t->inputs[1] &&
              p->tasks[c.kv_pair_task[c.kv_pair[i]]].inputs[2] == t->inputs[2]);
        CHECK(c.kv_pair_rows[c.kv_pair[i]] == amk__param_i(t, "kv_len", 0));
    }
    CHECK(n_attn > 30 && first >= 0);
    /* the maps amk__cuda_kv_maps encodes and uploads (a stand-in upload) */
    bt = (amk_buffer_t *)calloc((size_t)p->n_buffers, sizeof *bt);
    c.bufs = bt;
    for (i = 0; bt && i < p->n_buffers; i++) amk_buffer_descriptor(&p->buffers[i], 0x100000u * (uint64_t)(i + 1), &bt[i]);
    c.api.MemcpyHtoDAsync = fake_upload; /* amk__cuda_h2d: on the launch stream, then its sync */
    c.api.StreamSynchronize = fake_sync;
    c.arena = 0x7000000u;
    c.off_kv_maps = 0x1000u;
    g_maps = g_map_bad = 0;
    g_upload_bytes = 0;
    if (bt) CHECK(amk__cuda_kv_maps(&c, p, NULL) == AMK_OK);
    CHECK_MSG(g_maps == 60 && g_map_bad == 0, "%d maps, %d unlike SmolLM2's caches", g_maps, g_map_bad);
    CHECK(g_upload_bytes == (size_t)60 * AMK__CUDA_TMAP_BYTES && g_upload_to == 0x7001000u);
    /* the context of the first attention task: maps with the hint, none without */
    c.ins = (amk_instruction_t *)calloc((size_t)p->n_tasks, sizeof(amk_instruction_t));
    CHECK(c.ins != NULL);
    if (c.ins && bt && first >= 0) {
        c.queue = queue; c.ctxs = &ctx; c.n_tasks = p->n_tasks; c.n_buffers = p->n_buffers;
        queue[0] = first;
        amk_task_instruction(&p->tasks[first], &c.ins[first]);
        amk__cuda_context(&c, 0);
        CHECK(ctx.maps == 0 && ctx.kv_rows == 0 && ctx.ins.form == AMK_FORM_ATTN_LEAN);
        CHECK(amk__cuda_kv_hints(p, c.ins) > 0 && c.ins[first].hints == AMK_VM_HINT_KV_EARLY);
        amk__cuda_context(&c, 0);
        CHECK(ctx.maps == 0x7001000u + (uint64_t)c.kv_pair[first] * 2 * AMK__CUDA_TMAP_BYTES);
        CHECK(ctx.kv_rows == 129 && ctx.in[1].ptr == bt[p->tasks[first].inputs[1]].ptr);
        CHECK(ctx.ins.form == AMK_FORM_ATTN_LEAN && c.ins[first].form == AMK_FORM_ATTN_LEAN && amk_plan_attn_tma(&ctx));
        /* the general build: the general form, whatever the maps */
        c.info.image_kind = AMK_IMAGE_GENERAL;
        amk__cuda_context(&c, 0);
        CHECK(ctx.ins.form == AMK_FORM_GENERAL);
        c.info.image_kind = AMK_IMAGE_FULL;
        /* 129 rows: the tensor copies' layout (128-byte rows, 136 of them, and the alignment pad)
           is smaller than the cp.async one (144-byte rows); shared memory that holds it alone
           keeps the maps, one byte less leaves the general form */
        {
            amk_vm_ctx_t x;
            int64_t tma_b;
            amk_task_context(p, first, &x);
            x.maps = 1;
            x.kv_rows = 129;
            tma_b = amk_plan_attn_lean_bytes(&x, 512, 1);
            CHECK(tma_b > 0 && tma_b < amk_plan_attn_lean_bytes(&x, 512, 0));
            c.smem_bytes = tma_b;
            amk__cuda_context(&c, 0);
            CHECK(ctx.ins.form == AMK_FORM_ATTN_LEAN && ctx.maps != 0);
            c.smem_bytes = tma_b - 1;
            amk__cuda_context(&c, 0);
            CHECK(ctx.ins.form == AMK_FORM_GENERAL && ctx.maps == 0);
            c.smem_bytes = 200 * 1024;
        }
    }
    free(c.ins);
    free(bt);
    amk__free(c.kv_pair); amk__free(c.kv_pair_task); amk__free(c.kv_pair_rows);
    amk_program_free(p);
    amk_program_free(pf);
}

/* A GEMM tile's pair of maps (x's, W's) for amk_gemm_tma: only with the prefill build loaded, only
   for 16-bit x and W of one dtype at 512 threads and several rows, one pair for the tiles of one
   x, W and K (rows -1 marks a GEMM pair), none for an F32 x. */
static void test_gemm_pairs(void) {
    amk_program *p = amk_program_create();
    amk_cuda c;
    int x, xf, W, y, yf, t, ins[2], k;
    const int64_t sx[2] = {256, 512}, sw[2] = {1024, 512}, sy[2] = {256, 1024};
    x = amk_program_add_buffer(p, "x", AMK_KIND_IO_INPUT, AMK_DTYPE_BF16, 2, sx, AMK_SPACE_HBM, NULL);
    xf = amk_program_add_buffer(p, "xf", AMK_KIND_IO_INPUT, AMK_DTYPE_F32, 2, sx, AMK_SPACE_HBM, NULL);
    W = amk_program_add_buffer(p, "W", AMK_KIND_WEIGHT, AMK_DTYPE_BF16, 2, sw, AMK_SPACE_HBM, NULL);
    y = amk_program_add_buffer(p, "y", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, sy, AMK_SPACE_HBM, NULL);
    yf = amk_program_add_buffer(p, "yf", AMK_KIND_IO_OUTPUT, AMK_DTYPE_F32, 2, sy, AMK_SPACE_HBM, NULL);
    for (k = 0; k < 3; k++) {
        ins[0] = k < 2 ? x : xf;
        ins[1] = W;
        t = amk_program_add_task(p, AMK_OP_GEMM_TILE, ins, 2, k < 2 ? &y : &yf, 1, amk_program_add_counter(p, ""), "gemm");
        amk_task_set_int(p, t, "K", 512);
        amk_task_set_int(p, t, "m_off", 128 * (k % 2));
        amk_task_set_int(p, t, "M_tile", 128);
        amk_task_set_int(p, t, "n_off", 0);
        amk_task_set_int(p, t, "N_tile", 1024);
    }
    memset(&c, 0, sizeof c);
    c.threads = 512;
    c.TensorMapEncodeTiled = fake_encode;
    c.info.image_kind = AMK_IMAGE_FULL; /* no amk_gemm_tma in the full build */
    CHECK(amk__cuda_kv_pairs(&c, p) == 0 && c.n_kv_pairs == 0 && c.kv_pair && c.kv_pair[0] == -1);
    amk__free(c.kv_pair); amk__free(c.kv_pair_task); amk__free(c.kv_pair_rows);
    c.info.image_kind = AMK_IMAGE_PREFILL;
    CHECK(amk__cuda_kv_pairs(&c, p) == 0 && c.n_kv_pairs == 1);
    CHECK(c.kv_pair[0] == 0 && c.kv_pair[1] == 0 && c.kv_pair[2] == -1 && c.kv_pair_rows[0] == -1 && c.kv_pair_task[0] == 0);
    amk__free(c.kv_pair); amk__free(c.kv_pair_task); amk__free(c.kv_pair_rows);
    c.threads = 256; /* four warpgroups or none */
    CHECK(amk__cuda_kv_pairs(&c, p) == 0 && c.n_kv_pairs == 0);
    amk__free(c.kv_pair); amk__free(c.kv_pair_task); amk__free(c.kv_pair_rows);
    amk_program_free(p);
}

/* The arena against the device's memory before it is allocated (amk__cuda_fits, a stand-in
   cuMemGetInfo: 80 GB in all, g_free_b free): KV caches larger than the device refused as a bad
   context (INVALID_ARG), an arena larger than what is free as OUT_OF_MEMORY, both naming the
   sizes; a driver that cannot say leaves it to cuMemAlloc. */
static size_t g_free_b;
static amk__CUresult fake_mem_info(size_t *free_b, size_t *total_b) {
    *free_b = g_free_b;
    *total_b = (size_t)80000000000ULL;
    return g_free_b ? AMK__CUDA_SUCCESS : (amk__CUresult)1;
}
static void test_device_memory_check(void) {
    amk_program *p = amk_program_create();
    const int64_t shape[3] = {1 << 20, 8, 128};
    int64_t bytes[2];
    amk_cuda c;
    amk_diag d;
    CHECK(amk_program_add_buffer(p, "k", AMK_KIND_KV_CACHE, AMK_DTYPE_F32, 3, shape, AMK_SPACE_HBM, NULL) == 0);
    CHECK(amk_program_add_buffer(p, "v", AMK_KIND_KV_CACHE, AMK_DTYPE_F32, 3, shape, AMK_SPACE_HBM, NULL) == 1);
    memset(&c, 0, sizeof c);
    snprintf(c.info.device_name, sizeof c.info.device_name, "test GPU");
    c.api.MemGetInfo = fake_mem_info;
    c.buf_bytes = bytes;
    bytes[0] = bytes[1] = (int64_t)4 << 30; /* 4.3 GB each */
    c.arena_bytes = (uint64_t)bytes[0] * 2 + 1000;
    amk_diag_clear(&d);
    g_free_b = (size_t)70000000000ULL;
    CHECK_EQ_INT(amk__cuda_fits(&c, p, &d), AMK_OK);
    g_free_b = (size_t)5000000000ULL;
    CHECK_EQ_INT(amk__cuda_fits(&c, p, &d), AMK_ERR_OUT_OF_MEMORY);
    CHECK_MSG(strstr(d.message, "needs 8.6 GB of device memory (8.6 GB of it the KV caches), device test GPU has 5.0 GB free"),
              "%s", d.message);
    bytes[0] = bytes[1] = (int64_t)50000000000LL;
    g_free_b = (size_t)70000000000ULL;
    CHECK_EQ_INT(amk__cuda_fits(&c, p, &d), AMK_ERR_INVALID_ARG);
    CHECK_MSG(strstr(d.message, "the KV caches need 100.0 GB, more than device test GPU's 80.0 GB"), "%s", d.message);
    g_free_b = 0; /* the driver cannot say */
    CHECK_EQ_INT(amk__cuda_fits(&c, p, &d), AMK_OK);
    amk_program_free(p);
}

/* The image set `make device` wrote (embed --set): amk_image_set_find finds each of the builds,
   each an ELF cubin holding its kernel (amk_vm_main, or amk_vm_chain in the chained-steps, prefill
   and portable builds), the portable one a fatbin. Only where nvcc built the set. */
static void test_built_set(void) {
#ifdef AMK_TEST_DEVICE_SET
    FILE *f = fopen(AMK_TEST_DEVICE_SET, "rb");
    unsigned char *blob = NULL;
    long n = 0;
    int k;
    CHECK_MSG(f != NULL, "%s missing", AMK_TEST_DEVICE_SET);
    if (!f) return;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 && (blob = (unsigned char *)malloc((size_t)n)))
        CHECK(fread(blob, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    CHECK(blob != NULL);
    if (!blob) return;
    CHECK(amk_image_set_is(blob, (size_t)n));
    for (k = AMK_IMAGE_FULL; k <= AMK_IMAGE_PORTABLE; k++) {
        const void *img = NULL;
        size_t sz = 0, i;
        const char *want = k >= AMK_IMAGE_FULL_CHAIN ? "amk_vm_chain" : "amk_vm_main";
        int found = 0;
        CHECK_EQ_INT(amk_image_set_find(blob, (size_t)n, (amk_image_kind)k, &img, &sz, NULL), AMK_OK);
        if (!img) continue;
        if (k == AMK_IMAGE_PORTABLE) /* a fatbin (its magic 0xBA55ED50, little-endian) of cubins and PTX */
            CHECK(sz > 4 && memcmp(img, "\x50\xed\x55\xba", 4) == 0);
        else
            CHECK(sz > 4 && memcmp(img, "\x7f" "ELF", 4) == 0);
        for (i = 0; i + strlen(want) <= sz && !found; i++) found = memcmp((const char *)img + i, want, strlen(want)) == 0;
        CHECK_MSG(found, "kind %d: no %s in the image", k, want);
    }
    free(blob);
#endif
}

int main(void) {
    RUN(test_built_set);
    RUN(test_kv_hints);
    RUN(test_folded_refused);
    RUN(test_portable_step);
    RUN(test_pick_portable);
    RUN(test_kv_pairs);
    RUN(test_gemm_pairs);
    RUN(test_device_memory_check);
    RUN(test_image_set);
    RUN(test_wants_full);
    RUN(test_no_driver);
    RUN(test_llm_backend_reason);
    RUN(test_library_without_cuda_symbols);
    RUN(test_unlowered_program_refused_first);
    RUN(test_bad_references_refused);
    RUN(test_null_arguments);
    RUN(test_service_null_arguments);
    RUN(test_reference_only_forms_refused);
    RUN(test_vm_layouts);
    RUN(test_smem_want);
    RUN(test_lean_bytes);
    RUN(test_prefetches);
    RUN(test_context_entry);
    RUN(test_prefill_refused);
    TEST_SUMMARY();
}

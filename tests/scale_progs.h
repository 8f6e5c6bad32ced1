/* tests/scale_progs.h - pieces of the large programs that the validator's scaling test
   (tests/test_validate.c) and its benchmark (bench/validate_scale.c) both build. */
#ifndef AMK_TEST_SCALE_PROGS_H
#define AMK_TEST_SCALE_PROGS_H

/* n RMSNORM_MLP tiles of one row each (K = 8, n_off = k) on counter c_m, accumulating into
   out[0] after the FILL that signals c_f; in: x, norm_w, W_gate, W_up, W_downT and the residual
   (the first tile's sixth input). */
static void scale_mlp_tiles(amk_program *p, const int *in, const int *out, int c_m, int c_f, int n) {
    int k, t;
    for (k = 0; k < n; k++) {
        t = amk_program_add_task(p, AMK_OP_RMSNORM_MLP, in, k == 0 ? 6 : 5, out, 1, c_m, NULL);
        amk_task_set_int(p, t, "K", 8);
        amk_task_set_int(p, t, "N_tile", 1);
        amk_task_set_int(p, t, "n_off", k);
        amk_task_set_real(p, t, "eps", 1e-5);
        amk_task_add_wait(p, t, c_f, 1);
    }
}

#endif /* AMK_TEST_SCALE_PROGS_H */

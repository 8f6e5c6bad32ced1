/* bench/validate_scale.c - amk_program_validate's time and peak memory against the task count
   (issue 38, "superlinear validation"). Builds valid programs through the public API and times
   one validation of each; prints tasks, seconds, and the process's peak RSS after it.

     cc -std=c99 -O2 -o build/validate_scale bench/validate_scale.c -lm -ldl
     build/validate_scale [SHAPE] [TASKS...]     SHAPE: layered (default), chain, wide, mlp,
                                                 lowered

   Shapes (each task's waits name its producers' counters with thresholds equal to their producer
   counts, as real programs do):
     layered  layers of 8 GEMV tiles on one counter, then a COPY join waiting for all of them and
              an ADD of the join with the previous layer's residual (read two steps later, ordered
              only transitively): the shape of a decode step
     chain    one long chain of COPY/ADD, each ADD reading the value three links back
     wide     layers of 1000 tiles (fan-out), joined by one COPY (fan-in)
     mlp      layers of a FILL and 1000 RMSNORM_MLP tiles accumulating onto one value on one
              counter (pairs of accumulating writers of one group)
     lowered  layered, lowered onto an H100 (SMs, per-SM queues, pages: graph_color, or linear
              where lowering refuses graph_color for the size), then validated
   Peak RSS is the process's maximum, so run one size a process for a clean figure. */
#define AMK_IMPLEMENTATION
#include "../amk.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include "../tests/scale_progs.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An F32 [1, n] buffer named by fmt and i (one %d). */
static int vec(amk_program *p, const char *fmt, int i, amk_buffer_kind kind, int n) {
    int64_t sh[2];
    char name[32];
    snprintf(name, sizeof name, fmt, i);
    sh[0] = 1;
    sh[1] = n;
    return amk_program_add_buffer(p, name, kind, AMK_DTYPE_F32, 2, sh, AMK_SPACE_HBM, NULL);
}

static int task(amk_program *p, int op, int a, int b, int out, int ctr) {
    int in[2], o[1];
    in[0] = a;
    in[1] = b;
    o[0] = out;
    return amk_program_add_task(p, op, in, b < 0 ? 1 : 2, o, 1, ctr, NULL);
}

/* layers of `tiles` GEMV tiles (one counter) + COPY join + residual ADD, about n tasks. */
static amk_program *mk_layered(int n, int tiles) {
    amk_program *p = amk_program_create();
    int64_t sh[2];
    int per = tiles + 2, layers = n / per, l, i, w = 4 * tiles;
    int x, res, res_c = -1, w_id;
    sh[0] = w;
    sh[1] = w;
    w_id = amk_program_add_buffer(p, "w", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 2, sh, AMK_SPACE_HBM, "w");
    x = vec(p, "x%d", 0, AMK_KIND_IO_INPUT, w);
    res = x;
    for (l = 0; l < layers; l++) {
        int y, j, o, ct, cj, co, t;
        y = vec(p, "y%d", l, AMK_KIND_ACTIVATION, w);
        j = vec(p, "j%d", l, AMK_KIND_ACTIVATION, w);
        o = vec(p, "r%d", l + 1, l + 1 == layers ? AMK_KIND_IO_OUTPUT : AMK_KIND_ACTIVATION, w);
        ct = amk_program_add_counter(p, "tiles");
        cj = amk_program_add_counter(p, "join");
        co = amk_program_add_counter(p, "residual");
        for (i = 0; i < tiles; i++) {
            t = task(p, AMK_OP_GEMV_TILE, res, w_id, y, ct);
            amk_task_set_int(p, t, "K", w);
            amk_task_set_int(p, t, "n_off", 4 * i);
            amk_task_set_int(p, t, "N_tile", 4);
            if (res_c >= 0) amk_task_add_wait(p, t, res_c, 1);
        }
        t = task(p, AMK_OP_COPY, y, -1, j, cj);
        amk_task_add_wait(p, t, ct, tiles);
        t = task(p, AMK_OP_ADD, j, res, o, co); /* reads res: ordered through the tiles and join */
        amk_task_add_wait(p, t, cj, 1);
        res = o;
        res_c = co;
    }
    return p;
}

/* one chain of n tasks: v[i] = copy(v[i-1]) or add(v[i-1], v[i-3]) */
static amk_program *mk_chain(int n) {
    amk_program *p = amk_program_create();
    int *v = (int *)malloc((size_t)n * sizeof(int)), *c = (int *)malloc((size_t)n * sizeof(int));
    int i, x = vec(p, "x%d", 0, AMK_KIND_IO_INPUT, 64);
    for (i = 0; i < n; i++) {
        int t;
        v[i] = vec(p, "v%d", i, i + 1 == n ? AMK_KIND_IO_OUTPUT : AMK_KIND_ACTIVATION, 64);
        c[i] = amk_program_add_counter(p, NULL);
        if (i == 0) t = task(p, AMK_OP_COPY, x, -1, v[i], c[i]);
        else if (i >= 3 && i % 2) t = task(p, AMK_OP_ADD, v[i - 1], v[i - 3], v[i], c[i]);
        else t = task(p, AMK_OP_COPY, v[i - 1], -1, v[i], c[i]);
        if (i) amk_task_add_wait(p, t, c[i - 1], 1);
    }
    free(v);
    free(c);
    return p;
}

/* layers of a FILL and `tiles` RMSNORM_MLP tiles on one counter accumulating onto its value,
   which the next layer reads (ordered through its FILL, which waits for every tile). */
static amk_program *mk_mlp(int n, int tiles) {
    amk_program *p = amk_program_create();
    int64_t sh[2];
    int layers = n / (tiles + 1), l, x, nw, wg, wu, wd, prev_c = -1, in[6], o[1];
    x = vec(p, "x%d", 0, AMK_KIND_IO_INPUT, 8);
    nw = vec(p, "norm_w%d", 0, AMK_KIND_WEIGHT, 8);
    sh[0] = tiles;
    sh[1] = 8;
    wg = amk_program_add_buffer(p, "W_gate", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 2, sh, AMK_SPACE_HBM, "g");
    wu = amk_program_add_buffer(p, "W_up", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 2, sh, AMK_SPACE_HBM, "u");
    wd = amk_program_add_buffer(p, "W_downT", AMK_KIND_WEIGHT, AMK_DTYPE_F32, 2, sh, AMK_SPACE_HBM, "d");
    for (l = 0; l < layers; l++) {
        int c_f = amk_program_add_counter(p, "fill"), c_m = amk_program_add_counter(p, "mlp"), t;
        o[0] = vec(p, "x%d", l + 1, l + 1 == layers ? AMK_KIND_IO_OUTPUT : AMK_KIND_ACTIVATION, 8);
        t = amk_program_add_task(p, AMK_OP_FILL, NULL, 0, o, 1, c_f, NULL);
        amk_task_set_real(p, t, "scale", 0.0);
        if (prev_c >= 0) amk_task_add_wait(p, t, prev_c, tiles);
        in[0] = x; in[1] = nw; in[2] = wg; in[3] = wu; in[4] = wd; in[5] = x;
        scale_mlp_tiles(p, in, o, c_m, c_f, tiles);
        x = o[0];
        prev_c = c_m;
    }
    return p;
}

static long peak_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

int main(int argc, char **argv) {
    static const int sizes[] = {10000, 100000, 300000, 1000000};
    const char *shape = argc > 1 ? argv[1] : "layered";
    int i, ns = argc > 2 ? argc - 2 : 4;
    printf("shape %s\n%10s %10s %10s %10s %10s\n", shape, "tasks", "build_s", "validate_s", "build_MB", "peak_MB");
    for (i = 0; i < ns; i++) {
        int n = argc > 2 ? atoi(argv[2 + i]) : sizes[i];
        amk_program *p;
        amk_report rep;
        amk_result r;
        double t0 = now(), t1, t2;
        long mb;
        if (strcmp(shape, "chain") == 0) p = mk_chain(n);
        else if (strcmp(shape, "wide") == 0) p = mk_layered(n, 1000);
        else if (strcmp(shape, "mlp") == 0) p = mk_mlp(n, 1000);
        else p = mk_layered(n, 8);
        if (strcmp(shape, "lowered") == 0) {
            amk_config cfg;
            amk_target tg;
            amk_diag d;
            amk_config_default(&cfg);
            amk_target_builtin("h100", &tg);
            memset(&d, 0, sizeof d);
            r = amk_program_lower(p, &cfg, &tg, &d);
            if (r == AMK_ERR_UNSUPPORTED) { /* why: graph_color pages refuse large programs */
                amk_program_free(p);
                p = mk_layered(n, 8);
                cfg.page_allocation = AMK_PAGES_LINEAR;
                r = amk_program_lower(p, &cfg, &tg, &d);
            }
            if (r != AMK_OK) { fprintf(stderr, "lower: %s: %s\n", amk_result_str(r), d.message); return 1; }
        }
        t1 = now();
        mb = peak_mb();
        r = amk_program_validate(p, &rep);
        t2 = now();
        if (r != AMK_OK || rep.n_errors || rep.n_warnings) {
            char line[512];
            amk_report_format_issue(p, rep.n_items ? &rep.items[0] : NULL, line, sizeof line);
            fprintf(stderr, "%d tasks: %s, %d errors, %d warnings: %s\n", p->n_tasks, amk_result_str(r),
                    rep.n_errors, rep.n_warnings, line);
            return 1;
        }
        printf("%10d %10.2f %10.2f %10ld %10ld\n", p->n_tasks, t1 - t0, t2 - t1, mb, peak_mb());
        fflush(stdout);
        amk_report_free(&rep);
        amk_program_free(p);
    }
    return 0;
}

/* sampler_time.c - the host sampler's time a draw on a real model's logits (bench/NOTES.md).

   Build:  cc -std=c99 -O2 -o build/sampler_time bench/sampler_time.c -lm -ldl
   Run:    build/sampler_time [MODEL]   (default models/SmolLM2-135M-Instruct.Q4_1.gguf)

   Runs the prompt through the model on the reference VM, then times 200 draws of
   amk_sampler_sample on the last step's logits for a few temperature / top-k / top-p settings. */
#define AMK_IMPLEMENTATION
#include "../amk.h"
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    const char *prompt = "The history of the printing press";
    static const struct { float temp; int top_k; float top_p; } cfg[] = {
        {0.7f, 0, 1.0f}, {0.7f, 40, 1.0f}, {0.7f, 0, 0.9f}, {1.0f, 50, 0.95f}};
    amk_llm_opts o;
    amk_llm *m;
    amk_diag d;
    const float *logits = NULL;
    int ids[64], n, i, c, t, next, sink = 0;
    amk_diag_clear(&d);
    amk_llm_opts_default(&o);
    o.backend = AMK_BACKEND_CPU;
    o.build.max_seq = 64;
    if (amk_llm_open(path, &o, &m, &d) != AMK_OK) { fprintf(stderr, "sampler_time: %s\n", d.message); return 1; }
    n = amk_tokenizer_encode(amk_llm_tokenizer(m), prompt, strlen(prompt), -1, ids, 64);
    for (i = 0; i < n && i < 64; i++)
        if (amk_llm_step(m, ids[i], i, &logits, &next, &d) != AMK_OK) { fprintf(stderr, "sampler_time: %s\n", d.message); return 1; }
    for (c = 0; c < (int)(sizeof cfg / sizeof cfg[0]); c++) {
        amk_sampler s;
        double t0;
        amk_sampler_init(&s, cfg[c].temp, cfg[c].top_k, cfg[c].top_p, 1);
        t0 = now_ms();
        for (t = 0; t < 200; t++) sink += amk_sampler_sample(&s, logits, amk_llm_config(m)->vocab);
        printf("temp %.1f top-k %d top-p %.2f: %.3f ms a draw\n", cfg[c].temp, cfg[c].top_k, cfg[c].top_p,
               (now_ms() - t0) / 200);
        amk_sampler_free(&s);
    }
    amk_llm_close(m);
    return sink == -1; /* why: keeps the draws from being optimised away */
}

/* generate.c - greedy text generation with AMK's public API, in a few dozen lines.

   Build:  make app SRC=examples/generate.c OUT=build/generate   (the device images where nvcc is)
     or:   cc -std=c99 -O2 -o generate examples/generate.c -lm -ldl   (the reference VM only)
   Run:    ./generate models/SmolLM2-135M-Instruct.Q4_1.gguf "The capital of France is" */
#define AMK_IMPLEMENTATION
#include "../amk.h"
#ifdef AMK_EMBED_DEVICE_IMAGE /* `make app` builds the images and defines it */
#include "amk_device_image.h"
#endif
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    const char *prompt = argc > 2 ? argv[2] : "The capital of France is";
    int ids[1024], n, pos, next = 0, n_new = 32;
    char piece[256];
    amk_llm_opts o;
    amk_llm *m;
    amk_diag d;

    amk_diag_clear(&d);
    amk_llm_opts_default(&o);
#ifdef AMK_EMBED_DEVICE_IMAGE /* the GPU when there is one, else the reference VM */
    o.device_image = amk_device_cubin.bytes;
    o.device_image_size = amk_device_cubin_size;
#endif
    if (amk_llm_open(path, &o, &m, &d) != AMK_OK) { /* load, build, lower, upload */
        fprintf(stderr, "error: %s\n", d.message);
        return 1;
    }
    fprintf(stderr, "backend %s (%s)\n", amk_llm_backend_name(m), amk_llm_backend_reason(m));
    n = amk_tokenizer_encode(amk_llm_tokenizer(m), prompt, strlen(prompt), 0, ids, 1024);
    if (n < 1 || n > 1024) { fprintf(stderr, "error: prompt of %d tokens\n", n); return 1; }
    printf("%s", prompt);
    for (pos = n - 1; pos < n + n_new; pos++) {
        /* the prompt in one call (on the GPU in chunks of a prefill program), then a step a token */
        amk_result r = pos == n - 1 ? amk_llm_prefill(m, ids, n, 0, NULL, &next, &d)
                                    : amk_llm_step(m, next, pos, NULL, &next, &d);
        if (r != AMK_OK) {
            fprintf(stderr, "\nerror: %s\n", d.message);
            break;
        }
        if (next == amk_tokenizer_eos(amk_llm_tokenizer(m))) break;
        {
            int k = amk_tokenizer_decode(amk_llm_tokenizer(m), next, piece, sizeof piece);
            if (k > 0) fwrite(piece, 1, (size_t)k, stdout);
            fflush(stdout);
        }
    }
    printf("\n");
    amk_llm_close(m);
    return 0;
}

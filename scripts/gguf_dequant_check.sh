#!/usr/bin/env bash
# scripts/gguf_dequant_check.sh - AMK's GGUF dequantization against gguf-py's (the ggml project's own
# Python package, numpy), on random blocks of every quantized type AMK reads. Not part of `make
# test` (it needs network for pip); tests/test_gguf.c checks the same types against a decoder of
# its own. Usage: scripts/gguf_dequant_check.sh   (exit 0: every value equal within 1e-5 relative)
set -eu
cd "$(dirname "$0")/.."
W=$(mktemp -d /tmp/amk_dq.XXXXXX)
trap 'rm -rf "$W"' EXIT
python3 -m pip download -q --no-deps -d "$W/whl" gguf numpy
python3 -m pip install -q --no-deps --target "$W/py" "$W"/whl/*.whl
# random bytes a block, with finite f16 scales where each type keeps them; gguf-py's dequantize
cat > "$W/gen.py" <<'PY'
import sys, numpy as np, gguf
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES
rng = np.random.default_rng(1234)
scales = {"Q2_K": [(80, 0.1), (82, 1.0)], "Q3_K": [(108, 0.05)], "Q6_K": [(208, 0.05)],
          "Q4_1": [(0, 0.1), (2, 1.0)], "Q5_1": [(0, 0.1), (2, 1.0)], "Q4_K": [(0, 0.1), (2, 1.0)],
          "Q5_K": [(0, 0.1), (2, 1.0)]}
with open(sys.argv[1], "wb") as blocks, open(sys.argv[2], "wb") as ref:
    for name in ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL"]:
        t = getattr(gguf.GGMLQuantizationType, name)
        blk, tsize = GGML_QUANT_SIZES[t]
        nb = 64
        raw = rng.integers(0, 256, size=(nb, tsize), dtype=np.uint8)
        for off, s in scales.get(name, [(0, 0.1)]):
            v = ((rng.random(nb) * 2 - 1) * s).astype(np.float16)
            raw[:, off:off + 2] = v.view(np.uint8).reshape(nb, 2)
        y = quants.dequantize(raw.reshape(-1), t).astype(np.float32).reshape(-1)
        blocks.write(np.array([int(t), nb, blk, tsize], dtype=np.int32).tobytes() + raw.tobytes())
        ref.write(y.tobytes())
PY
PYTHONPATH="$W/py" python3 "$W/gen.py" "$W/blocks.bin" "$W/ref.bin"
cat > "$W/cmp.c" <<'C'
#define AMK_IMPLEMENTATION
#include "amk.h"
#include <stdio.h>
#include <math.h>
int main(int argc, char **argv) {
    FILE *fb = fopen(argv[1], "rb"), *fr = fopen(argv[2], "rb");
    int32_t h[4];
    int failed = 0;
    if (argc < 3 || !fb || !fr) return 2;
    while (fread(h, 4, 4, fb) == 4) {
        const size_t nbytes = (size_t)h[1] * (size_t)h[3], n = (size_t)h[1] * (size_t)h[2];
        unsigned char *raw = malloc(nbytes);
        float *ref = malloc(n * 4), *y = malloc(n * 4);
        amk_diag d;
        size_t i, bad = 0;
        if (!raw || !ref || !y || fread(raw, 1, nbytes, fb) != nbytes || fread(ref, 4, n, fr) != n) return 2;
        if (amk_gguf_dequant((uint32_t)h[0], raw, nbytes, (int64_t)n, AMK_DTYPE_F32, y, &d) != AMK_OK) {
            printf("%-6s %s\n", amk_gguf_type_name((uint32_t)h[0]), d.message);
            failed = 1;
            continue;
        }
        for (i = 0; i < n; i++) bad += !(fabs((double)y[i] - ref[i]) <= 1e-5 * fabs(ref[i]) + 1e-6);
        printf("%-6s %6zu values, %zu differ from gguf-py's\n", amk_gguf_type_name((uint32_t)h[0]), n, bad);
        failed |= bad != 0;
        free(raw); free(ref); free(y);
    }
    return failed;
}
C
cc -std=c99 -O1 -I. -o "$W/cmp" "$W/cmp.c" -lm -ldl
"$W/cmp" "$W/blocks.bin" "$W/ref.bin"

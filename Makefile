# xstage build: the C11 core (libxstage.a), the CUDA side (libxstage_cuda.a, whenever nvcc is
# found), the `xstage` tool and the tests. `make help` lists the targets.

BUILD  ?= build
CC     ?= gcc
NVCC   ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
NOCUDA ?=
SAN    ?=

CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -Wall -Wextra -Wshadow -Wno-unused-parameter -Iinclude -Isrc -D_GNU_SOURCE
LDLIBS   := -l:libjansson.a -lm -ldl -lpthread
NVARCH   ?= -gencode=arch=compute_90a,code=sm_90a
NVFLAGS  ?= -O3 -lineinfo
NVFLAGS  += -std=c++17 $(NVARCH) -Iinclude -Isrc -Icuda -Icuda/common -Xcompiler -Wall,-Wno-unused-function -diag-suppress 177

ifneq ($(SAN),)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
NOCUDA  := 1
endif
ifneq ($(NOCUDA),)
NVCC :=
endif

CORE_SRC  := $(wildcard src/*.c)
CORE_OBJ  := $(CORE_SRC:%.c=$(BUILD)/%.o)
TOOL_SRC  := $(wildcard tools/*.c)
TOOL_OBJ  := $(TOOL_SRC:%.c=$(BUILD)/%.o)
# the CUDA side: shared engines (cuda/common), one folder per workload, the GPU subcommands and
# the bench harness of the tool (tools/*.cu, tools/bench/)
CU_SRC    := $(wildcard cuda/*.cu cuda/*/*.cu tools/*.cu tools/bench/*.cu)
CU_OBJ    := $(CU_SRC:%.cu=$(BUILD)/%.o)
# lab/: experiments outside `make all`; `make lab` compiles their C so that they stay in step
LAB_SRC   := $(wildcard lab/*.c lab/*/*.c)
LAB_BIN   := $(LAB_SRC:%.c=$(BUILD)/%)
TEST_SRC  := $(wildcard tests/test_*.c)
TEST_BIN  := $(TEST_SRC:%.c=$(BUILD)/%)
GTEST_SRC := $(wildcard tests/gpu/test_*.cu)
GTEST_BIN := $(GTEST_SRC:%.cu=$(BUILD)/%)
# CPU tests of the CUDA side's host code (no device needed; tests/run.sh runs them with the rest)
CTEST_SRC := $(wildcard tests/test_*.cu)
CTEST_BIN := $(CTEST_SRC:%.cu=$(BUILD)/%)
HEADERS   := $(wildcard include/*.h include/*.cuh src/*.h tools/*.h tools/bench/*.h cuda/*.h \
                        cuda/*.cuh cuda/*/*.h cuda/*/*.cuh tests/*.h)

ifneq ($(NVCC),)
ALL_GPU  := $(BUILD)/libxstage_cuda.a $(GTEST_BIN) $(CTEST_BIN)
TOOL_GPU := $(CU_OBJ)   # objects, not the archive: weak references do not pull archive members
LINK     := $(NVCC) $(NVARCH) -Xlinker --no-as-needed
else
LINK     := $(CC) $(LDFLAGS)
endif

.PHONY: all lib tool tests test sanitize run deps clean help fuzz lab
all: tool tests $(ALL_GPU)
lib: $(BUILD)/libxstage.a
tool: $(BUILD)/xstage
tests: $(TEST_BIN)

$(BUILD)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(BUILD)/libxstage.a: $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libxstage_cuda.a: $(CU_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/xstage: $(TOOL_OBJ) $(TOOL_GPU) $(BUILD)/libxstage.a
	$(LINK) -o $@ $(TOOL_OBJ) $(TOOL_GPU) $(BUILD)/libxstage.a $(LDLIBS)

lab: $(LAB_BIN)
$(BUILD)/lab/%: lab/%.c $(BUILD)/libxstage.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $< -o $@ $(BUILD)/libxstage.a $(LDLIBS)

$(BUILD)/tests/test_%: tests/test_%.c $(BUILD)/libxstage.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $< -o $@ $(BUILD)/libxstage.a $(LDLIBS)

$(CTEST_BIN): $(BUILD)/tests/%: tests/%.cu $(BUILD)/libxstage_cuda.a $(BUILD)/libxstage.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) $< -o $@ $(BUILD)/libxstage_cuda.a $(BUILD)/libxstage.a $(LDLIBS)

$(BUILD)/tests/gpu/test_%: tests/gpu/test_%.cu $(BUILD)/libxstage_cuda.a $(BUILD)/libxstage.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) $< -o $@ $(BUILD)/libxstage_cuda.a $(BUILD)/libxstage.a $(LDLIBS)

# CPU tests (unit, property, command line). The last line is "N passed, N failed".
test: all
	@sh tests/run.sh $(BUILD)

# The CPU core, the tool and the tests under AddressSanitizer + UndefinedBehaviorSanitizer.
sanitize:
	$(MAKE) SAN=1 BUILD=$(BUILD)-san test

# The main job: plan the example schedule (calibrate and replay as well where a GPU is present).
run: all
	@sh scripts/main.sh $(BUILD)

deps:
	@sh scripts/deps.sh

# libFuzzer targets (tests/fuzz/, clang): the schedule, profile and trace parsers and the CPU
# subcommands' command line, each linked with the core built the same way (ASan + UBSan);
# scripts/fuzz.sh builds them here and runs each for a bounded time. The command-line target
# opens files through its in-memory seam (fuzz_cli.c).
FUZZ_CC    ?= clang
FUZZ_FLAGS := -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=undefined -std=c11 -Wall -Wextra -Wno-unused-parameter \
              -Iinclude -Isrc -D_GNU_SOURCE
fuzz: $(BUILD)-fuzz/fuzz_schedule $(BUILD)-fuzz/fuzz_profile $(BUILD)-fuzz/fuzz_cli \
      $(BUILD)-fuzz/fuzz_trace
$(BUILD)-fuzz/fuzz_cli: FUZZ_SEAM := -Dfopen=xs_fuzz_fopen
FUZZ_TOOL := tools/cmd_model.c tools/cmd_trace.c
$(BUILD)-fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(CORE_SRC) $(FUZZ_TOOL) $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(FUZZ_SEAM) -o $@ $< $(CORE_SRC) $(FUZZ_TOOL) $(LDLIBS)

clean:
	rm -rf $(BUILD) $(BUILD)-san $(BUILD)-fuzz

help:
	@echo "targets: all (default) lib tool tests test sanitize run deps clean lab fuzz"
	@echo "vars: BUILD=dir NOCUDA=1 (skip nvcc) SAN=1 (ASan+UBSan) NVARCH=... CC=..."

# xstage build: the C11 core (libxstage.a), the CUDA side (libxstage_cuda.a, whenever nvcc is
# found), the `xstage` tool and the tests. `make help` lists the targets.

BUILD  ?= build
CC     ?= gcc
NVCC   ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
NOCUDA ?=
SAN    ?=

CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -Wall -Wextra -Wshadow -Wno-unused-parameter -Iinclude -D_GNU_SOURCE
LDLIBS   := -l:libjansson.a -lm -ldl -lpthread
NVARCH   ?= -gencode=arch=compute_90a,code=sm_90a
NVFLAGS  ?= -O3 -lineinfo
NVFLAGS  += -std=c++17 $(NVARCH) -Iinclude -Xcompiler -Wall,-Wno-unused-function -diag-suppress 177

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
CU_SRC    := $(wildcard cuda/*.cu)
CU_OBJ    := $(CU_SRC:%.cu=$(BUILD)/%.o)
DEV_SRC   := $(wildcard dev/*.cu)
DEV_OBJ   := $(DEV_SRC:%.cu=$(BUILD)/%.o)
# offline calibration drivers (dev/cal_offline/README.md): built so that they stay in step
CAL_SRC   := $(wildcard dev/cal_offline/*.c)
CAL_BIN   := $(CAL_SRC:dev/cal_offline/%.c=$(BUILD)/dev/cal_offline/%)
# bench up's model offline (dev/up_offline/README.md), CPU only
UPO_SRC   := $(wildcard dev/up_offline/*.cu)
UPO_BIN   := $(UPO_SRC:dev/up_offline/%.cu=$(BUILD)/dev/up_offline/%)
# bench ep's model offline (dev/ep_offline/README.md), CPU only
EPO_SRC   := $(wildcard dev/ep_offline/*.cu)
EPO_BIN   := $(EPO_SRC:dev/ep_offline/%.cu=$(BUILD)/dev/ep_offline/%)
TEST_SRC  := $(wildcard tests/test_*.c)
TEST_BIN  := $(TEST_SRC:%.c=$(BUILD)/%)
GTEST_SRC := $(wildcard tests/gpu/test_*.cu)
GTEST_BIN := $(GTEST_SRC:%.cu=$(BUILD)/%)
# CPU tests of the CUDA side's host code (no device needed; tests/run.sh runs them with the rest)
CTEST_SRC := $(wildcard tests/test_*.cu)
CTEST_BIN := $(CTEST_SRC:%.cu=$(BUILD)/%)
HEADERS   := $(wildcard include/*.h include/*.cuh src/*.h tools/*.h cuda/*.h cuda/*.cuh tests/*.h)

ifneq ($(NVCC),)
ALL_GPU  := $(BUILD)/libxstage_cuda.a $(GTEST_BIN) $(CTEST_BIN) $(DEV_OBJ) $(UPO_BIN) $(EPO_BIN)
TOOL_GPU := $(CU_OBJ)   # objects, not the archive: weak references do not pull archive members
LINK     := $(NVCC) $(NVARCH) -Xlinker --no-as-needed
else
LINK     := $(CC) $(LDFLAGS)
endif

.PHONY: all lib tool tests test sanitize run deps clean help fuzz
all: tool tests $(CAL_BIN) $(ALL_GPU)
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

$(BUILD)/dev/cal_offline/%: dev/cal_offline/%.c $(BUILD)/libxstage.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $< -o $@ $(BUILD)/libxstage.a $(LDLIBS)

$(BUILD)/tests/test_%: tests/test_%.c $(BUILD)/libxstage.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $< -o $@ $(BUILD)/libxstage.a $(LDLIBS)

$(CTEST_BIN): $(BUILD)/tests/%: tests/%.cu $(BUILD)/libxstage_cuda.a $(BUILD)/libxstage.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) $< -o $@ $(BUILD)/libxstage_cuda.a $(BUILD)/libxstage.a $(LDLIBS)

$(UPO_BIN): $(BUILD)/dev/up_offline/%: dev/up_offline/%.cu $(BUILD)/libxstage_cuda.a $(BUILD)/libxstage.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) $< -o $@ $(BUILD)/libxstage_cuda.a $(BUILD)/libxstage.a $(LDLIBS)

$(EPO_BIN): $(BUILD)/dev/ep_offline/%: dev/ep_offline/%.cu $(BUILD)/libxstage_cuda.a $(BUILD)/libxstage.a $(HEADERS)
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

# libFuzzer targets (tests/fuzz/, clang): the schedule and profile parsers and the CPU
# subcommands' command line, each linked with the core built the same way (ASan + UBSan);
# scripts/fuzz.sh builds them here and runs each for a bounded time. The command-line target
# opens files through its in-memory seam (fuzz_cli.c).
FUZZ_CC    ?= clang
FUZZ_FLAGS := -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=undefined -std=c11 -Wall -Wextra -Wno-unused-parameter \
              -Iinclude -D_GNU_SOURCE
fuzz: $(BUILD)-fuzz/fuzz_schedule $(BUILD)-fuzz/fuzz_profile $(BUILD)-fuzz/fuzz_cli
$(BUILD)-fuzz/fuzz_cli: FUZZ_SEAM := -Dfopen=xs_fuzz_fopen
$(BUILD)-fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(CORE_SRC) tools/cmd_model.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(FUZZ_SEAM) -o $@ $< $(CORE_SRC) tools/cmd_model.c $(LDLIBS)

clean:
	rm -rf $(BUILD) $(BUILD)-san $(BUILD)-fuzz

help:
	@echo "targets: all (default) lib tool tests test sanitize run deps clean"
	@echo "vars: BUILD=dir NOCUDA=1 (skip nvcc) SAN=1 (ASan+UBSan) NVARCH=... CC=..."

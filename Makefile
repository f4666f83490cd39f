# SPDX-License-Identifier: Apache-2.0
# xstage build: the C11 core (libxstage.a, and libxstage.so for `make shared` and `make
# install`), the CUDA side (libxstage_cuda.a, whenever nvcc is found), the `xstage` tool and the
# tests. `make help` lists the targets; docs/INSTALL.md describes installing.

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
# NCCL headers (>= 2.28.7, for the device API) come from $(NCCL_HOME)/include when it is set,
# otherwise from the compiler's and CUDA's include paths; the library is loaded at run time.
NCCL_HOME ?=
ifneq ($(NCCL_HOME),)
NVFLAGS  += -I$(NCCL_HOME)/include
endif

# make install: DESTDIR stages, PREFIX is where the files will live (and what xstage.pc says)
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
VERSION    := $(shell sed -n 's/^\#define XSTAGE_VERSION_STRING "\(.*\)"/\1/p' include/xstage.h)
SOMAJOR    := $(firstword $(subst ., ,$(VERSION)))
SONAME     := libxstage.so.$(SOMAJOR)
# what a program linked against the static core also needs (xstage.pc's Libs.private)
LIBS_PRIVATE := -ljansson -lm -ldl -lpthread

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
# the same core, position-independent, for libxstage.so (no CUDA in it)
PIC_OBJ   := $(CORE_SRC:%.c=$(BUILD)/pic/%.o)
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

# the public device header alone (include/ only on the path), for the oldest and the newest target
HDRCHECK  := $(BUILD)/tests/device_header_sm80.o $(BUILD)/tests/device_header_sm90a.o

ifneq ($(NVCC),)
ALL_GPU  := $(BUILD)/libxstage_cuda.a $(GTEST_BIN) $(CTEST_BIN) $(HDRCHECK) $(BUILD)/examples/byo
TOOL_GPU := $(CU_OBJ)   # objects, not the archive: weak references do not pull archive members
LINK     := $(NVCC) $(NVARCH) -Xlinker --no-as-needed
else
LINK     := $(CC) $(LDFLAGS)
endif

.PHONY: all lib shared tool tests test sanitize run deps clean help fuzz lab install uninstall
all: tool tests $(ALL_GPU)
lib: $(BUILD)/libxstage.a
shared: $(BUILD)/libxstage.so
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

$(BUILD)/pic/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -c $< -o $@

$(BUILD)/libxstage.so.$(VERSION): $(PIC_OBJ)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) -Wl,-z,defs -o $@ $^ $(LIBS_PRIVATE)

$(BUILD)/libxstage.so: $(BUILD)/libxstage.so.$(VERSION)
	ln -sf libxstage.so.$(VERSION) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

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

# examples/byo as a user builds it (public headers and libxstage.a only; its own Makefile does
# the same outside the tree), so that it stays in step
$(BUILD)/examples/byo: examples/byo/byo.cu $(wildcard examples/byo/*.h examples/byo/*.cuh) \
                       $(BUILD)/libxstage.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) -O3 -lineinfo -std=c++17 $(NVARCH) -Xcompiler -Wall -Iinclude \
	    $(if $(NCCL_HOME),-I$(NCCL_HOME)/include) $< -o $@ \
	    $(BUILD)/libxstage.a $(LDLIBS)

$(BUILD)/tests/device_header_sm%.o: tests/device_header.cu include/xstage_device.cuh \
                                    include/xstage_pattern.h
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -Iinclude -arch=sm_$* -Xcompiler -Wall -c $< -o $@

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

# Headers, the static and the shared core, the tool and xstage.pc under DESTDIR + PREFIX.
install: $(BUILD)/libxstage.a $(BUILD)/libxstage.so $(BUILD)/xstage
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)
	install -m 755 $(BUILD)/xstage $(DESTDIR)$(BINDIR)/xstage
	install -m 644 include/*.h include/xstage_device.cuh $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 $(BUILD)/libxstage.a $(DESTDIR)$(LIBDIR)/libxstage.a
	install -m 755 $(BUILD)/libxstage.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libxstage.so.$(VERSION)
	ln -sf libxstage.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libxstage.so
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' \
	  'Name: xstage' \
	  'Description: X-Stage backpressure model of device-initiated remote stores (C core)' \
	  'Version: $(VERSION)' 'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lxstage' \
	  'Libs.private: $(LIBS_PRIVATE)' >$(DESTDIR)$(LIBDIR)/pkgconfig/xstage.pc

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/xstage $(DESTDIR)$(LIBDIR)/libxstage.a \
	      $(DESTDIR)$(LIBDIR)/libxstage.so $(DESTDIR)$(LIBDIR)/$(SONAME) \
	      $(DESTDIR)$(LIBDIR)/libxstage.so.$(VERSION) $(DESTDIR)$(LIBDIR)/pkgconfig/xstage.pc
	cd $(DESTDIR)$(INCLUDEDIR) && rm -f $(notdir $(wildcard include/*.h)) xstage_device.cuh

clean:
	rm -rf $(BUILD) $(BUILD)-san $(BUILD)-fuzz

help:
	@echo "targets: all (default) lib shared tool tests test sanitize run deps clean lab fuzz"
	@echo "         install uninstall (PREFIX=/usr/local DESTDIR=)"
	@echo "vars: BUILD=dir NOCUDA=1 (skip nvcc) SAN=1 (ASan+UBSan) NVARCH=... CC=... NCCL_HOME=dir"

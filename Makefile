# pocket - build, test, demo.  `make demo` builds and runs the bundled model;
# `make test` builds and runs every test.  As root, missing Debian packages are
# installed with apt-get; otherwise they are named in an error.
#
# Targets: x86-64 and AArch64 (Linux; macOS/iOS in principle), chosen by what
# `$(CC) -dumpmachine` says, so `make CC=clang` and cross compilers such as
# `make CC=aarch64-linux-gnu-gcc SYSROOT=DIR` work.  `make PORTABLE=1` builds
# the POSIX fallback of src/core/platform.c on Linux too (no futex, no madvise).
# `make test-aarch64` cross-builds into build-aarch64/ and runs the tests under
# qemu-aarch64 on three emulated CPUs (tests/lib/run_aarch64.sh).

# Builds run one job per core unless the command line says otherwise (-jN
# wins); the tests themselves run one at a time (each uses every core).
# Sub-makes share the top make's jobs.
ifeq ($(MAKELEVEL),0)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 1)
endif
ifneq ($(filter clean,$(MAKECMDGOALS)),)
.NOTPARALLEL:   # `make clean all`: the clean first
endif

CC      ?= cc
BUILD   ?= build
OPT     ?= -O3
CFLAGS  ?=
CFLAGS  += -std=c11 $(OPT) -g -Wall -Wextra -Wshadow -Wno-unused-parameter -Werror=vla \
           -D_GNU_SOURCE -Iinclude -Isrc -pthread -fPIC
LDLIBS  += -lpcre2-8 -lmicrohttpd -ljansson -lm -lpthread
PYTHON  ?= /usr/bin/python3
PREFIX  ?= /usr/local

# Debian packages the build and tests need (probed in `deps`). nginx is for
# tests/cli/t_deploy.sh, which runs its own instance on loopback (deploy/);
# where services start at install, Debian's package also starts the system's.
# python3-clang (libclang) is for tests/unit/t_designated.sh.
DEB_PKGS = libpcre2-dev python3-numpy python3-jinja2 libmicrohttpd-dev libjansson-dev libedit-dev pkgconf nginx \
           python3-clang
# the CLI alone links libedit (line editing in `pocket chat`)
CLI_LDLIBS = -ledit

# src/ is in folders by layer (HACKING.md): core, quant, gguf, kernels (with
# x86/ and arm/), text, model, engine (with kinds/), offline. Objects mirror it
# under $(BUILD)/obj/.
SRC      := $(wildcard src/*/*.c src/*/*/*.c)
HDR      := $(wildcard src/*/*.h src/*/*/*.h)
OBJ      := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(SRC))
TEST_SRC := $(wildcard tests/unit/test_*.c)
TEST_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRC))
TOOL_SRC := $(wildcard tests/lib/tool_*.c)
TOOL_BIN := $(patsubst tests/lib/%.c,$(BUILD)/tests/%,$(TOOL_SRC))
FUZZ_HARNESS := $(wildcard fuzz/fuzz_*.c)
FUZZ_REPLAY  := $(patsubst fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_HARNESS))
LIB      := $(BUILD)/libpocket.a
CLI      := $(BUILD)/pocket

# The target, from the compiler: x86_64-linux-gnu, aarch64-linux-gnu,
# arm64-apple-darwin..., and whether that is this machine (uname -m).
TARGET    := $(shell $(CC) -dumpmachine 2>/dev/null)
norm_arch  = $(patsubst amd64,x86_64,$(patsubst arm64,aarch64,$(1)))
ARCH      := $(call norm_arch,$(firstword $(subst -, ,$(TARGET))))
HOST_ARCH := $(call norm_arch,$(shell uname -m))
CROSS     := $(if $(filter $(HOST_ARCH),$(ARCH)),,1)

# A target root file system (headers and libraries of the target), e.g. the
# arm64 Debian tree that `make test-aarch64` makes.
SYSROOT ?=
ifneq ($(SYSROOT),)
CFLAGS  += --sysroot=$(SYSROOT)
LDFLAGS += --sysroot=$(SYSROOT)
endif
ifeq ($(PORTABLE),1)
CFLAGS  += -DPK_PORTABLE
endif
# ASSERTS=1 turns on the PK_ASSERT contracts (src/core/common.h); `make sanitize`
# and `make fuzz` do.
ifeq ($(ASSERTS),1)
CFLAGS  += -DPK_ASSERTS
endif

# Per-ISA kernel files (src/kernels/x86/, src/kernels/arm/) get their own
# target flags; the rest stays portable. Each kernel file guards its code with
# #if on the ISA macros, so a file of the other architecture (or one built
# without its flags) compiles to an empty table.
#   x86-64:  x86/avx2*.c, x86/avxvnni.c, x86/avx512*.c, x86/amx.c
#   AArch64: arm/neon*.c (baseline ARMv8.0 NEON: no flags),
#            arm/dotprod*.c (ARMv8.2 sdot/udot, fp16),
#            arm/i8mm*.c (ARMv8.2 + smmla/ummla)
ISA_avx2    = -mavx2 -mfma -mf16c
ISA_avxvnni = $(ISA_avx2) -mavxvnni
ISA_avx512  = -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq \
              -mavx512vnni
ISA_dotprod = -march=armv8.2-a+dotprod+fp16
ISA_i8mm    = -march=armv8.2-a+dotprod+fp16+i8mm

.PHONY: all deps demo test test-shared sanitize clean install bench test-aarch64 aarch64-deps aarch64-sysroot
all: deps $(CLI) $(TEST_BIN) $(TOOL_BIN) $(FUZZ_REPLAY)

# Headers are probed through the compiler, so a sysroot or another
# compiler's search path counts. A cross build names what its target lacks;
# only a native build installs Debian packages.
have_header = printf '\043include <%s>\n' $(1) | $(CC) $(CFLAGS) -DPCRE2_CODE_UNIT_WIDTH=8 -E -x c - -o /dev/null 2>/dev/null
deps:
	@missing=""; \
	$(call have_header,pcre2.h) || missing="$$missing libpcre2-dev"; \
	$(call have_header,microhttpd.h) || missing="$$missing libmicrohttpd-dev"; \
	$(call have_header,jansson.h) || missing="$$missing libjansson-dev"; \
	$(call have_header,editline/readline.h) || missing="$$missing libedit-dev"; \
	if [ -n "$(CROSS)" ] && [ -n "$$missing" ]; then \
	  echo "error: $(CC) ($(TARGET)) lacks the headers of:$$missing (pass SYSROOT=DIR with the target's packages; make test-aarch64 makes one for aarch64)" >&2; exit 1; \
	fi; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkgconf"; \
	{ command -v nginx || [ -x /usr/sbin/nginx ]; } >/dev/null 2>&1 || missing="$$missing nginx"; \
	$(PYTHON) -c 'import numpy' 2>/dev/null || missing="$$missing python3-numpy"; \
	$(PYTHON) -c 'import jinja2' 2>/dev/null || missing="$$missing python3-jinja2"; \
	$(PYTHON) -c 'import clang.cindex as c; c.Index.create()' 2>/dev/null || missing="$$missing python3-clang"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "error: missing Debian packages:$$missing (run make as root, or: sudo apt-get install$$missing)" >&2; exit 1; \
	  fi; \
	fi

X86 = $(BUILD)/obj/kernels/x86
ARM = $(BUILD)/obj/kernels/arm
ifeq ($(ARCH),x86_64)
$(X86)/avx2.o $(X86)/avx2_%.o: CFLAGS += $(ISA_avx2)
$(X86)/avxvnni.o: CFLAGS += $(ISA_avxvnni)
$(X86)/avx512.o $(X86)/avx512_%.o: CFLAGS += $(ISA_avx512)
$(X86)/amx.o: CFLAGS += $(ISA_avx512) -mamx-tile -mamx-int8
endif
ifeq ($(ARCH),aarch64)
$(ARM)/dotprod.o $(ARM)/dotprod_%.o: CFLAGS += $(ISA_dotprod)
$(ARM)/i8mm.o $(ARM)/i8mm_%.o: CFLAGS += $(ISA_i8mm)
endif

# (deps first: a fresh machine gets the headers before anything compiles)
$(BUILD)/obj/%.o: src/%.c $(HDR) include/pocket.h | deps
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@
# kernels/x86/avxvnni.c is kernels/x86/avx2_gemm.c built again with AVX-VNNI (it includes it)
$(X86)/avxvnni.o: src/kernels/x86/avx2_gemm.c

$(LIB): $(OBJ)
	rm -f $@; ar rcs $@ $^

$(CLI): $(wildcard tools/*.c) $(wildcard tools/*.h) $(BUILD)/gen/fit_quality.c $(LIB)
	$(CC) $(CFLAGS) $(wildcard tools/*.c) $(BUILD)/gen/fit_quality.c $(LIB) -o $@ $(LDFLAGS) $(CLI_LDLIBS) $(LDLIBS)

# pocket info's table of measured quality (tools/fit_quality.tsv) as a C string
$(BUILD)/gen/fit_quality.c: tools/fit_quality.tsv
	@mkdir -p $(@D)
	{ echo 'const char pocket_fit_quality_tsv[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/.*/    "&\\n"/' $<; echo '    "";'; } >$@

$(BUILD)/tests/test_%: tests/unit/test_%.c tests/unit/testhelp.h tests/unit/testrand.h tests/unit/schema_valid.h $(LIB) | $(BUILD)/tests
	$(CC) $(CFLAGS) $< $(LIB) -o $@ $(LDFLAGS) $(LDLIBS)
# an API translator of serve (tools/serve_NAME.c) is tested alone: JSON in, JSON out
$(BUILD)/tests/test_serve_%: tests/unit/test_serve_%.c tests/unit/testhelp.h tools/serve_%.c tools/serve_api.c \
                             $(wildcard tools/serve_*.h) $(LIB) | $(BUILD)/tests
	$(CC) $(CFLAGS) -Itools $< tools/serve_$*.c tools/serve_api.c $(LIB) -o $@ $(LDFLAGS) $(LDLIBS)
$(BUILD)/tests/tool_%: tests/lib/tool_%.c $(LIB) | $(BUILD)/tests
	$(CC) $(CFLAGS) $< $(LIB) -o $@ $(LDFLAGS) $(LDLIBS)

# the tools/ files a harness links: fuzz_serve the server's, fuzz_api_NAME
# the translator tools/serve_NAME.c
fuzz_tools = $(if $(filter serve,$(1)),tools/cli.c $(wildcard tools/serve_*.c))$(if \
             $(filter api_%,$(1)), tools/serve_api.c tools/serve_$(patsubst api_%,%,$(1)).c)

# the fuzz harnesses as plain programs that replay files (fuzz/driver.c)
$(BUILD)/fuzz/fuzz_%: fuzz/fuzz_%.c fuzz/driver.c $(LIB) $(wildcard tools/*.c) $(wildcard tools/*.h) | $(BUILD)/fuzz
	$(CC) $(CFLAGS) -Itools $< fuzz/driver.c $(call fuzz_tools,$*) $(LIB) -o $@ $(LDFLAGS) $(LDLIBS)

$(BUILD)/tests $(BUILD)/fuzz:
	mkdir -p $@

demo: all
	$(CLI) run -p "And God said" -n 48

test: all
	@BUILD=$(BUILD) PYTHON=$(PYTHON) sh tests/lib/run.sh

# `make test-shared`: the tests against the reference files in ../shared
# (POCKET_SHARED=DIR names another directory) that the repository does not
# carry: llama.cpp's tokenizer vocabularies (1-6 MB each) and its perplexity
# over the whole held-out text, and that the repository's copies
# (tests/data) are ../shared's files; see tests/README.md.
POCKET_SHARED ?= ../shared
test-shared: all
	@[ -d "$(POCKET_SHARED)" ] || { echo "make test-shared: $(POCKET_SHARED) not found (the reference files the tests read; POCKET_SHARED=DIR names another directory)"; exit 1; }
	@BUILD=$(BUILD) PYTHON=$(PYTHON) POCKET_SHARED=$(POCKET_SHARED) sh tests/lib/run.sh tests/ref/shared/t_*.sh

# The sanitizer run has the PK_ASSERT contracts on. SAN_BUILD names its
# build directory.
SAN_BUILD ?= build-san
sanitize:
	$(MAKE) BUILD=$(SAN_BUILD) ASSERTS=1 OPT="-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined" \
	  LDFLAGS="-fsanitize=address,undefined" test

# ---- fuzzing -------------------------------------------------------------------
# `make fuzz FUZZ_SECONDS=N`: build every fuzz/fuzz_*.c harness with clang's
# libFuzzer + ASan + UBSan (and the PK_ASSERT contracts) into $(FUZZ_BUILD),
# then run each for N seconds (default 30; as many at once as make runs
# jobs, one per core by default) on its committed seeds
# (fuzz/corpus/NAME). New inputs go to $(FUZZ_BUILD)/corpus/NAME, crashes to
# $(FUZZ_BUILD)/crash-NAME-*; any crash fails the target. Needs clang and
# libFuzzer (Debian: clang, libclang-rt-14-dev; installed when root).
FUZZ_CC      ?= clang
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 30
FUZZ_SAN      = -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_SRC     := $(wildcard fuzz/fuzz_*.c)
FUZZ_BIN     := $(patsubst fuzz/%.c,$(FUZZ_BUILD)/%,$(FUZZ_SRC))
FUZZ_PKGS     = clang libclang-rt-14-dev

.PHONY: fuzz fuzz-deps fuzz-build
fuzz-deps: deps
	@probe='int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }'; \
	if ! echo "$$probe" | $(FUZZ_CC) -x c - -fsanitize=fuzzer -o /dev/null 2>/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages: $(FUZZ_PKGS)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(FUZZ_PKGS) >/dev/null || exit 1; \
	  else \
	    echo "error: $(FUZZ_CC) cannot build libFuzzer programs (run make as root, or: sudo apt-get install $(FUZZ_PKGS))" >&2; exit 1; \
	  fi; \
	fi

fuzz-build: fuzz-deps
	$(MAKE) CC=$(FUZZ_CC) BUILD=$(FUZZ_BUILD) ASSERTS=1 \
	  OPT="-O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link -fsanitize-coverage-ignorelist=fuzz/coverage-ignore.txt $(FUZZ_SAN)" $(FUZZ_BIN)

$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c $(LIB) $(wildcard tools/*.c) $(wildcard tools/*.h)
	$(CC) $(CFLAGS) -Itools -fsanitize=fuzzer $< $(call fuzz_tools,$*) $(LIB) -o $@ \
	  -fsanitize=fuzzer $(FUZZ_SAN) $(LDLIBS)

# each harness a target of its own, so they run side by side (one per core)
FUZZ_RUNS := $(patsubst fuzz/fuzz_%.c,fuzz-run-%,$(FUZZ_SRC))
.PHONY: $(FUZZ_RUNS)
fuzz: $(FUZZ_RUNS)
$(FUZZ_RUNS): fuzz-run-%: fuzz-build
	@mkdir -p $(FUZZ_BUILD)/corpus/$*; \
	if nice $(FUZZ_BUILD)/fuzz_$* -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	     -artifact_prefix=$(FUZZ_BUILD)/crash-$*- $(FUZZ_BUILD)/corpus/$* fuzz/corpus/$* \
	     >$(FUZZ_BUILD)/$*.log 2>&1; then \
	  echo "fuzz $*: $(FUZZ_SECONDS) s $$(grep -E '^stat::number_of_executed_units|^stat::average_exec_per_sec' $(FUZZ_BUILD)/$*.log | tr '\n' ' ')"; \
	else \
	  echo "FAIL fuzz $*:"; tail -n 40 $(FUZZ_BUILD)/$*.log; exit 1; \
	fi

# ---- AArch64 under emulation ------------------------------------------------
# `make test-aarch64`: cross-build with $(A64_CC) against an arm64 Debian tree
# (tests/lib/aarch64_sysroot.sh, reused once made) into build-aarch64/, then run
# the tests under qemu-aarch64 on three CPUs (tests/lib/run_aarch64.sh). The host
# build is made too: its perplexity anchors the emulated one. Leaves
# build-aarch64/pocket, runnable as
#   qemu-aarch64 -L build-aarch64/sysroot -cpu max build-aarch64/pocket run ...
A64         = build-aarch64
A64_SYSROOT = $(A64)/sysroot
A64_CC     ?= aarch64-linux-gnu-gcc
A64_PKGS    = gcc-aarch64-linux-gnu qemu-user mmdebstrap

aarch64-deps:
	@missing=""; \
	command -v $(A64_CC) >/dev/null 2>&1 || missing="$$missing gcc-aarch64-linux-gnu"; \
	command -v qemu-aarch64 >/dev/null 2>&1 || missing="$$missing qemu-user"; \
	command -v mmdebstrap >/dev/null 2>&1 || [ -e $(A64_SYSROOT)/usr/include/pcre2.h ] || missing="$$missing mmdebstrap"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "error: missing Debian packages:$$missing (run make as root, or: sudo apt-get install$$missing)" >&2; exit 1; \
	  fi; \
	fi

aarch64-sysroot: aarch64-deps
	@sh tests/lib/aarch64_sysroot.sh $(A64_SYSROOT)

test-aarch64: aarch64-sysroot
	$(MAKE) all
	$(MAKE) CC=$(A64_CC) BUILD=$(A64) SYSROOT=$(A64_SYSROOT) all
	@BUILD=$(A64) SYSROOT=$(A64_SYSROOT) HOST_BUILD=$(BUILD) PYTHON=$(PYTHON) sh tests/lib/run_aarch64.sh

clean:
	rm -rf build build-san build-portable build-clang $(FUZZ_BUILD)
	rm -rf $(A64)/obj $(A64)/tests $(A64)/tmp $(A64)/logs $(A64)/pocket $(A64)/libpocket.a

# `make install PREFIX=DIR` (DESTDIR is honoured): the library, its header and
# pkg-config file, the CLI, and the bundled model where the CLI looks for it
# (DIR/share/pocket). Build against it with
#   cc prog.c $(pkg-config --cflags --libs --static pocket)
# PC_LIBS_PRIVATE lists what libpocket.a itself needs (not the CLI's extras;
# jansson: the tool-call parser, text/toolcall.c, and JSON schemas,
# text/json_schema.c, and the Jinja chat templates, text/jinja.c).
PC_LIBS_PRIVATE = -lpcre2-8 -ljansson -lm -lpthread
INSTALL_DIR = $(DESTDIR)$(PREFIX)
install: $(CLI) $(LIB)
	install -d $(INSTALL_DIR)/lib/pkgconfig $(INSTALL_DIR)/include $(INSTALL_DIR)/bin \
	  $(INSTALL_DIR)/share/pocket
	install -m 644 $(LIB) $(INSTALL_DIR)/lib/libpocket.a
	install -m 644 include/pocket.h $(INSTALL_DIR)/include/pocket.h
	install -m 755 $(CLI) $(INSTALL_DIR)/bin/pocket
	install -m 644 models/kjv-moe-f16.gguf $(INSTALL_DIR)/share/pocket/kjv-moe-f16.gguf
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' \
	  'Name: pocket' 'Description: run GGUF Mixture-of-Experts language models on CPUs' \
	  'Version: 0.1.0' 'Libs: -L$${libdir} -lpocket' 'Libs.private: $(PC_LIBS_PRIVATE)' \
	  'Cflags: -I$${includedir}' >$(INSTALL_DIR)/lib/pkgconfig/pocket.pc

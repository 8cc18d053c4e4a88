# pocket - build, test, demo.  `make demo` builds and runs the bundled model;
# `make test` builds and runs every test.  As root, missing Debian packages are
# installed with apt-get; otherwise they are named in an error.

CC      ?= cc
BUILD   ?= build
OPT     ?= -O3
CFLAGS  ?=
CFLAGS  += -std=c11 $(OPT) -g -Wall -Wextra -Wshadow -Wno-unused-parameter \
           -D_GNU_SOURCE -Iinclude -Isrc -pthread -fPIC
LDLIBS  += -lpcre2-8 -lmicrohttpd -ljansson -lm -lpthread
PYTHON  ?= /usr/bin/python3
PREFIX  ?= /usr/local

# Debian packages the build and tests need: package:probe
DEB_PKGS = libpcre2-dev python3-numpy libmicrohttpd-dev libjansson-dev pkgconf

SRC      := $(wildcard src/*.c)
OBJ      := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(SRC))
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
TOOL_SRC := $(wildcard tests/tool_*.c)
TOOL_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TOOL_SRC))
LIB      := $(BUILD)/libpocket.a
CLI      := $(BUILD)/pocket

# Per-ISA kernel files get their own target flags; the rest stays portable.
ISA_avx2   = -mavx2 -mfma -mf16c
ISA_avx512 = -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq \
             -mavx512vnni

.PHONY: all deps demo test sanitize clean install bench
all: deps $(CLI) $(TEST_BIN) $(TOOL_BIN)

deps:
	@missing=""; \
	[ -f /usr/include/pcre2.h ] || missing="$$missing libpcre2-dev"; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkgconf"; \
	[ -f /usr/include/microhttpd.h ] || missing="$$missing libmicrohttpd-dev"; \
	[ -f /usr/include/jansson.h ] || missing="$$missing libjansson-dev"; \
	$(PYTHON) -c 'import numpy' 2>/dev/null || missing="$$missing python3-numpy"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "error: missing Debian packages:$$missing (run make as root, or: sudo apt-get install$$missing)" >&2; exit 1; \
	  fi; \
	fi

$(BUILD)/obj/kernels_avx2.o $(BUILD)/obj/kernels_avx2_%.o: CFLAGS += $(ISA_avx2)
$(BUILD)/obj/kernels_avx512.o $(BUILD)/obj/kernels_avx512_%.o: CFLAGS += $(ISA_avx512)
$(BUILD)/obj/kernels_amx.o: CFLAGS += $(ISA_avx512) -mamx-tile -mamx-int8

$(BUILD)/obj/%.o: src/%.c $(wildcard src/*.h) include/pocket.h | $(BUILD)/obj
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(OBJ)
	rm -f $@; ar rcs $@ $^

$(CLI): $(wildcard tools/*.c) $(wildcard tools/*.h) $(LIB)
	$(CC) $(CFLAGS) $(wildcard tools/*.c) $(LIB) -o $@ $(LDFLAGS) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/testhelp.h $(LIB) | $(BUILD)/tests
	$(CC) $(CFLAGS) $< $(LIB) -o $@ $(LDFLAGS) $(LDLIBS)

$(BUILD)/obj $(BUILD)/tests:
	mkdir -p $@

demo: all
	$(CLI) run -p "And God said" -n 48

test: all
	@BUILD=$(BUILD) PYTHON=$(PYTHON) sh tests/run.sh

# The sanitizer run scores fewer perplexity windows (POCKET_TEST_QUICK).
sanitize:
	POCKET_TEST_QUICK=1 $(MAKE) BUILD=build-san OPT="-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined" \
	  LDFLAGS="-fsanitize=address,undefined" test

clean:
	rm -rf build build-san

# `make install PREFIX=DIR` (DESTDIR is honoured): the library, its header and
# pkg-config file, the CLI, and the bundled model where the CLI looks for it
# (DIR/share/pocket). Build against it with
#   cc prog.c $(pkg-config --cflags --libs --static pocket)
# PC_LIBS_PRIVATE lists what libpocket.a itself needs (not the CLI's extras).
PC_LIBS_PRIVATE = -lpcre2-8 -lm -lpthread
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

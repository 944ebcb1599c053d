# SPDX-License-Identifier: MIT
# gdrhook: user-space build, tests and checks.  The kernel module has its
# own Kbuild under src/kmod (make kmod); the QEMU lab is scripts/lab.

CC		?= cc
PYTHON		?= python3
CUDA_HOME	?= /usr/local/cuda
BUILD		?= build
SAN		?=

# No link-time dependency on libcuda/libcudart/libibverbs: headers only.
CUDA_INC	:= $(firstword $(wildcard $(CUDA_HOME)/include/cuda.h) \
			$(wildcard /usr/include/cuda.h))
CUDA_CPPFLAGS	:= $(if $(CUDA_INC),-I$(dir $(CUDA_INC)),)

WARN		:= -Wall -Wextra -Werror -Wmissing-prototypes -Wformat=2 \
		   -Wno-unused-parameter -Wno-missing-field-initializers
CFLAGS		?= -O2 -g
SANFLAGS	:= $(if $(SAN),-fsanitize=$(SAN) -fno-omit-frame-pointer,)
ALL_CFLAGS	:= -std=gnu11 -fPIC $(WARN) $(CFLAGS) $(SANFLAGS) \
		   -D_GNU_SOURCE -Iinclude -Isrc -I$(BUILD)/gen $(CUDA_CPPFLAGS)
LIB_CFLAGS	:= $(ALL_CFLAGS) -fvisibility=hidden -fno-semantic-interposition
LDLIBS		:= -ldl -lpthread

HOOK_LISTS	:= $(sort $(wildcard hooks/*.hooks))
GEN_OUT		:= $(BUILD)/gen/gh_hooks.h $(BUILD)/gen/gh_hooks.c \
		   $(BUILD)/gen/libgdrhook.map $(BUILD)/gen/test_symbols.c
GEN_STAMP	:= $(BUILD)/gen/.stamp

LIB_SRCS	:= $(sort $(wildcard src/*.c src/hooks/*.c))
LIB_OBJS	:= $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRCS)) \
		   $(BUILD)/obj/gen/gh_hooks.o
LIB		:= $(BUILD)/libgdrhook.so
CORE_A		:= $(BUILD)/libgdrhook-core.a

UNIT_SRCS	:= $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS	:= $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRCS))

.PHONY: all lib test check clean kmod lab asan tsan test-sanitizers
.DEFAULT_GOAL := all

all: lib

lib: $(LIB)

$(GEN_STAMP): $(HOOK_LISTS) scripts/gen-hooks.py
	@mkdir -p $(dir $@)
	$(PYTHON) scripts/gen-hooks.py --out $(BUILD)/gen $(HOOK_LISTS)
	@touch $@

$(GEN_OUT): $(GEN_STAMP)

$(BUILD)/obj/gen/gh_hooks.o: $(GEN_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -MMD -MP -c $(BUILD)/gen/gh_hooks.c -o $@

$(BUILD)/obj/%.o: %.c $(GEN_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJS) $(GEN_STAMP)
	$(CC) -shared -o $@ $(LIB_OBJS) $(SANFLAGS) \
		-Wl,-soname,libgdrhook.so -Wl,-z,defs -Wl,-z,now \
		-Wl,--version-script=$(BUILD)/gen/libgdrhook.map $(LDLIBS)

$(CORE_A): $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/tests/unit/%: tests/unit/%.c $(CORE_A) tests/harness.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests -o $@ $< $(CORE_A) $(LDLIBS)

# Per-component fragments (test doubles, preload tests, benchmarks).
-include $(sort $(wildcard tests/*/rules.mk))
-include $(wildcard $(BUILD)/obj/*/*.d $(BUILD)/obj/*/*/*.d)

kmod:
	$(MAKE) -C src/kmod $(if $(KDIR),KDIR=$(KDIR),)

lab:
	scripts/lab

clean:
	rm -rf $(BUILD)

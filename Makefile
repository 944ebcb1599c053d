# SPDX-License-Identifier: MIT
# gdrhook: user-space build, tests and checks.  The kernel module has its
# own Kbuild under src/kmod (make kmod); the QEMU lab is tests/lab/lab.

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
# Every thread-local of the preloaded library in the static TLS block:
# no __tls_get_addr call on a hook's path (make check).
LIB_CFLAGS	:= $(ALL_CFLAGS) -fvisibility=hidden -fno-semantic-interposition \
		   -ftls-model=initial-exec
LDLIBS		:= -ldl -lpthread

# Quiet by default: one line per file made, the kernel's way ("  CC
# src/pin/mwin.c"); V=1 prints the commands instead, make -s neither.
# Compiler errors and warnings show either way.  Each rule is
#	$(call say,TAG,what)	(the line; empty with V=1 or -s)
#	$(Q)command		(echoed with V=1 only)
V		?= 0
ifeq ($(V),1)
Q		:=
say		=
else
Q		:= @
say		= $(if $(findstring s,$(firstword -$(MAKEFLAGS))),,@printf '  %-7s %s\n' '$(1)' '$(2)')
endif

HOOK_LISTS	:= $(sort $(wildcard hooks/*.hooks))
GEN_OUT		:= $(BUILD)/gen/gh_hooks.h $(BUILD)/gen/gh_hooks.c $(BUILD)/gen/gh_symtab.c \
		   $(BUILD)/gen/libgdrhook.map $(BUILD)/gen/test_symbols.c
GEN_STAMP	:= $(BUILD)/gen/.stamp

# src/ is in layers, one folder each, lowest first in src/layers; a layer
# calls only those below it.  Each is an archive of its folder's objects
# and the generated units src/layers gives it.
LAYERS		:= $(shell sed -n 's/^\([a-z]*\):.*/\1/p' src/layers)
layer_srcs	= $(sort $(wildcard src/$(1)/*.c))
layer_objs	= $(patsubst %.c,$(BUILD)/obj/%.o,$(call layer_srcs,$(1))) \
		  $(patsubst %,$(BUILD)/obj/%.o,$(shell sed -n 's/^$(1):\(.*\)/\1/p' src/layers))
layer_a		= $(BUILD)/layers/libgh-$(1).a
# $(call layer_link,L): the archives of L and the layers below it, for a
# link that may use those and nothing above them.
layers_to	= $(shell sed -n '/^$(1):/{s/:.*//p;q}; s/^\([a-z]*\):.*/\1/p' src/layers)
layer_link	= -Wl,--start-group $(foreach l,$(call layers_to,$(1)),$(call layer_a,$(l))) -Wl,--end-group

LIB_OBJS	:= $(foreach l,$(LAYERS),$(call layer_objs,$(l)))
LIB		:= $(BUILD)/libgdrhook.so
LAYER_AS	:= $(foreach l,$(LAYERS),$(call layer_a,$(l)))

UNIT_SRCS	:= $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS	:= $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRCS))

.PHONY: all lib test check clean kmod checkpatch lab lab-regcache lab-info doc test-suite test-default test-asan test-tsan fake stress
.DEFAULT_GOAL := all

all: lib

lib: $(LIB)

# The event log's schema (hooks/events.table) generates its C side here
# and its checked-in schema and doc tables with `make doc`.
$(GEN_STAMP): $(HOOK_LISTS) scripts/gen-hooks.py hooks/events.table scripts/gen-events.py
	@mkdir -p $(dir $@)
	$(call say,GEN,$(BUILD)/gen)
	$(Q)$(PYTHON) scripts/gen-hooks.py --out $(BUILD)/gen $(HOOK_LISTS)
	$(Q)$(PYTHON) scripts/gen-events.py --out $(BUILD)/gen
	@touch $@

$(GEN_OUT): $(GEN_STAMP)

# -fexceptions: a C++ exception thrown through a wrapper (from a
# subscriber callback) runs its cleanup (gh_call_unwound).
$(BUILD)/obj/gen/gh_hooks.o: $(GEN_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$(BUILD)/gen/gh_hooks.c)
	$(Q)$(CC) $(LIB_CFLAGS) -fexceptions -MMD -MP -c $(BUILD)/gen/gh_hooks.c -o $@

# The release, for gdrhook_version() and gdrhook-info: the gdrpin DKMS
# package's (src/kmod/dkms.conf), one version for the tree.
GH_VERSION	:= $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' src/kmod/dkms.conf)
$(BUILD)/obj/src/face/api.o: LIB_CFLAGS += -DGH_VERSION='"$(GH_VERSION)"'
$(BUILD)/obj/src/face/api.o: src/kmod/dkms.conf
$(BUILD)/obj/gen/gh_symtab.o: $(GEN_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$(BUILD)/gen/gh_symtab.c)
	$(Q)$(CC) $(LIB_CFLAGS) -MMD -MP -c $(BUILD)/gen/gh_symtab.c -o $@

$(BUILD)/obj/gen/gh_events.o: $(GEN_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$(BUILD)/gen/gh_events.c)
	$(Q)$(CC) $(LIB_CFLAGS) -MMD -MP -c $(BUILD)/gen/gh_events.c -o $@

$(BUILD)/obj/%.o: %.c $(GEN_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(LIB_CFLAGS) -MMD -MP -c $< -o $@

# The SONAME's number is the release's major (src/kmod/dkms.conf): within
# it the ABI only grows.  $(LIB) stays the file to preload; the SONAME link
# beside it is what a program linked with -lgdrhook loads.  The stamp
# relinks a build made under another SONAME.
SOVERSION	:= $(firstword $(subst ., ,$(GH_VERSION)))
SONAME		:= libgdrhook.so.$(SOVERSION)
SONAME_STAMP	:= $(BUILD)/gen/soname
$(SONAME_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo $(SONAME) | cmp -s - $@ || echo $(SONAME) >$@
.PHONY: FORCE

$(LIB): $(LIB_OBJS) $(GEN_STAMP) $(SONAME_STAMP)
	$(call say,LD,$@)
	$(Q)$(CC) -shared -o $@ $(LIB_OBJS) $(SANFLAGS) \
		-Wl,-soname,$(SONAME) -Wl,-z,defs -Wl,-z,now \
		-Wl,--version-script=$(BUILD)/gen/libgdrhook.map $(LDLIBS) $(LDFLAGS)
	$(Q)ln -sf $(notdir $@) $(dir $@)$(SONAME)

$(foreach l,$(LAYERS),$(eval $(call layer_a,$(l)): $(call layer_objs,$(l))))
$(LAYER_AS):
	@mkdir -p $(dir $@)
	@rm -f $@
	$(call say,AR,$@)
	$(Q)ar rcs $@ $^

# A unit test links its layer (tests/unit/layers) and those below it
# only: a call that points up fails to link.  UNIT_LIBS: what a test
# links besides (the doubles, tests/unit/rules.mk).
unit_layer	= $(shell sed -n 's/^$(1):[[:space:]]*\([a-z]*\).*/\1/p' tests/unit/layers)
$(BUILD)/tests/unit/%: tests/unit/%.c tests/unit/layers $(LAYER_AS) tests/harness.h \
		$(wildcard tests/unit/*.h)
	@mkdir -p $(dir $@)
	$(if $(call unit_layer,$*),,$(error tests/unit/layers names no layer for $*))
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -Itests -o $@ $< \
		$(call layer_link,$(call unit_layer,$*)) $(UNIT_LIBS) $(LDLIBS)

# Programs run under LD_PRELOAD against the CUDA driver test double.
PRELOAD_SRCS	:= $(sort $(wildcard tests/preload/test_*.c))
PRELOAD_BINS	:= $(patsubst tests/preload/%.c,$(BUILD)/tests/preload/%,$(PRELOAD_SRCS)) \
		   $(BUILD)/tests/preload/test_symbols
PRELOAD_CFLAGS	:= $(ALL_CFLAGS) -Itests -Itests/preload
PRELOAD_LIBS	:= -L$(BUILD) -lgdrhook -L$(BUILD)/fake -lcudart -lcuda -ldl -lpthread
FAKE_LIBS	:= $(BUILD)/fake/libcuda.so $(BUILD)/fake/libcudart.so $(LIB)

$(BUILD)/tests/preload/%: tests/preload/%.c $(wildcard tests/preload/*.h) tests/harness.h $(FAKE_LIBS)
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(PRELOAD_CFLAGS) -o $@ $< $(PRELOAD_LIBS)

# A runtime in a library's local scope: the program links no CUDA library
# and dlopen()s liblocal_rt.so (which links the runtime double) RTLD_LOCAL.
$(BUILD)/tests/preload/liblocal_rt.so: tests/preload/local_rt_lib.c $(FAKE_LIBS)
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(PRELOAD_CFLAGS) -shared -o $@ $< -L$(BUILD)/fake -lcudart

$(BUILD)/tests/preload/test_local_runtime: tests/preload/test_local_runtime.c \
		tests/harness.h $(BUILD)/tests/preload/liblocal_rt.so $(LIB)
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(PRELOAD_CFLAGS) -o $@ $< -L$(BUILD) -lgdrhook -ldl

# A library whose constructor makes the first CUDA calls, and a program
# that links it (test_init runs it under the preload).
$(BUILD)/tests/preload/libearly_cuda.so: tests/preload/early_cuda_lib.c $(FAKE_LIBS)
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(PRELOAD_CFLAGS) -shared -o $@ $< -L$(BUILD)/fake -lcuda

$(BUILD)/tests/preload/early_cuda: tests/preload/early_cuda.c \
		$(BUILD)/tests/preload/libearly_cuda.so
	$(call say,CCLD,$@)
	$(Q)$(CC) $(PRELOAD_CFLAGS) -o $@ $< -L$(BUILD)/tests/preload -learly_cuda \
		-Wl,-rpath,'$$ORIGIN' -Wl,-rpath-link,$(BUILD)/fake

$(BUILD)/tests/preload/test_init: $(BUILD)/tests/preload/early_cuda

# A C++ program that dies of an uncaught exception (test_evlog_proc runs it).
CXX		?= c++
$(BUILD)/tests/preload/die_cxx: tests/preload/die_cxx.cc $(FAKE_LIBS)
	@mkdir -p $(dir $@)
	$(call say,CXXLD,$@)
	$(Q)$(CXX) -O1 -g -Wall -Werror $(CUDA_CPPFLAGS) -o $@ $< -L$(BUILD)/fake -lcuda

$(BUILD)/tests/preload/test_evlog_proc: $(BUILD)/tests/preload/die_cxx

# A subscriber callback that throws through a hook (test_inflight runs it).
$(BUILD)/tests/preload/throw_cxx: tests/preload/throw_cxx.cc include/gdrhook.h $(FAKE_LIBS)
	@mkdir -p $(dir $@)
	$(call say,CXXLD,$@)
	$(Q)$(CXX) -O1 -g -Wall -Werror $(SANFLAGS) $(CUDA_CPPFLAGS) -Iinclude -o $@ $< \
		-L$(BUILD) -lgdrhook -L$(BUILD)/fake -lcuda -lpthread

$(BUILD)/tests/preload/test_inflight: $(BUILD)/tests/preload/throw_cxx

$(BUILD)/tests/preload/test_symbols: $(GEN_STAMP) $(wildcard tests/preload/*.h) tests/harness.h $(FAKE_LIBS)
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(PRELOAD_CFLAGS) -o $@ $(BUILD)/gen/test_symbols.c $(PRELOAD_LIBS)

# Sanitizer runtimes must come first in the process, before the shim.
SAN_RT		:= $(if $(findstring address,$(SAN)),$(shell $(CC) -print-file-name=libasan.so),\
		   $(if $(findstring thread,$(SAN)),$(shell $(CC) -print-file-name=libtsan.so),))
PRELOAD_ENV	:= LD_PRELOAD="$(SAN_RT)$(if $(SAN_RT), ,)$(abspath $(LIB))" \
		   LD_LIBRARY_PATH="$(abspath $(BUILD)/fake):$(abspath $(BUILD)/fakeverbs):$(abspath $(BUILD))" \
		   ASAN_OPTIONS=detect_leaks=0 TSAN_OPTIONS=halt_on_error=1 \
		   UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

# `make` builds every user-space piece: the library, the test doubles, the
# examples and the benchmarks (programs that print figures).
all: examples bench

# Per-component fragments (test doubles, preload tests, benchmarks).
# (the doubles first, tools before examples and install.mk: the others'
# prerequisites name them, and a prerequisite is expanded where it is read.)
DOUBLES_MK	:= tests/fake/rules.mk tests/fakeverbs/rules.mk
-include $(DOUBLES_MK) $(filter-out $(DOUBLES_MK),$(sort $(wildcard tests/*/rules.mk))) \
	scripts/tools/rules.mk examples/rules.mk \
	scripts/python/rules.mk scripts/install.mk scripts/packaging/rules.mk
-include $(wildcard $(BUILD)/obj/*/*.d $(BUILD)/obj/*/*/*.d)

# The GDRHOOK_* rows as the library has them, for the README's table
# (scripts/gen-doc.py): the option files (a GH_OPT_TABLE row each, found
# wherever they are) linked with base alone.
OPT_SRCS	:= $(shell grep -l '^GH_OPT_TABLE' $(foreach l,$(LAYERS),$(call layer_srcs,$(l))))
OPT_ROWS	:= $(BUILD)/gen/opt-rows
$(OPT_ROWS): scripts/opt-rows.c $(patsubst %.c,$(BUILD)/obj/%.o,$(OPT_SRCS)) $(call layer_a,base)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

check: $(LIB) $(LAYER_AS) $(OPT_ROWS)
	scripts/check-exports.sh $(LIB) $(BUILD)/gen/symbols.txt
	$(PYTHON) scripts/check-layers.py --link src/layers $(BUILD)/layers $(CC) $(SANFLAGS)
	$(PYTHON) scripts/check-layers.py src/layers $(BUILD)/obj $(CC) $(ALL_CFLAGS)
	BUILD=$(BUILD) CC="$(CC)" LAYERS_CC="$(CC) $(ALL_CFLAGS)" tests/layers/run
	$(PYTHON) scripts/gen-test-map.py --check tests/README.md $(BUILD)/obj
	tests/testmap/run
	$(PYTHON) scripts/gen-test-map.py --rule
	@readme_tbl=$$($(PYTHON) scripts/gen-doc.py --check README.md $(OPT_ROWS) 2>&1) || { echo "$$readme_tbl"; exit 1; }
	$(PYTHON) scripts/gen-events.py --check --schema hooks/events.schema.json --doc README.md scripts/man/libgdrhook.7

doc: $(LIB) $(OPT_ROWS)
	$(PYTHON) scripts/gen-doc.py README.md $(OPT_ROWS)
	$(PYTHON) scripts/gen-test-map.py tests/README.md $(BUILD)/obj
	$(PYTHON) scripts/gen-events.py --schema hooks/events.schema.json --doc README.md scripts/man/libgdrhook.7

# The CPU test suite: unit tests, the shim against the driver test double
# (every route, every hooked symbol), the trace tool; then again with
# ASan+UBSan and with TSan builds.  test-default also runs the examples,
# gdrhook-info, the Debian packages and every shell block of README.md
# (tests/*/run).
test-suite: all $(UNIT_BINS) $(PRELOAD_BINS) $(BUILD)/fake/selftest
	tests/run $(UNIT_BINS) $(BUILD)/fake/selftest $(BUILD)/fakeverbs/selftest
	env $(PRELOAD_ENV) tests/run $(PRELOAD_BINS)

# One test program, or one case of it (tests/harness.h):
#   make check-one T=test_windows CASE=bind   (CASE: a substring of case
#   names, =name for one case alone; none: every case)
CHECK_ONE	= $(if $(wildcard tests/unit/$(T).c),$(BUILD)/tests/unit/$(T),$(BUILD)/tests/preload/$(T))
.PHONY: check-one
check-one: all $(if $(T),$(CHECK_ONE),)
	@test -n "$(T)" || { echo "make check-one T=<test program> [CASE=<case>]" >&2; exit 2; }
	$(if $(wildcard tests/unit/$(T).c),,env $(PRELOAD_ENV)) $(CHECK_ONE) $(CASE)

test-default:
	$(MAKE) check
	$(MAKE) test-suite
	tests/trace/run $(if $(TRACE_CORE),--need-c,)
	tests/trace/run --reader python
	tests/examples/run
	tests/info/run
	tests/python/run
	tests/gpu/run
	tests/deb/run
	tests/readme/run

# The sanitizer builds are the debug builds: GH_DEBUG turns on the lock
# rule assertions (GH_ASSERT_LOCKED).
test-asan:
	$(MAKE) BUILD=build/asan SAN=address,undefined CFLAGS="-O1 -g -DGH_DEBUG" test-suite

test-tsan:
	$(MAKE) BUILD=build/tsan SAN=thread CFLAGS="-O1 -g -DGH_DEBUG" test-suite

# The random-shape registration stress at full length (tests/preload/
# test_verbs.c, scenario random): STRESS_CYCLES (10^6) cycles on every
# backend, both exposure policies, every peer write checked by the fake
# NIC.  make test runs it at 2*10^4.
STRESS_CYCLES	?= 1000000
stress: all $(PRELOAD_BINS)
	@for b in dmabuf peermem gdrpin none; do \
	  for e in exact allocation; do \
	    echo "== GDRHOOK_BACKEND=$$b GDRHOOK_REMOTE_EXPOSURE=$$e"; \
	    env $(PRELOAD_ENV) RND_CYCLES=$(STRESS_CYCLES) \
	      GDRHOOK_BACKEND=$$b GDRHOOK_REMOTE_EXPOSURE=$$e \
	      $(BUILD)/tests/preload/test_verbs --scenario random || exit 1; \
	  done; \
	done

# What make run and make test need from the machine (scripts/setup):
# installed from Debian when run as root, else named in one line.
SETUP		= CC="$(CC)" CUDA_HOME="$(CUDA_HOME)" scripts/setup
.PHONY: setup
setup:
	@$(SETUP) test

test:
	@$(SETUP) test
	$(MAKE) test-default
	$(MAKE) test-asan
	$(MAKE) test-tsan
	@echo "make test: all suites passed"

kmod:
	$(MAKE) -C src/kmod $(if $(KDIR),KDIR=$(KDIR),)

checkpatch:
	scripts/checkpatch-kmod

# KVER=: the lab's kernel (tests/lab/lab --kver): an installed version, a
# Debian series such as 6.12 (unpacked under build/kernels/), or debug.
LAB_KVER = $(if $(KVER),--kver $(KVER),)

lab:
	tests/lab/lab $(LAB_KVER)

# The registration cache over real rdma-core: soft-RoCE in the lab kernel.
lab-regcache: all
	tests/lab/lab $(LAB_KVER) --run 'tests/lab/regcache/run'

# Real clients (rdma-core, perftest, libfabric, UCX, librdmacm; Debian's
# packages, installed on the host by clients/prepare) unchanged under the shim.
.PHONY: lab-clients
lab-clients: all
	tests/lab/clients/prepare
	tests/lab/lab $(LAB_KVER) --timeout 1800 --run 'tests/lab/clients/run'

# gdrhook-info against rxe0 and gdrpin (fake nv-p2p provider) in the lab.
lab-info: all
	tests/lab/lab --run 'tests/lab/info/run'

clean:
	rm -rf $(BUILD)

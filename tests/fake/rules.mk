# SPDX-License-Identifier: MIT
# Test doubles of the CUDA driver (libcuda.so.1) and runtime
# (libcudart.so.13).  Included by the top Makefile; see tests/fake/README.md.

FAKE_DIR	:= $(BUILD)/fake
FAKE_TYPEDEFS	:= $(if $(CUDA_INC),$(dir $(CUDA_INC))cudaTypedefs.h,)
FAKE_CUDA_SRCS	:= tests/fake/fakecuda_core.c tests/fake/fakecuda_va.c \
		   tests/fake/fakecuda_mem.c tests/fake/fakecuda_pool.c \
		   tests/fake/fakecuda_vmm.c tests/fake/fakecuda_query.c \
		   tests/fake/fakecuda_ipc.c tests/fake/fakecuda_copy.c \
		   tests/fake/fakecuda_graph.c tests/fake/fakecuda_ext.c \
		   tests/fake/fakecuda_gpa.c tests/fake/fakecuda_unmodeled.c \
		   tests/fake/fakecuda_gdr.c tests/fake/fakecuda_event.c
FAKE_CUDA_OBJS	:= $(patsubst tests/fake/%.c,$(FAKE_DIR)/obj/%.o,$(FAKE_CUDA_SRCS))
FAKE_HDRS	:= tests/fake/fakecuda_internal.h tests/fake/fakecuda.h
FAKE_CFLAGS	:= $(ALL_CFLAGS) -fvisibility=hidden -Itests/fake -I$(FAKE_DIR)
FAKE_LIBCUDA	:= $(FAKE_DIR)/libcuda.so.1
FAKE_LIBCUDART	:= $(FAKE_DIR)/libcudart.so.13
FAKE_SELFTEST	:= $(FAKE_DIR)/selftest

.PHONY: fake fake-selftest

all: fake

fake: $(FAKE_LIBCUDA) $(FAKE_DIR)/libcuda.so $(FAKE_LIBCUDART) \
	$(FAKE_DIR)/libcudart.so

$(FAKE_DIR)/fakecuda_gpa.h: tests/fake/gen-gpa.py $(FAKE_TYPEDEFS) \
		$(FAKE_CUDA_SRCS)
	@mkdir -p $(dir $@)
	$(call say,GEN,$@)
	$(Q)$(PYTHON) tests/fake/gen-gpa.py $(FAKE_TYPEDEFS) $@.tmp $(FAKE_CUDA_SRCS)
	@mv $@.tmp $@

$(FAKE_DIR)/obj/%.o: tests/fake/%.c $(FAKE_HDRS)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(FAKE_CFLAGS) -c $< -o $@

$(FAKE_DIR)/obj/fakecuda_gpa.o: $(FAKE_DIR)/fakecuda_gpa.h

# -Bsymbolic-functions: the addresses cuGetProcAddress hands out are the
# fake's own functions even if a preloaded library exports the same names.
$(FAKE_LIBCUDA): $(FAKE_CUDA_OBJS)
	$(call say,LD,$@)
	$(Q)$(CC) -shared -o $@ $(FAKE_CUDA_OBJS) $(SANFLAGS) \
		-Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic-functions \
		-Wl,-z,defs $(LDLIBS)

$(FAKE_DIR)/libcuda.so: | $(FAKE_LIBCUDA)
	$(Q)ln -sf libcuda.so.1 $@

# Like the real runtime: symbols versioned libcudart.so.13, no libcuda
# dependency; RUNPATH $ORIGIN so its dlopen("libcuda.so.1") finds the fake
# next to it.
$(FAKE_DIR)/libcudart.map: tests/fake/rules.mk
	@mkdir -p $(dir $@)
	$(call say,GEN,$@)
	$(Q)printf 'libcudart.so.13 {\n  global: cuda*;\n  local: *;\n};\n' > $@

$(FAKE_LIBCUDART): $(FAKE_DIR)/obj/fakecudart.o $(FAKE_DIR)/libcudart.map
	$(call say,LD,$@)
	$(Q)$(CC) -shared -o $@ $(FAKE_DIR)/obj/fakecudart.o $(SANFLAGS) \
		-Wl,-soname,libcudart.so.13 -Wl,-z,defs \
		-Wl,--version-script=$(FAKE_DIR)/libcudart.map \
		-Wl,-rpath,'$$ORIGIN' $(LDLIBS)

$(FAKE_DIR)/libcudart.so: | $(FAKE_LIBCUDART)
	$(Q)ln -sf libcudart.so.13 $@

$(FAKE_SELFTEST): tests/fake/selftest.c tests/harness.h tests/fake/fakecuda.h \
		$(FAKE_LIBCUDA) $(FAKE_DIR)/libcuda.so
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -Itests -Itests/fake -o $@ $< \
		-L$(FAKE_DIR) -Wl,-rpath,'$$ORIGIN' -lcuda $(LDLIBS)

# the self-test's runtime cases dlopen the runtime double
fake-selftest: $(FAKE_SELFTEST) $(FAKE_LIBCUDART) $(FAKE_DIR)/libcudart.so
	LD_LIBRARY_PATH=$(FAKE_DIR)$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH} \
		$(FAKE_SELFTEST)

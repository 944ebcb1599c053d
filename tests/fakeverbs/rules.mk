# SPDX-License-Identifier: MIT
# Test double of libibverbs (build/fakeverbs/libibverbs.so.1, rdma-core's
# symbol versions) and the preload test that runs the verbs hooks and the
# registration cache end to end against it and the CUDA driver double.
# Included by the top Makefile.  test_verbs finds the double through its
# RUNPATH (dlopen("libibverbs.so.1") searches the caller's RUNPATH), so
# the preload environment needs no change.

FAKEVERBS_DIR	:= $(BUILD)/fakeverbs
FAKEVERBS_LIB	:= $(FAKEVERBS_DIR)/libibverbs.so.1

.PHONY: fakeverbs
all: fakeverbs
fakeverbs: $(FAKEVERBS_LIB)

FAKEVERBS_OBJS	:= $(FAKEVERBS_DIR)/fakeverbs.o $(FAKEVERBS_DIR)/fakeverbs_qp.o \
		   $(FAKEVERBS_DIR)/fakeverbs_provider.o
FAKEVERBS_OBJS	+= $(FAKEVERBS_DIR)/fakeverbs_cost.o
$(FAKEVERBS_OBJS): tests/fakeverbs/fakeverbs_cost.h

$(FAKEVERBS_OBJS): $(FAKEVERBS_DIR)/%.o: tests/fakeverbs/%.c tests/fakeverbs/fakeverbs.h \
		tests/fakeverbs/fakeverbs_internal.h tests/fake/fakecuda.h
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) -fvisibility=hidden -Itests/fake -Itests/fakeverbs -c $< -o $@

$(FAKEVERBS_LIB): $(FAKEVERBS_OBJS) tests/fakeverbs/libibverbs.map
	$(call say,LD,$@)
	$(Q)$(CC) -shared -o $@ $(FAKEVERBS_OBJS) $(SANFLAGS) \
		-Wl,-soname,libibverbs.so.1 -Wl,-z,defs \
		-Wl,--version-script=tests/fakeverbs/libibverbs.map $(LDLIBS)

$(BUILD)/tests/preload/test_verbs $(BUILD)/tests/preload/test_races \
		$(BUILD)/tests/preload/test_windows $(BUILD)/tests/preload/test_inflight: \
		$(BUILD)/tests/preload/%: tests/preload/%.c \
		$(wildcard tests/preload/*.h) tests/harness.h $(FAKE_LIBS) $(FAKEVERBS_LIB)
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(PRELOAD_CFLAGS) -Itests/fake -Itests/fakeverbs -o $@ $< $(PRELOAD_LIBS) \
		-Wl,--enable-new-dtags -Wl,-rpath,'$$ORIGIN/../../fakeverbs'

# The double's own test: queue pairs, CQs and memory windows, linked
# against it like an application linked against rdma-core (no preload).
FAKEVERBS_SELFTEST := $(FAKEVERBS_DIR)/selftest

.PHONY: fakeverbs-selftest
all: $(FAKEVERBS_SELFTEST)
fakeverbs-selftest: $(FAKEVERBS_SELFTEST)

$(FAKEVERBS_SELFTEST): tests/fakeverbs/selftest.c tests/harness.h \
		tests/verbs_qp.h tests/fakeverbs/fakeverbs.h $(FAKEVERBS_LIB)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -Itests -Itests/fakeverbs -o $@ $< $(FAKEVERBS_LIB) \
		$(SANFLAGS) -Wl,-rpath,'$$ORIGIN' -ldl -lpthread

# SPDX-License-Identifier: MIT
# Benchmarks (included by the top-level Makefile).  make bench builds them;
# they print figures and are not part of make test.
#
# bench_registry compares against UCX's page table when <ucs/datastruct/
# pgtable.h> and libucs are found (Debian: libucx-dev); GH_BENCH_UCX=0
# turns that off.  It links src/registry.c directly so that it builds
# even while other parts of the library do not.

GH_BENCH_UCX	?= $(shell echo 'int main(void) { return 0; }' | \
		     $(CC) -include ucs/datastruct/pgtable.h -x c - \
		     -o /dev/null -lucs >/dev/null 2>&1 && echo 1 || echo 0)
BENCH_UCX_CFLAGS := $(if $(filter 1,$(GH_BENCH_UCX)),-DGH_BENCH_HAVE_UCX,)
BENCH_UCX_LIBS	:= $(if $(filter 1,$(GH_BENCH_UCX)),-lucs,)

BENCH_BINS	:= $(BUILD)/tests/bench/bench_registry

.PHONY: bench
bench: $(BENCH_BINS)

$(BUILD)/tests/bench/bench_registry: tests/bench/bench_registry.c \
		src/registry.c src/registry.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(BENCH_UCX_CFLAGS) -o $@ $< src/registry.c \
		$(BENCH_UCX_LIBS) $(LDLIBS)

# SPDX-License-Identifier: MIT
# Benchmarks (included by the top-level Makefile).  make bench builds them;
# they print figures and are not part of make test.
#
# bench_registry compares against UCX's page table when <ucs/datastruct/
# pgtable.h> and libucs are found (Debian: libucx-dev); GH_BENCH_UCX=0
# turns that off.  Like the unit tests, each benchmark of one layer links
# that layer's archive and those below it only.

GH_BENCH_UCX	?= $(shell echo 'int main(void) { return 0; }' | \
		     $(CC) -include ucs/datastruct/pgtable.h -x c - \
		     -o /dev/null -lucs >/dev/null 2>&1 && echo 1 || echo 0)
BENCH_UCX_CFLAGS := $(if $(filter 1,$(GH_BENCH_UCX)),-DGH_BENCH_HAVE_UCX,)
BENCH_UCX_LIBS	:= $(if $(filter 1,$(GH_BENCH_UCX)),-lucs,)

BENCH_BINS	:= $(BUILD)/tests/bench/bench_registry
# the helpers the programs share (header-only)
BENCH_CUDA_H	:= tests/bench/bench_cuda.h tests/bench/bench_util.h

.PHONY: bench
bench: $(BENCH_BINS)

$(BUILD)/tests/bench/bench_registry: tests/bench/bench_registry.c \
		tests/bench/bench_util.h $(LAYER_AS)
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(BENCH_UCX_CFLAGS) -o $@ $< \
		$(call layer_link,registry) \
		$(BENCH_UCX_LIBS) $(LDLIBS)

# ---- bench_driver: driver-side benchmark (tests/bench/bench-gpu runs it) ----
# Links the real CUDA runtime and driver; at build time the driver is the
# toolkit's stub, so it builds on a machine with no GPU.  RUNPATH (not
# RPATH) to the toolkit: LD_LIBRARY_PATH (build/fake) still wins.
BENCH_DRIVER	:= $(BUILD)/tests/bench/bench_driver
BENCH_CUDA_LIB	?= $(CUDA_HOME)/lib64
BENCH_DRIVER_LIBS := -L$(BENCH_CUDA_LIB) -L$(BENCH_CUDA_LIB)/stubs \
		     -Wl,--enable-new-dtags -Wl,-rpath,$(BENCH_CUDA_LIB) \
		     -lcudart -lcuda -ldl -lpthread
# The toolkit's libcudart is optional (README, Requirements): without it
# make builds everything else and says what it left out.
BENCH_HAVE_CUDART := $(if $(wildcard $(BENCH_CUDA_LIB)/libcudart.so),1,)

.PHONY: bench-driver
ifeq ($(BENCH_HAVE_CUDART),1)
bench: $(BENCH_DRIVER)
else
bench: bench-no-cudart
.PHONY: bench-no-cudart
bench-no-cudart:
	@echo "bench: $(BENCH_CUDA_LIB)/libcudart.so not found: bench_driver, bench_queries and bench_alloc_path not built (they link the CUDA runtime)"
endif
bench-driver: $(BENCH_DRIVER)

$(BENCH_DRIVER): tests/bench/bench_driver.c tests/bench/drvsym.h $(BENCH_CUDA_H) \
		include/gdrhook.h include/gdrhook_preload.h
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< $(BENCH_DRIVER_LIBS)
# ---- end bench_driver ----
# ---- bench_regcache: registration cache on a real verbs stack ----
# Links the CUDA driver double and libibverbs; runs in the QEMU lab
# (REGCACHE_BENCH=1 tests/lab/regcache/run, see the file's header).
BENCH_REGCACHE	:= $(BUILD)/tests/bench/bench_regcache

.PHONY: bench-regcache
bench: $(BENCH_REGCACHE)
bench-regcache: $(BENCH_REGCACHE)

$(BENCH_REGCACHE): tests/bench/bench_regcache.c tests/bench/bench_util.h \
		tests/verbs_qp.h $(BUILD)/fake/libcuda.so
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -Itests -o $@ $< -L$(BUILD)/fake -lcuda -libverbs $(LDLIBS)
# ---- end bench_regcache ----
# ---- bench_queries: pointer queries, gdrhook vs the driver ----
# Linked like bench_driver (the toolkit's runtime and driver stub); run it
# under LD_PRELOAD=libgdrhook.so on the GPU: it starts itself again
# without the preload for the driver's figures and prints both.
BENCH_QUERIES	:= $(BUILD)/tests/bench/bench_queries

.PHONY: bench-queries
ifeq ($(BENCH_HAVE_CUDART),1)
bench: $(BENCH_QUERIES)
endif
bench-queries: $(BENCH_QUERIES)

$(BENCH_QUERIES): tests/bench/bench_queries.c tests/bench/drvsym.h \
		tests/bench/bench_util.h
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< -Wl,--no-as-needed $(BENCH_DRIVER_LIBS)
# ---- end bench_queries ----
# ---- bench_alloc_path: the allocation path against the pass-through ----
# Linked like bench_driver; it runs itself again as native, pass-through
# (GDRHOOK_ENABLE=0), library and library + log children (bench-gpu
# --alloc-path; the file's header).
BENCH_ALLOC_PATH := $(BUILD)/tests/bench/bench_alloc_path

.PHONY: bench-alloc-path
ifeq ($(BENCH_HAVE_CUDART),1)
bench: $(BENCH_ALLOC_PATH)
endif
bench-alloc-path: $(BENCH_ALLOC_PATH)

$(BENCH_ALLOC_PATH): tests/bench/bench_alloc_path.c $(BENCH_CUDA_H) include/gdrhook.h \
		include/gdrhook_preload.h
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< $(BENCH_DRIVER_LIBS)
# ---- end bench_alloc_path ----
# ---- bench_evlog: event log writer throughput, drop vs block ----
BENCH_EVLOG	:= $(BUILD)/tests/bench/bench_evlog

.PHONY: bench-evlog
bench: $(BENCH_EVLOG)
bench-evlog: $(BENCH_EVLOG)

$(BENCH_EVLOG): tests/bench/bench_evlog.c $(LAYER_AS)
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< \
		$(call layer_link,evlog) $(LDLIBS)
# ---- end bench_evlog ----
# ---- bench_rcache: the registration cache's CPU cost next to UCX's ----
# Links the library's objects (like the unit tests) and a no-op NIC; UCX
# (libucx-dev's header for the types) is dlopen'ed at run time, so the
# build never needs libucs.
BENCH_RCACHE	:= $(BUILD)/tests/bench/bench_rcache

.PHONY: bench-rcache
bench: $(BENCH_RCACHE)
bench-rcache: $(BENCH_RCACHE)

$(BENCH_RCACHE): tests/bench/bench_rcache.c tests/bench/bench_util.h $(LAYER_AS)
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -Itests -o $@ $< \
		$(call layer_link,rcache) $(LDLIBS)
# ---- end bench_rcache ----

# ---- spin_shim: a hook that only takes time (the anchor for per-call cost) ----
SPIN_SHIM	:= $(BUILD)/tests/bench/libspin_shim.so
bench: $(SPIN_SHIM)
$(SPIN_SHIM): tests/bench/spin_shim.c
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(filter-out -fvisibility=hidden,$(ALL_CFLAGS)) -shared -o $@ $< -ldl -lpthread
# ---- bench_exposure: register-per-transfer under exact exposure, modelled ----
# Runs on the doubles only (the fake NIC's cost profiles and peer writes):
# linked against the CUDA driver double and the fake libibverbs, found
# through RUNPATH; it runs itself again with and without the shim.
BENCH_EXPOSURE	:= $(BUILD)/tests/bench/bench_exposure

.PHONY: bench-exposure
bench: $(BENCH_EXPOSURE)
bench-exposure: $(BENCH_EXPOSURE)

$(BENCH_EXPOSURE): tests/bench/bench_exposure.c tests/bench/bench_util.h \
		tests/fakeverbs/fakeverbs.h \
		tests/fakeverbs/fakeverbs_cost.h $(BUILD)/fake/libcuda.so $(FAKEVERBS_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -Itests/fakeverbs -o $@ $< -L$(BUILD)/fake -lcuda \
		$(FAKEVERBS_LIB) -Wl,--enable-new-dtags \
		-Wl,-rpath,'$$ORIGIN/../../fake:$$ORIGIN/../../fakeverbs' $(LDLIBS)
# ---- end bench_exposure ----
# ---- bench_liveness: registrations beside threads that allocate ----
# Linked like bench_regcache (the CUDA driver double's soname, libibverbs);
# run with build/fake (no GPU) and build/fakeverbs (no RDMA device) on
# LD_LIBRARY_PATH: see the file's header.
BENCH_LIVENESS	:= $(BUILD)/tests/bench/bench_liveness

.PHONY: bench-liveness
bench: $(BENCH_LIVENESS)
# what its command line uses: the library and both doubles
bench-liveness: $(BENCH_LIVENESS) $(LIB) $(FAKEVERBS_LIB)

$(BENCH_LIVENESS): tests/bench/bench_liveness.c tests/bench/bench_util.h \
		$(BUILD)/fake/libcuda.so
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< -L$(BUILD)/fake -lcuda -libverbs $(LDLIBS)
# ---- end bench_liveness ----
# ---- drvcount: calls that reach the CUDA driver, per entry point ----
# Preloaded (tests/gpu/mpi-check); linked against the driver double's
# soname, libcuda.so.1, so the rest of the driver resolves through it
# when gdrhook loads it as GDRHOOK_LIBCUDA.
DRVCOUNT	:= $(BUILD)/tests/bench/libdrvcount.so
.PHONY: drvcount
bench: $(DRVCOUNT)
drvcount: $(DRVCOUNT)
$(DRVCOUNT): tests/bench/drvcount.c $(BUILD)/fake/libcuda.so
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(filter-out -fvisibility=hidden,$(ALL_CFLAGS)) -shared -o $@ $< \
		-Wl,--no-as-needed -L$(BUILD)/fake -lcuda -Wl,--as-needed -ldl
# ---- end drvcount ----
# ---- null_classify: the floor of a preloaded answer to buffer checks ----
# Preloaded by tests/gpu/mpi-check --small, host buffers only (the file's
# header says why it is wrong for anything else).
NULL_CLASSIFY	:= $(BUILD)/tests/bench/libnull_classify.so
.PHONY: null-classify
bench: $(NULL_CLASSIFY)
null-classify: $(NULL_CLASSIFY)
$(NULL_CLASSIFY): tests/bench/null_classify.c
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(filter-out -fvisibility=hidden,$(ALL_CFLAGS)) -shared -o $@ $<
# ---- end null_classify ----
# ---- bench_classify: an MPI's host-buffer check, gdrhook against the floor ----
# Linked against the CUDA driver double's soname (the real driver on a
# GPU host); it runs itself under each library (the file's header).
BENCH_CLASSIFY	:= $(BUILD)/tests/bench/bench_classify
.PHONY: bench-classify
bench: $(BENCH_CLASSIFY)
bench-classify: $(BENCH_CLASSIFY) $(NULL_CLASSIFY) $(LIB)
$(BENCH_CLASSIFY): tests/bench/bench_classify.c tests/bench/bench_util.h \
		$(BUILD)/fake/libcuda.so
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< -L$(BUILD)/fake -lcuda $(LDLIBS)
# ---- end bench_classify ----
# ---- bench_mpi: MPI point-to-point, host or device buffers ----
# Not part of make bench (CI has no MPI): make bench-mpi MPICC=PATH/mpicc
# (tests/gpu/mpi-check does).  The CUDA driver is found at run time; the
# MPI's headers are not ours, so their warnings do not stop the build.
BENCH_MPI	:= $(BUILD)/tests/bench/bench_mpi
MPICC		?= mpicc
.PHONY: bench-mpi
bench-mpi: $(BENCH_MPI)
$(BENCH_MPI): tests/bench/bench_mpi.c include/gdrhook.h
	@mkdir -p $(dir $@)
	$(call say,MPICC,$@)
	$(Q)$(MPICC) -std=gnu11 -O2 -g $(filter-out -Werror,$(WARN)) -D_GNU_SOURCE -Iinclude -o $@ $< -ldl
# ---- end bench_mpi ----

# SPDX-License-Identifier: MIT
# Examples (examples/README.md), and `make run`: one of them under the
# shim, on the GPU when there is one, else on the CUDA test doubles in
# $(BUILD)/fake; then a digest of the trace summary.
#
#   make examples                      build every example this machine can
#   make run [EXAMPLE=runtime_api]     driver_api (default), runtime_api,
#                                      regcache_churn or torch_train
#
# regcache_churn with no RDMA device runs on the fake NIC
# (tests/fakeverbs) and the CUDA test double, and says so: the cache is
# seen working (hits, misses, stale registrations averted) anywhere.
#
# The programs link the doubles' libcuda.so.1 / libcudart.so.13 (the real
# SONAMEs) with no RUNPATH: the same binary runs against the real driver
# and runtime on a GPU machine, or against the doubles with
# LD_LIBRARY_PATH=$(BUILD)/fake.  regcache_churn links libibverbs, whose
# headers the library needs anyway (libibverbs-dev, scripts/setup).
#
# `make run` first runs scripts/setup (what it needs from Debian), then
# builds only what the example needs: not the benchmarks, no libcudart.

EXAMPLE		?= driver_api
EXAMPLE_LOG	?= $(BUILD)/run/trace.jsonl
EXAMPLES_DIR	:= $(BUILD)/examples
EXAMPLES_ALL	:= driver_api runtime_api regcache_churn torch_train
EXAMPLES_HDRS	:= include/gdrhook.h include/gdrhook_preload.h

EXAMPLES_BINS	:= $(EXAMPLES_DIR)/driver_api $(EXAMPLES_DIR)/runtime_api \
		   $(EXAMPLES_DIR)/regcache_churn

$(EXAMPLES_DIR)/driver_api: examples/driver_api.c $(EXAMPLES_HDRS) $(BUILD)/fake/libcuda.so
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< -L$(BUILD)/fake -lcuda -ldl

$(EXAMPLES_DIR)/runtime_api: examples/runtime_api.c $(EXAMPLES_HDRS) $(BUILD)/fake/libcudart.so
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< -L$(BUILD)/fake -lcudart -ldl

$(EXAMPLES_DIR)/regcache_churn: examples/regcache_churn.c $(EXAMPLES_HDRS) $(BUILD)/fake/libcuda.so
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< -L$(BUILD)/fake -lcuda -libverbs -ldl

examples: $(EXAMPLES_BINS)

# The GPU is used when `nvidia-smi -L` works; runtime_api then needs the
# real CUDA 13 runtime (libcudart.so.13 known to ld.so, or in
# $(CUDA_HOME)/lib64), else it runs on the doubles.
EX_IS_C		:= $(filter-out torch_train,$(filter $(EXAMPLE),$(EXAMPLES_ALL)))
EX_CMD		:= $(if $(EX_IS_C),$(EXAMPLES_DIR)/$(EXAMPLE),$(PYTHON) examples/torch_train.py)

# The build is silent (make -s; V=1 shows the commands) and the run
# short: the program's output, its counters after it (GDRHOOK_STATS=1,
# the program's stderr into the same stream), a digest of the trace
# summary (run-summary.awk).
run:
	@$(if $(filter $(EXAMPLE),$(EXAMPLES_ALL)),:,echo "run: EXAMPLE=$(EXAMPLE)? one of: $(EXAMPLES_ALL)"; exit 2)
	@$(SETUP) run
	@echo "== make: the library, the CUDA test doubles, $(EXAMPLE)$(if $(filter 1,$(V)),, (make V=1 run shows the commands))"
	@$(MAKE) --no-print-directory $(if $(filter 1,$(V)),,-s) run-example

# What the run needs and no more (make run has checked the machine).
# trace-tool (scripts/tools/rules.mk): by name, so this list does not
# depend on which fragment the Makefile reads first.
run-example: $(LIB) trace-tool fake $(if $(EX_IS_C),$(EXAMPLES_DIR)/$(EXAMPLE),) \
		$(if $(filter regcache_churn,$(EXAMPLE)),fakeverbs,)
	@mkdir -p $(dir $(EXAMPLE_LOG)); rm -f $(EXAMPLE_LOG)
	@fake=$(abspath $(BUILD)/fake); \
	if nvidia-smi -L >/dev/null 2>&1; then \
		echo "== $(EXAMPLE) on the GPU: $$(nvidia-smi -L | head -1)"; libpath=; \
		if [ "$(EXAMPLE)" = runtime_api ] && \
		   ! ldconfig -p 2>/dev/null | grep -q 'libcudart\.so\.13 '; then \
			if [ -e "$(CUDA_HOME)/lib64/libcudart.so.13" ]; then \
				libpath="$(CUDA_HOME)/lib64"; \
			else \
				echo "== no CUDA 13 runtime (libcudart.so.13) here: on the test doubles ($(BUILD)/fake)"; \
				libpath=$$fake; \
			fi; \
		fi; \
	else \
		echo "== $(EXAMPLE): no GPU here: on the CUDA test doubles ($(BUILD)/fake)"; \
		libpath=$$fake; \
	fi; \
	if [ "$(EXAMPLE)" = regcache_churn ] && \
	   ! ls /sys/class/infiniband/* >/dev/null 2>&1; then \
		echo "== no RDMA device here (/sys/class/infiniband): on the fake NIC ($(BUILD)/fakeverbs, device fakenic0) with the CUDA test double ($(BUILD)/fake)"; \
		libpath=$$fake:$(abspath $(FAKEVERBS_DIR)); \
	fi; \
	LD_LIBRARY_PATH=$$libpath$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH} \
		LD_PRELOAD=$(abspath $(LIB)) \
		GDRHOOK_TRACE=$(EXAMPLE_LOG) GDRHOOK_STATS=1 $(EX_CMD) 2>&1
	@if [ -s $(EXAMPLE_LOG) ]; then \
		echo "== $(TRACE_TOOL) summary $(EXAMPLE_LOG), in part (the command prints all of it)"; \
		out=$$($(PYTHON) $(TRACE_TOOL) summary $(EXAMPLE_LOG)) || exit $$?; \
		printf '%s\n' "$$out" | awk -f examples/run-summary.awk; \
	else \
		echo "== no GPU allocation was made: no event log ($(EXAMPLE_LOG))"; \
	fi

.PHONY: examples run run-example

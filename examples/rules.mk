# SPDX-License-Identifier: MIT
# Examples, and `make run`: one of them under the shim, on the GPU when
# there is one, else on the CUDA driver test double; then the summary.
EXAMPLE_LOG	?= $(BUILD)/run/trace.jsonl

$(BUILD)/examples/driver_api: examples/driver_api.c include/gdrhook_preload.h $(BUILD)/fake/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< -L$(BUILD)/fake -lcuda -ldl

examples: $(BUILD)/examples/driver_api

run: all $(BUILD)/examples/driver_api
	@mkdir -p $(dir $(EXAMPLE_LOG)); rm -f $(EXAMPLE_LOG)
	@if nvidia-smi -L >/dev/null 2>&1; then \
		echo "== on the GPU: $$(nvidia-smi -L | head -1)"; libpath=; \
	else \
		echo "== no GPU here: on the CUDA driver test double ($(BUILD)/fake)"; \
		libpath=$(abspath $(BUILD)/fake); \
	fi; \
	LD_LIBRARY_PATH=$$libpath LD_PRELOAD=$(abspath $(LIB)) \
		GDRHOOK_LOG=$(EXAMPLE_LOG) GDRHOOK_STATS=1 $(BUILD)/examples/driver_api
	@echo "== scripts/gdrhook-trace summary $(EXAMPLE_LOG)"
	@$(PYTHON) scripts/gdrhook-trace summary $(EXAMPLE_LOG)

.PHONY: examples run

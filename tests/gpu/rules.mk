# SPDX-License-Identifier: MIT
# Programs for tests/gpu (included by the top-level Makefile).
# ptrattr_table prints every pointer attribute of every kind of memory;
# tests/gpu/ptrattr-check diffs it native vs under the shim.  Linked with
# whatever libcuda/libcudart the loader finds (the doubles at build time);
# the runtime is needed although only found with dlsym (the doubles lack
# cudaPointerGetAttributes).
PTRATTR_TABLE	:= $(BUILD)/tests/gpu/ptrattr_table

.PHONY: ptrattr-table
all: $(PTRATTR_TABLE)
ptrattr-table: $(PTRATTR_TABLE)

$(PTRATTR_TABLE): tests/gpu/ptrattr_table.c $(BUILD)/fake/libcuda.so \
		$(BUILD)/fake/libcudart.so
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< -L$(BUILD)/fake \
		-Wl,--no-as-needed -lcudart -Wl,--as-needed -lcuda -ldl

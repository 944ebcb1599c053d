# SPDX-License-Identifier: MIT
# gdrhook-trace as one executable file: the gdrhook_trace package in a
# Python zip application (stdlib zipapp), with the tree's version inside.
# The generated event schema (hooks/events.schema.json), when the tree
# has one, goes in too and replaces the built-in table of its version.

TRACE_TOOL	:= $(BUILD)/gdrhook-trace
TRACE_PKG	:= scripts/tools/gdrhook_trace
TRACE_SRCS	:= $(sort $(wildcard $(TRACE_PKG)/*.py))
TRACE_SCHEMA	:= $(wildcard hooks/events.schema.json)

all: $(TRACE_TOOL)

$(TRACE_TOOL): $(TRACE_SRCS) $(TRACE_SCHEMA) src/kmod/dkms.conf scripts/tools/rules.mk
	@rm -rf $@.d && mkdir -p $@.d/gdrhook_trace
	$(call say,ZIPAPP,$@)
	$(Q)cp $(TRACE_SRCS) $(TRACE_SCHEMA) $@.d/gdrhook_trace/
	$(Q)cp $(TRACE_PKG)/__main__.py $@.d/__main__.py
	$(Q)echo 'VERSION = "$(GDRHOOK_VERSION)"' > $@.d/gdrhook_trace/_version.py
	$(Q)$(PYTHON) -m zipapp $@.d -o $@.tmp -p "/usr/bin/env python3" -c
	@rm -rf $@.d
	$(Q)mv $@.tmp $@

# Its optional reader in C ($(TRACE_PKG)/_core*.c), a Python extension on
# the stable ABI: built where $(PYTHON)'s headers are, found by the tool in
# lib/gdrhook-trace beside the build tree's gdrhook-trace, or in
# ../lib/gdrhook-trace from the installed one (gdrhook_trace/core.py).
# Without it the tool reads the same logs in pure Python, slower.  Never
# built with sanitizers: python3 itself is not.
TRACE_CORE_REL	:= lib/gdrhook-trace/_core.abi3.so
PY_INCLUDE	:= $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
TRACE_CORE	:= $(if $(wildcard $(PY_INCLUDE)/Python.h),$(BUILD)/$(TRACE_CORE_REL),)

all: $(TRACE_CORE)

TRACE_CORE_SRCS	:= $(TRACE_PKG)/_core.c $(TRACE_PKG)/_core_sort.c

$(BUILD)/$(TRACE_CORE_REL): $(TRACE_CORE_SRCS) $(TRACE_PKG)/_core.h scripts/tools/rules.mk
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) -std=gnu11 -shared -fPIC -O2 -g $(WARN) $(CPPFLAGS) -I$(PY_INCLUDE) -Wl,-z,now $(LDFLAGS) -o $@ $(TRACE_CORE_SRCS)

# The shipped command gdrhook-info ($(BUILD)/gdrhook-info) and `make info`.
# Included by the top Makefile.  It links libgdrhook.so and finds it next
# to itself (the build tree) or in ../lib (an installed tree).

INFO_BIN	:= $(BUILD)/gdrhook-info

.PHONY: info
all: $(INFO_BIN)

$(INFO_BIN): scripts/tools/gdrhook-info.c include/gdrhook.h $(LIB)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< -L$(BUILD) -lgdrhook $(SANFLAGS) \
		-Wl,--enable-new-dtags -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../lib'

# This machine as it is: the real driver and RDMA devices, if any.
info: $(INFO_BIN)
	$(INFO_BIN)

# gdrhook-trace and its C reader, for a recipe that runs the tool (make
# run): a name, so a fragment read before this one can depend on it.
.PHONY: trace-tool
trace-tool: $(TRACE_TOOL) $(TRACE_CORE)

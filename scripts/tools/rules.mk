# SPDX-License-Identifier: MIT
# The shipped command gdrhook-info ($(BUILD)/gdrhook-info) and `make info`.
# Included by the top Makefile.  It links libgdrhook.so and finds it next
# to itself (the build tree) or in ../lib (an installed tree).

INFO_BIN	:= $(BUILD)/gdrhook-info

.PHONY: info
all: $(INFO_BIN)

$(INFO_BIN): scripts/tools/gdrhook-info.c include/gdrhook.h $(LIB)
	$(CC) $(ALL_CFLAGS) -o $@ $< -L$(BUILD) -lgdrhook $(SANFLAGS) \
		-Wl,--enable-new-dtags -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../lib'

# This machine as it is: the real driver and RDMA devices, if any.
info: $(INFO_BIN)
	$(INFO_BIN)

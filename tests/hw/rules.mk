# SPDX-License-Identifier: MIT
# tests/hw: programs for a machine with a GPU and an RDMA NIC, not run by
# CI (README.md there).  Built by make where the CUDA and libibverbs
# headers are found (libcuda is opened at run time); make test-default
# runs their check against the doubles (tests/hw/run).

HW_CALIBRATE	:= $(BUILD)/tests/hw/calibrate
HW_HAVE_HDRS	:= $(if $(and $(CUDA_INC),$(wildcard /usr/include/infiniband/verbs.h)),1,)

.PHONY: hw hw-check
ifeq ($(HW_HAVE_HDRS),1)
all: hw
hw: $(HW_CALIBRATE)

$(HW_CALIBRATE): tests/hw/calibrate.c tests/verbs_qp.h
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -Itests -o $@ $< -libverbs $(LDLIBS)

# The calibration against the fake NIC and the CUDA double: the modelled
# clock must give the cost profile's own constants back, and the rows
# must compile as the table's.
hw-check: $(HW_CALIBRATE) $(FAKEVERBS_LIB) $(BUILD)/fake/libcuda.so
	BUILD=$(BUILD) CC="$(CC)" tests/hw/run
test-default: hw-check
else
hw hw-check:
	@echo "hw: cuda.h or infiniband/verbs.h not found: tests/hw/calibrate not built"
endif

# SPDX-License-Identifier: MIT
# Unit tests whose module calls the CUDA driver or libibverbs: linked
# with the driver double (tests/fake) and the libibverbs double
# (tests/fakeverbs), found through the program's RUNPATH, as a program
# linked with libcuda and libibverbs finds them.  The platform layer
# reaches them as it reaches the real ones (dlopen of libcuda.so.1,
# RTLD_NEXT for the verbs).  Included by the top Makefile.

UNIT_DOUBLES	:= test_audit test_mwin test_pin_choose test_pin_dmabuf \
		   test_pin_none test_pin_peermem test_syncmemops
UNIT_DOUBLES_BINS := $(patsubst %,$(BUILD)/tests/unit/%,$(UNIT_DOUBLES))

$(UNIT_DOUBLES_BINS): $(FAKE_LIBCUDA) $(FAKE_DIR)/libcuda.so \
	$(FAKEVERBS_LIB) tests/fake/fakecuda.h tests/fakeverbs/fakeverbs.h
$(UNIT_DOUBLES_BINS): UNIT_LIBS = -Itests/fake -Itests/fakeverbs \
	-Wl,--push-state,--no-as-needed -L$(FAKE_DIR) -lcuda \
	$(FAKEVERBS_LIB) -Wl,--pop-state -Wl,--enable-new-dtags \
	-Wl,-rpath,'$$ORIGIN/../../fake' -Wl,-rpath,'$$ORIGIN/../../fakeverbs'

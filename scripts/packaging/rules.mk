# SPDX-License-Identifier: MIT
# make deb: Debian packages in $(BUILD)/deb (scripts/packaging/deb/build-debs),
# built from a `make install DESTDIR=... PREFIX=/usr` tree with dpkg-deb.
# Included by the top Makefile.

DEB_DIR		:= $(BUILD)/deb
DEB_ARCH	= $(shell dpkg --print-architecture 2>/dev/null || echo amd64)

.PHONY: deb
deb: $(LIB)
	@command -v dpkg-deb >/dev/null || { echo "deb: dpkg-deb not found (apt-get install dpkg)"; exit 1; }
	rm -rf $(DEB_DIR)/stage
	$(MAKE) --no-print-directory install PREFIX=/usr \
		DESTDIR=$(abspath $(DEB_DIR)/stage)
	scripts/packaging/deb/build-debs $(abspath $(DEB_DIR)/stage) \
		$(abspath $(DEB_DIR)) $(GH_VERSION) $(DEB_ARCH)

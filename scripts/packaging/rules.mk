# SPDX-License-Identifier: MIT
# make deb: Debian packages in $(BUILD)/deb (scripts/packaging/deb/build-debs),
# built from a `make install DESTDIR=... PREFIX=/usr` tree with dpkg-deb,
# the library in the multiarch directory (found by the loader without a
# RUNPATH).  Included by the top Makefile.

DEB_DIR		:= $(BUILD)/deb
DEB_ARCH	= $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB_MULTIARCH	= $(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || $(CC) -print-multiarch)

.PHONY: deb
deb: $(LIB)
	@command -v dpkg-deb >/dev/null || { echo "deb: dpkg-deb not found (apt-get install dpkg)"; exit 1; }
	rm -rf $(DEB_DIR)/stage
	@command -v dpkg-shlibdeps >/dev/null || { echo "deb: dpkg-shlibdeps not found (apt-get install dpkg-dev)"; exit 1; }
	$(MAKE) --no-print-directory install PREFIX=/usr \
		LIBDIR=/usr/lib/$(DEB_MULTIARCH) INFO_RPATH= \
		DESTDIR=$(abspath $(DEB_DIR)/stage)
	DEB_MAINTAINER="$(DEB_MAINTAINER)" scripts/packaging/deb/build-debs $(abspath $(DEB_DIR)/stage) \
		$(abspath $(DEB_DIR)) $(GH_VERSION) $(DEB_ARCH) $(DEB_MULTIARCH)

# SPDX-License-Identifier: MIT
# make deb: Debian packages in $(BUILD)/deb (scripts/packaging/deb/build-debs),
# built from a `make install DESTDIR=... PREFIX=/usr` tree with dpkg-deb,
# the library in the multiarch directory (found by the loader without a
# RUNPATH).  Compiled apart ($(BUILD)/deb/build) with dpkg-buildflags'
# flags, hardening=+all, as dpkg-buildpackage compiles it (debian/rules).
# Included by the top Makefile.

DEB_DIR		:= $(BUILD)/deb
DEB_ARCH	= $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB_MULTIARCH	= $(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || $(CC) -print-multiarch)
deb_flag	= $(shell DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get $(1))

.PHONY: deb
deb:
	@command -v dpkg-deb >/dev/null || { echo "deb: dpkg-deb not found (apt-get install dpkg)"; exit 1; }
	@command -v dpkg-shlibdeps >/dev/null || { echo "deb: dpkg-shlibdeps not found (apt-get install dpkg-dev)"; exit 1; }
	rm -rf $(DEB_DIR)/stage
	$(MAKE) --no-print-directory install BUILD=$(DEB_DIR)/build PREFIX=/usr \
		CFLAGS="$(call deb_flag,CFLAGS) $(call deb_flag,CPPFLAGS)" \
		CPPFLAGS="$(call deb_flag,CPPFLAGS)" LDFLAGS="$(call deb_flag,LDFLAGS)" \
		LIBDIR=/usr/lib/$(DEB_MULTIARCH) INFO_RPATH= \
		DESTDIR=$(abspath $(DEB_DIR)/stage)
	DEB_MAINTAINER="$(DEB_MAINTAINER)" scripts/packaging/deb/build-debs $(abspath $(DEB_DIR)/stage) \
		$(abspath $(DEB_DIR)) $(GH_VERSION) $(DEB_ARCH) $(DEB_MULTIARCH)

# make deb-src: the tree as a Debian source package, debian/ from
# scripts/packaging/debian (the top level holds no debian/: README.md
# there says why), in $(BUILD)/deb-src/gdrhook-VERSION; dpkg-buildpackage
# -us -uc -b there builds it.  `make deb-build` does both.
DEB_SRC_DIR	:= $(BUILD)/deb-src

.PHONY: deb-src deb-build
deb-src:
	DEB_MAINTAINER="$(DEB_MAINTAINER)" scripts/packaging/deb-src \
		$(abspath $(DEB_SRC_DIR)) $(GH_VERSION)

deb-build: deb-src
	@command -v dpkg-buildpackage >/dev/null && command -v dh >/dev/null || \
		{ echo "deb-build: dpkg-buildpackage and dh not found (apt-get install dpkg-dev debhelper dh-python)"; exit 1; }
	cd $(DEB_SRC_DIR)/gdrhook-$(GH_VERSION) && dpkg-buildpackage -us -uc -b

# SPDX-License-Identifier: MIT
# make install [PREFIX=/usr/local] [DESTDIR=]   and   make uninstall
#
#   $(LIBDIR)/libgdrhook.so.$(GH_VERSION)  the library; libgdrhook.so.MAJOR
#                                        (its SONAME, the file to preload)
#                                        and libgdrhook.so (for -lgdrhook)
#                                        link to it
#   $(INCLUDEDIR)/gdrhook.h, gdrhook_preload.h, gdrpin_ioctl.h
#   $(BINDIR)/gdrhook-trace, gdrhook-info (gdrhook-trace is one file: scripts/tools/rules.mk)
#   $(TRACE_CORE_DIR)/_core.abi3.so      gdrhook-trace's C reader, where
#                                        it looks: $(BINDIR)/../lib/gdrhook-trace
#                                        (built when Python's headers are here)
#   $(PKGCONFIGDIR)/gdrhook.pc           (from scripts/gdrhook.pc.in)
#   $(MANDIR)/man1/gdrhook-trace.1, gdrhook-info.1, man7/libgdrhook.7
#   $(PYTHONDIR)/gdrhook/                the Python package (scripts/python),
#   $(PYTHONDIR)/gdrhook_trace/          and the trace tool's reader it uses;
#                                        PYTHONDIR is Debian's directory for
#                                        /usr: with another PREFIX, put it on
#                                        PYTHONPATH
#   $(DKMSSRCDIR)                        gdrpin DKMS source tree
#                                        (make -C src/kmod dkms-tree)
#
# Nothing outside PREFIX unless asked: the module's system files go under
# SYSCONFDIR only with `make install SYSCONFDIR=/etc` or `make
# install-system` (SYSCONFDIR defaults to /etc there; udev, modules-load.d
# and sysusers.d read /etc and /usr/lib, never /usr/local):
#   $(UDEVRULESDIR)/60-gdrpin.rules      /dev/gdrpin for group gdrpin
#   $(MODULESLOADDIR)/gdrpin.conf        load gdrpin at boot
#   $(SYSUSERSDIR)/gdrpin.conf           the gdrpin group (systemd-sysusers)
# Without DESTDIR, as root, install-system also creates the group and
# reloads udev.  `make uninstall` removes what install and install-system
# put down (system files only where they are still as installed), and
# the group when it removed the sysusers entry that declares it, and
# every directory it left empty up to PREFIX (with DESTDIR: up to DESTDIR).
#
# With PREFIX=/usr the DKMS tree lands where dkms looks for it
# (/usr/src/gdrpin-<version>: dkms add gdrpin/<version>); elsewhere give
# dkms its path (dkms add $(PREFIX)/src/gdrpin-<version>).
# DESTDIR is prepended to every path (staging, packaging); the installed
# files name $(PREFIX) only.  Included by the top Makefile.

PREFIX		?= /usr/local
DESTDIR		?=
BINDIR		?= $(PREFIX)/bin
LIBDIR		?= $(PREFIX)/lib
INCLUDEDIR	?= $(PREFIX)/include
PKGCONFIGDIR	?= $(LIBDIR)/pkgconfig
MANDIR		?= $(PREFIX)/share/man
PYTHONDIR	?= $(PREFIX)/lib/python3/dist-packages
INSTALL		?= install
TRACE_CORE_DIR	= $(abspath $(BINDIR)/../lib/gdrhook-trace)

# One version for the tree: the gdrpin DKMS package's (src/kmod/dkms.conf).
GDRPIN_VERSION	= $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' src/kmod/dkms.conf)
GDRHOOK_VERSION	?= $(GDRPIN_VERSION)
DKMSSRCDIR	?= $(PREFIX)/src/gdrpin-$(GDRPIN_VERSION)
# SYSCONFDIR is left undefined: set, it makes install put the system files
# down; install-system and uninstall-system default it to /etc.
UDEVRULESDIR	?= $(SYSCONFDIR)/udev/rules.d
MODULESLOADDIR	?= $(SYSCONFDIR)/modules-load.d
SYSUSERSDIR	?= $(SYSCONFDIR)/sysusers.d
install-system uninstall-system uninstall: SYSCONFDIR ?= /etc

INSTALL_HDRS	:= include/gdrhook.h include/gdrhook_preload.h include/gdrpin_ioctl.h
INSTALL_MAN1	:= scripts/man/gdrhook-trace.1 scripts/man/gdrhook-info.1
INSTALL_MAN7	:= scripts/man/libgdrhook.7
INSTALL_PC	:= $(BUILD)/gdrhook.pc
LIB_REAL	= libgdrhook.so.$(GH_VERSION)

# Everything `make install` puts down outside the DKMS tree.
INSTALLED_FILES	= $(LIBDIR)/$(LIB_REAL) $(LIBDIR)/$(SONAME) $(LIBDIR)/libgdrhook.so \
		  $(addprefix $(INCLUDEDIR)/,$(notdir $(INSTALL_HDRS))) \
		  $(BINDIR)/gdrhook-trace \
		  $(BINDIR)/gdrhook-info \
		  $(TRACE_CORE_DIR)/_core.abi3.so \
		  $(PKGCONFIGDIR)/gdrhook.pc \
		  $(MANDIR)/man1/gdrhook-trace.1 \
		  $(MANDIR)/man1/gdrhook-info.1 \
		  $(MANDIR)/man7/libgdrhook.7
# The Python packages: folders of their own, removed whole (with the
# __pycache__ an import leaves).
INSTALLED_DIRS	= $(PYTHONDIR)/gdrhook $(PYTHONDIR)/gdrhook_trace
# The system files, each after its source in the tree.
SYSTEM_FILES	= src/kmod/udev/60-gdrpin.rules $(UDEVRULESDIR)/60-gdrpin.rules \
		  src/kmod/udev/gdrpin.modules-load.conf $(MODULESLOADDIR)/gdrpin.conf \
		  src/kmod/udev/gdrpin.sysusers.conf $(SYSUSERSDIR)/gdrpin.conf

# gdrhook-info linked again for its installed place: it finds the library
# in $(LIBDIR) (the build tree's copy looks next to itself).  Phony, as
# the .pc file: both depend on PREFIX and LIBDIR.
INSTALL_INFO	:= $(BUILD)/install/gdrhook-info
INSTALL_PYBUILD	:= $(BUILD)/install/_build.py

.PHONY: install uninstall install-dkms install-system uninstall-system \
	$(INSTALL_PC) $(INSTALL_INFO) $(INSTALL_PYBUILD)

# INFO_RPATH= (empty) where LIBDIR is on the loader's default path
# (make deb: the multiarch directory).
INFO_RPATH	?= -Wl,--enable-new-dtags -Wl,-rpath,$(LIBDIR)

$(INSTALL_INFO): scripts/tools/gdrhook-info.c include/gdrhook.h $(LIB)
	@mkdir -p $(dir $@)
	$(call say,CCLD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< -L$(BUILD) -lgdrhook $(SANFLAGS) \
		-Wl,-z,now $(INFO_RPATH) $(LDFLAGS)

# Rewritten on every install: it depends on PREFIX and the *DIR values
# (written relative to $${prefix} where they lie under it).
PC_REL		= $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))

$(INSTALL_PC): scripts/gdrhook.pc.in
	@mkdir -p $(dir $@)
	$(call say,GEN,$@)
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|g' \
	    -e 's|@LIBDIR@|$(call PC_REL,$(LIBDIR))|g' \
	    -e 's|@INCLUDEDIR@|$(call PC_REL,$(INCLUDEDIR))|g' \
	    -e 's|@VERSION@|$(GDRHOOK_VERSION)|g' -e 's|@SONAME@|$(SONAME)|g' $< > $@

# The Python package's _build.py for its installed place: LIBDIR.
$(INSTALL_PYBUILD):
	@mkdir -p $(dir $@)
	$(call say,GEN,$@)
	$(Q)printf '# Generated by make install (scripts/install.mk).\n'$(call py_build,$(LIBDIR)) >$@

# What install puts down, built (a package's build step, before its
# install step).
.PHONY: install-build
install-build: $(LIB) $(TRACE_TOOL) $(TRACE_CORE) $(INSTALL_PC) $(INSTALL_INFO) python

install: install-build install-dkms install-python $(if $(SYSCONFDIR),install-system,)
	$(INSTALL) -D -m 0755 $(LIB) $(DESTDIR)$(LIBDIR)/$(LIB_REAL)
	ln -sfn $(LIB_REAL) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sfn $(SONAME) $(DESTDIR)$(LIBDIR)/libgdrhook.so
	$(foreach h,$(INSTALL_HDRS),$(INSTALL) -D -m 0644 $(h) $(DESTDIR)$(INCLUDEDIR)/$(notdir $(h)) &&) :
	$(INSTALL) -D -m 0755 $(TRACE_TOOL) $(DESTDIR)$(BINDIR)/gdrhook-trace
	$(if $(TRACE_CORE),$(INSTALL) -D -m 0644 $(TRACE_CORE) $(DESTDIR)$(TRACE_CORE_DIR)/_core.abi3.so,@echo "install: gdrhook-trace without its C reader (no Python headers at build time): it reads logs in pure Python, slower")
	$(INSTALL) -D -m 0755 $(INSTALL_INFO) $(DESTDIR)$(BINDIR)/gdrhook-info
	$(INSTALL) -D -m 0644 $(INSTALL_PC) $(DESTDIR)$(PKGCONFIGDIR)/gdrhook.pc
	$(foreach m,$(INSTALL_MAN1),$(INSTALL) -D -m 0644 $(m) $(DESTDIR)$(MANDIR)/man1/$(notdir $(m)) &&) :
	$(INSTALL) -D -m 0644 $(INSTALL_MAN7) $(DESTDIR)$(MANDIR)/man7/libgdrhook.7

# The package as built in $(PY_DIR), with the _build.py of this LIBDIR.
.PHONY: install-python
install-python: python $(INSTALL_PYBUILD)
	rm -rf $(addprefix $(DESTDIR),$(INSTALLED_DIRS))
	$(foreach f,$(filter-out %/_build.py %/.stamp,$(PY_OUT)),$(INSTALL) -D -m 0644 $(f) $(DESTDIR)$(PYTHONDIR)/$(patsubst $(PY_DIR)/%,%,$(f)) &&) :
	$(INSTALL) -d $(DESTDIR)$(PYTHONDIR)/gdrhook_trace
	$(INSTALL) -m 0644 $(PY_DIR)/gdrhook_trace/*.py $(PY_DIR)/gdrhook_trace/*.json $(DESTDIR)$(PYTHONDIR)/gdrhook_trace/
	$(INSTALL) -m 0644 $(INSTALL_PYBUILD) $(DESTDIR)$(PYTHONDIR)/gdrhook/_build.py

# src/kmod's dkms-tree copies the module sources, Kbuild, Makefile,
# dkms.conf and the two headers it needs; a module built in src/kmod leaves
# kbuild's generated *.mod.c there, which is not source: dropped.
install-dkms:
	@test -n "$(GDRPIN_VERSION)" || { echo "install: no PACKAGE_VERSION in src/kmod/dkms.conf"; exit 1; }
	rm -rf $(DESTDIR)$(DKMSSRCDIR)
	$(MAKE) --no-print-directory -C src/kmod dkms-tree \
		DKMS_DIR=$(abspath $(DESTDIR)$(DKMSSRCDIR))
	rm -f $(DESTDIR)$(DKMSSRCDIR)/*.mod.c
	chmod -R u=rwX,go=rX $(DESTDIR)$(DKMSSRCDIR)

# The files that give /dev/gdrpin a group and load gdrpin at boot; a DKMS
# package ships the same three from the DKMS tree's udev/ folder.
install-system:
	@set -- $(SYSTEM_FILES); while [ $$# -gt 0 ]; do \
		echo "install -D -m 0644 $$1 $(DESTDIR)$$2"; \
		$(INSTALL) -D -m 0644 $$1 $(DESTDIR)$$2 || exit 1; shift 2; \
	done
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then \
		getent group gdrpin >/dev/null || groupadd --system gdrpin; \
		! command -v udevadm >/dev/null || udevadm control --reload 2>/dev/null || true; \
	fi

# A system file changed since it was installed is left (and said).  The
# group goes with the sysusers entry that declared it, unless another
# entry (a package's) still does.
uninstall-system:
	@gone=; set -- $(SYSTEM_FILES); while [ $$# -gt 0 ]; do \
		f=$(DESTDIR)$$2; \
		if cmp -s $$1 $$f; then rm -f $$f && echo "rm $$f" || exit 1; \
			gone="$$gone $$2"; \
		elif [ -e $$f ]; then echo "uninstall: $$f left: not as installed"; fi; \
		shift 2; \
	done; \
	case "$$gone" in *sysusers.d/gdrpin.conf*) \
		if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && getent group gdrpin >/dev/null && \
		   ! ls /etc/sysusers.d/gdrpin.conf /run/sysusers.d/gdrpin.conf \
			/usr/lib/sysusers.d/gdrpin.conf >/dev/null 2>&1; then \
			groupdel gdrpin && echo "groupdel gdrpin"; \
		fi; \
		! command -v udevadm >/dev/null || udevadm control --reload 2>/dev/null || true;; \
	esac

# Directories install may have made, pruned from the deepest up while
# empty: never above PREFIX, or DESTDIR when staging.
PRUNE_DIRS	= $(LIBDIR) $(PKGCONFIGDIR) $(INCLUDEDIR) $(BINDIR) $(TRACE_CORE_DIR) \
		  $(MANDIR)/man1 $(MANDIR)/man7 $(PYTHONDIR) $(dir $(DKMSSRCDIR)) \
		  $(if $(DESTDIR),$(UDEVRULESDIR) $(MODULESLOADDIR) $(SYSUSERSDIR),)

uninstall: uninstall-system
	rm -f $(addprefix $(DESTDIR),$(INSTALLED_FILES))
	rm -rf $(addprefix $(DESTDIR),$(INSTALLED_DIRS))
	rm -rf $(DESTDIR)$(DKMSSRCDIR)
	@top=$(if $(DESTDIR),,$(abspath $(PREFIX))); \
	for d in $(abspath $(PRUNE_DIRS)); do \
		while [ "$$d" != "$${top:-/}" ] && [ "$$d" != / ] && \
		      case $$d in $$top/*) true;; *) false;; esac && \
		      rmdir "$(DESTDIR)$$d" 2>/dev/null; do d=$${d%/*}; done; \
	done; \
	[ -z "$$top" ] || rmdir "$$top" 2>/dev/null || true

# virtiofs-dax: QEMU 10.0 with the virtio-fs DAX cache window, and a C
# virtiofsd that serves it.  See README.md.

TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
-include $(TOP)/config.mk
BUILD ?= $(TOP)/build
PREFIX ?= /usr/local

# The upstream base (README "Upstream bases"): qemu.pin's release by
# default, or QEMU_BASE=X for bases/X/, built in $(BUILD)/base-X.  The guest
# is the same for every base and stays in $(BUILD)/guest.
DEFAULT_BASE := $(shell sed -n 's/^QEMU_VERSION=\([0-9]*\.[0-9]*\).*/\1/p' $(TOP)/qemu.pin)
QEMU_BASE ?= $(DEFAULT_BASE)
# The guest's kernel by Debian release (README "Guest kernels"): trixie's
# (the default) in $(BUILD)/guest, bookworm's or sid's in
# $(BUILD)/guest-NAME.  make check also runs some suites on the matrix's
# other kernels, from GUEST_DIR_BOOKWORM, _TRIXIE, _SID.
GUEST_KERNEL ?= trixie
# make check runs some suites on the other kernels too; 0: not
CHECK_KERNELS ?= 1
ifeq ($(origin GUEST_DIR),undefined)
GUEST_DIR := $(BUILD)/guest$(if $(filter trixie,$(GUEST_KERNEL)),,-$(GUEST_KERNEL))
endif
# beside GUEST_DIR, as mk/check.py finds them when not told
GUEST_ROOT := $(patsubst %/,%,$(dir $(GUEST_DIR)))
GUEST_DIR_BOOKWORM ?= $(GUEST_ROOT)/guest-bookworm
GUEST_DIR_TRIXIE ?= $(GUEST_ROOT)/guest
GUEST_DIR_SID ?= $(GUEST_ROOT)/guest-sid
MATRIX_KERNELS := $(filter-out $(GUEST_KERNEL),bookworm trixie sid)
BUILD_ROOT := $(BUILD)
ifneq ($(QEMU_BASE),$(DEFAULT_BASE))
override BUILD := $(BUILD)/base-$(QEMU_BASE)
endif
OTHER_BASES := $(patsubst $(TOP)/bases/%/qemu.pin,%,$(wildcard $(TOP)/bases/*/qemu.pin))
export BUILD PREFIX QEMU_BASE GUEST_DIR GUEST_KERNEL GUEST_DIR_BOOKWORM GUEST_DIR_TRIXIE GUEST_DIR_SID CHECK_KERNELS

QEMU_BUILD := $(BUILD)/qemu
QEMU_BIN := $(QEMU_BUILD)/qemu-system-x86_64

.PHONY: all deps prepare qemu guest guest-matrix rust-virtiofsd upstream-qemu demo check bench bench-tree bench-memory bench-loadgen bench-density fuzz fstests \
        refresh-patches verify-tree checkpatch install clean distclean help \
        port-base check-bases series bisect-check patch-lines

all: qemu guest

help:
	@echo "make demo            build everything and boot a guest sharing a host directory"
	@echo "make check           build what the tests need and run them all"
	@echo "make bench [QUICK=1] benchmarks (docs/benchmarks/)"
	@echo "make bench-tree [TREE_ROUNDS=N]  a source tree on each kind of guest storage (docs/benchmarks/tree.md)"
	@echo "make bench-memory  memory for one read of a large file, with and without the window (docs/benchmarks/memory.md)"
	@echo "make bench-loadgen [QUICK=1]  the daemons' own speed without a guest, and the floor (docs/benchmarks/loadgen.md)"
	@echo "make bench-density [DENSITY_ROUNDS=N]  1, 2, 4 guests running from one Debian root, with and without the window (docs/benchmarks/density.md)"
	@echo "make fuzz [FUZZ_SECONDS=N]  fuzz virtiofsd's request path (default 300 s)"
	@echo "make fstests [FSTESTS=SRC] [FSTESTS_ARGS=...]  fstests' generic group on ours and the Rust virtiofsd"
	@echo "make prepare         prepare build/src (upstream + our files + patches/)"
	@echo "make refresh-patches save commits and edits made in build/src to patches/ and the repo"
	@echo "make verify-tree     check patches/ + our files reproduce build/src"
	@echo "make checkpatch      QEMU's checkpatch.pl on patches/ and our C files"
	@echo "make patch-lines     lines the series adds to upstream files, per patch"
	@echo "make series [SERIES_DIR=...]  the fork as one git-am series (build/series)"
	@echo "make bisect-check [BISECT_PATCHES=N]  build QEMU after each patch of it"
	@echo "make install PREFIX=...  install qemu-system-x86_64, virtiofsd and descriptors"
	@echo "make upstream-qemu   set up Debian's unmodified QEMU 11.1 (build/upstream-qemu)"
	@echo "make check-bases     build the other upstream bases (bases/) and run their suites"
	@echo "make port-base QEMU_BASE=X  git am -3 the series onto base X to port it"
	@echo "QEMU_BASE=X          any target on upstream base X (bases/X/) instead of $(DEFAULT_BASE)"
	@echo "GUEST_KERNEL=NAME    guest kernel of Debian bookworm (6.1), trixie (6.12, default) or sid"
	@echo "make guest-matrix    build the other kernels' guests (make check runs on them; CHECK_KERNELS=0: not)"

deps:
	@$(TOP)/mk/deps.sh build guest

prepare: deps
	@$(TOP)/mk/prepare-tree.sh

qemu: prepare
	@$(TOP)/mk/build-qemu.sh

guest: deps
	@$(TOP)/harness/build-guest.sh

# The kernel matrix's other guests, for make check's suites on them
guest-matrix: deps
	@$(foreach k,$(MATRIX_KERNELS),GUEST_KERNEL=$(k) \
	    GUEST_DIR=$(GUEST_DIR_$(shell echo $(k) | tr a-z A-Z)) \
	    $(TOP)/harness/build-guest.sh &&) true

rust-virtiofsd:
	@$(TOP)/harness/rust-virtiofsd.sh >/dev/null

# Debian's unmodified QEMU 11.1, run from a Debian 13 root in the cache
upstream-qemu:
	@$(TOP)/mk/upstream-qemu.sh >/dev/null

demo: qemu guest
	@$(TOP)/harness/demo.sh

# Without clang only the fuzz suite fails (it says what to install); without
# upstream QEMU only the suites that need it fail, saying why; so does
# the fstests suite without fstests' source or its root (made here, out
# of the suite's time: about 2 minutes cold, README "fstests").
# On another base (QEMU_BASE=X) check runs the suites of mk/check.py's
# EVERY_BASE, which need neither clang nor upstream QEMU.
check: qemu guest $(if $(and $(filter-out 0,$(CHECK_KERNELS)),$(filter $(DEFAULT_BASE),$(QEMU_BASE))),guest-matrix)
ifeq ($(QEMU_BASE),$(DEFAULT_BASE))
	@$(TOP)/mk/deps.sh fuzz || true
	@$(TOP)/mk/deps.sh upstream || true
	@$(TOP)/mk/upstream-qemu.sh >/dev/null || true
	@$(TOP)/mk/deps.sh fstests || true
	@$(TOP)/mk/fstests-root.sh >/dev/null || true
endif
	@python3 $(TOP)/mk/check.py

# Every other base of bases/: build it, run its suites.  CI runs this after
# make check (.ci/run).
check-bases:
	@rc=0; for b in $(OTHER_BASES); do \
	    echo "check-bases: upstream base $$b (build/base-$$b)"; \
	    $(MAKE) --no-print-directory QEMU_BASE=$$b BUILD=$(BUILD_ROOT) \
	        GUEST_DIR=$(GUEST_DIR) check || rc=1; \
	done; exit $$rc

# The report's chart needs matplotlib: kept in the cache's private venv.
BENCH_PYTHON = $(or $(VIRTIOFS_DAX_CACHE),$(HOME)/.cache/virtiofs-dax)/pyvenv/bin/python3
bench: qemu guest rust-virtiofsd
	@$(TOP)/mk/deps.sh upstream || true
	@$(TOP)/mk/upstream-qemu.sh >/dev/null || true
	@$(BENCH_PYTHON) -c 'import matplotlib' 2>/dev/null || \
	    $(BENCH_PYTHON) -m pip install -q matplotlib >/dev/null 2>&1 || \
	    echo "bench: cannot install matplotlib; the report will have no chart"
	@$(BENCH_PYTHON) $(TOP)/bench/run.py $(if $(QUICK),--quick)
	@$(TOP)/bench/tree.py $(if $(QUICK),--rounds 1,$(if $(TREE_ROUNDS),--rounds $(TREE_ROUNDS)))
	@$(TOP)/bench/memory.py $(if $(QUICK),--rounds 1)
	@$(TOP)/bench/loadgen.py $(if $(QUICK),--quick)
	@$(TOP)/bench/kvm_estimate.py
	@$(TOP)/mk/deps.sh density
	@$(TOP)/bench/density.py $(if $(QUICK),--rounds 1,$(if $(DENSITY_ROUNDS),--rounds $(DENSITY_ROUNDS)))

# Unpack, walk, grep, copy, delete a source tree: tmpfs, ext4 on
# virtio-blk, 9p, the Rust virtiofsd and ours, with and without a window
TREE_ROUNDS ?=
bench-tree: qemu guest rust-virtiofsd
	@$(TOP)/bench/tree.py $(if $(TREE_ROUNDS),--rounds $(TREE_ROUNDS))

# Ours and the Rust virtiofsd under the vhost-user load generator, no
# guest: requests/s, latency, CPU and switches per request, and the floor;
# a guest only records the tree steps' requests for the replay row
bench-loadgen: qemu guest rust-virtiofsd
	@$(TOP)/bench/loadgen.py $(if $(QUICK),--quick)
	@$(TOP)/bench/kvm_estimate.py

# One read of a 512 MiB file: the guest's page cache and QEMU's and the
# daemon's memory, with and without the window (docs/benchmarks/memory.md)
bench-memory: qemu guest rust-virtiofsd
	@$(TOP)/bench/memory.py

# 1, 2 and 4 guests boot their user space from one read-only Debian root
# (mk/density-root.sh) and run the same work: host memory and time, with
# and without the window (docs/benchmarks/density.md)
DENSITY_ROUNDS ?=
bench-density: qemu guest
	@$(TOP)/mk/deps.sh density
	@$(TOP)/bench/density.py $(if $(DENSITY_ROUNDS),--rounds $(DENSITY_ROUNDS))

# libFuzzer on virtiofsd's request decoding and dispatch (mk/fuzz.sh)
FUZZ_SECONDS ?= 300
fuzz: prepare
	@$(TOP)/mk/deps.sh fuzz
	@$(TOP)/mk/fuzz.sh run $(FUZZ_SECONDS)

# fstests (xfstests) on ours (without and with a DAX window) and on the
# Rust virtiofsd, side by side: build/fstests/report.md (README
# "fstests").  FSTESTS: a tarball or clone of fstests (default: the pinned
# tag, from ../shared/deps/ beside the project, the cache, or fetched from
# upstream: mk/fstests-source.sh); FSTESTS_ARGS: more options of
# harness/fstests/run.py (--limit N, --budget S, --config NAME, --tests F).
FSTESTS ?=
FSTESTS_ARGS ?=
fstests: qemu guest rust-virtiofsd
	@$(TOP)/mk/deps.sh fstests
	@python3 $(TOP)/harness/fstests/run.py $(if $(FSTESTS),--fstests $(abspath $(FSTESTS))) $(FSTESTS_ARGS)

refresh-patches:
	@$(TOP)/mk/refresh-patches.sh

port-base:
	@$(TOP)/mk/port-base.sh

verify-tree:
	@$(TOP)/mk/verify-tree.sh

checkpatch: prepare
	@$(TOP)/mk/checkpatch.sh

# What a rebase onto the next upstream release may have to merge by hand
patch-lines:
	@$(TOP)/mk/patch-lines.sh

# patches/ plus each new file in the patch that introduces it
# (patches/series.map), checked with git am against the pinned upstream
series: prepare
	@$(TOP)/mk/series.sh export $(SERIES_DIR)

# Not part of check: one incremental QEMU build per patch
bisect-check: prepare
	@$(TOP)/mk/series.sh bisect $(BISECT_PATCHES)

install: qemu
	@$(TOP)/mk/deps.sh docs || echo "install: no sphinx, the man page is left out"
	@$(TOP)/mk/install.sh

clean:
	rm -rf $(QEMU_BUILD) $(if $(filter $(DEFAULT_BASE),$(QEMU_BASE)),$(GUEST_DIR))

distclean:
	rm -rf $(BUILD) $(TOP)/config.mk

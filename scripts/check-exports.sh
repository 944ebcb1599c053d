#!/bin/sh
# SPDX-License-Identifier: MIT
# make check: the library exports exactly the hooked symbols (from the
# hooks/ lists) plus gdrhook_*, all unversioned, and needs no CUDA or verbs
# library at link time.
set -eu
lib=$1
symbols=$2
fail=0

nm -D --defined-only "$lib" | awk '{print $3}' | sort > "$lib.exports"
grep -v '^gdrhook_' "$lib.exports" | sed 's/@.*//' > "$lib.hooked"
if ! diff -u "$symbols" "$lib.hooked"; then
	echo "check-exports: exported hooks differ from the hooks/ lists" >&2
	fail=1
fi
if grep '@' "$lib.exports"; then
	echo "check-exports: versioned exports (must be unversioned)" >&2
	fail=1
fi
if ! grep -q '^gdrhook_lookup$' "$lib.exports"; then
	echo "check-exports: public API missing" >&2
	fail=1
fi
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
for n in $needed; do
	case $n in
	libcuda*|libcudart*|libibverbs*|libnvidia*)
		echo "check-exports: $lib must not link $n" >&2
		fail=1
		;;
	esac
done
# Thread-locals are initial-exec (Makefile): a hook that reached
# __tls_get_addr would pay a call, and may allocate, on every use.
if nm -D --undefined-only "$lib" | grep -q '__tls_get_addr'; then
	echo "check-exports: $lib calls __tls_get_addr (a thread-local outside the static TLS block)" >&2
	fail=1
fi
[ $fail -eq 0 ] && echo "check-exports: $(wc -l < "$lib.hooked") hooked symbols + $(grep -c '^gdrhook_' "$lib.exports") API functions, no CUDA/verbs link: ok"
exit $fail

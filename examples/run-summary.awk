# SPDX-License-Identifier: MIT
# `make run`'s digest of `gdrhook-trace summary`: each process's calls,
# registration cache and health, without the section titles, the timings
# or the memory table (the command itself prints them), so that make run
# fits a screen.  Process headers only when there are several processes.
{ line[NR] = $0 }
/^== pid / { procs++ }
END {
	for (i = 1; i <= NR; i++) {
		l = line[i]
		if (l ~ /^== pid /) {
			if (procs > 1)
				print l
			keep = 0
		} else if (l ~ /^  [^ ]/) {
			keep = l ~ /^  (Calls|Registration cache|Health)/
		} else if (keep && l != "") {
			print substr(l, 3)
		}
	}
}

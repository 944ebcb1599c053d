# SPDX-License-Identifier: MIT
"""python3 -m gdrhook_trace, and the entry point of the built zipapp."""

import sys

from gdrhook_trace.cli import run

sys.exit(run())

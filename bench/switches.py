#!/usr/bin/env python3
"""Run a gevent program (bin/workerless or bench/baseline.py) and count its greenlet switches; at exit one line
goes to stderr: SWITCHES {"switch": N, "throw": M}. Usage: switches.py SCRIPT [ARGS...]"""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import runpy  # noqa: E402
import sys  # noqa: E402

import greenlet  # noqa: E402

counts: dict[str, int] = {}

def tracer(event: str, args: object) -> None:
    counts[event] = counts.get(event, 0) + 1

greenlet.settrace(tracer)
script = sys.argv[1]
sys.argv = sys.argv[1:]
try:
    runpy.run_path(script, run_name="__main__")
finally:
    print("SWITCHES " + json.dumps(counts), file=sys.stderr, flush=True)

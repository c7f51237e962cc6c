"""`make bench`: run every benchmarks/bench_*.py, each in an interpreter of its own, and print its figures as
`bench NAME VALUE UNIT`, with the machine's own speed measured before each (`machine_ref_ms`, _machine.py);
`python -m benchmarks compare BEFORE.txt AFTER.txt` sets two such outputs side by side."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import time
import traceback
from pathlib import Path


def main(argv: list[str]) -> int:
    if argv[:1] == ["compare"]:
        from benchmarks._compare import main as compare

        return compare(argv[1:])
    if argv[:1] == ["--one"]:  # one module, in this interpreter: what `make bench` runs each in
        return _run_one(argv[1])
    from benchmarks._machine import reference_ms
    from benchmarks._util import emit

    wanted = set(argv)
    here = Path(__file__).parent
    failed = []
    machine = []
    for mod in sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_")):
        if wanted and mod.removeprefix("bench_") not in wanted and mod not in wanted:
            continue
        # Each module in a fresh interpreter: a figure must not depend on which modules ran before it (their
        # heap for the collector to walk, their threads, their imports), nor one module's crash end the others.
        machine.append(reference_ms())  # the machine's speed now: what `compare` weighs the figures' change by
        print(f"# machine_ref_ms {machine[-1]:.1f} before {mod}", flush=True)
        if subprocess.run([sys.executable, "-m", "benchmarks", "--one", mod], check=False).returncode != 0:
            failed.append(mod)
    if machine:
        emit("machine_ref_ms", machine, "ms")
    if failed:
        print(f"benchmarks that failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _run_one(mod: str) -> int:
    t0 = time.perf_counter()
    print(f"# {mod}", flush=True)
    status = 0
    try:
        importlib.import_module(f"benchmarks.{mod}").main()
    except Exception:
        traceback.print_exc()
        status = 1
    print(f"# {mod} took {time.perf_counter() - t0:.1f} s", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

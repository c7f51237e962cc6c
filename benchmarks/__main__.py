"""`make bench`: run every benchmarks/bench_*.py and print its figures as `bench NAME VALUE UNIT`;
`python -m benchmarks compare BEFORE.txt AFTER.txt` sets two such outputs side by side."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback
from pathlib import Path


def main(argv: list[str]) -> int:
    if argv[:1] == ["compare"]:
        from benchmarks._compare import main as compare

        return compare(argv[1:])
    wanted = set(argv)
    here = Path(__file__).parent
    failed = []
    for mod in sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_")):
        if wanted and mod.removeprefix("bench_") not in wanted and mod not in wanted:
            continue
        t0 = time.perf_counter()
        print(f"# {mod}", flush=True)
        try:
            importlib.import_module(f"benchmarks.{mod}").main()
        except Exception:
            traceback.print_exc()
            failed.append(mod)
        print(f"# {mod} took {time.perf_counter() - t0:.1f} s", flush=True)
    if failed:
        print(f"benchmarks that failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

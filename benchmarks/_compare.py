"""`python -m benchmarks compare BEFORE.txt AFTER.txt`: two `make bench` outputs side by side, each figure's
ratio (after / before) and whether it went the right way. A figure in only one file is listed as such. When both
runs measured the machine (`machine_ref_ms`), a first line says how much faster or slower the machine itself was:
a figure that moved about as much as the machine did says nothing about the code."""

from __future__ import annotations

import re
from pathlib import Path

_LINE = re.compile(r"^bench (\S+) (-?[0-9.]+(?:e[-+]?\d+)?|nan|inf) (\S+)\s*$")
# Figures where more is better: a rate (`_per_s` as a word of the name: not `_per_step`), and the helper's
# speed-up over `docker exec`.
_HIGHER_IS_BETTER = re.compile(r"_per_s(?:_|$)|^exec_ratio_vs_docker_exec")


def figures(text: str) -> dict[str, tuple[float, str]]:
    """name -> (value, unit) of every `bench NAME VALUE UNIT` line (the last one wins)."""
    out = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m:
            out[m.group(1)] = (float(m.group(2)), m.group(3))
    return out


def higher_is_better(name: str, unit: str) -> bool:
    return unit == "1/s" or bool(_HIGHER_IS_BETTER.search(name))


def verdict(name: str, unit: str, before: float, after: float, noise: float = 0.05) -> str:
    if before == 0 or before != before or after != after:
        return ""
    ratio = after / before
    if abs(ratio - 1) <= noise:
        return "same"
    better = ratio > 1 if higher_is_better(name, unit) else ratio < 1
    return "better" if better else "worse"


MACHINE = "machine_ref_ms"


def machine_line(a: dict[str, tuple[float, str]], b: dict[str, tuple[float, str]]) -> str | None:
    """What the machine's own speed did between the runs, or None when either did not measure it."""
    if MACHINE not in a or MACHINE not in b or not a[MACHINE][0] or not b[MACHINE][0]:
        return None
    ratio = b[MACHINE][0] / a[MACHINE][0]
    if abs(ratio - 1) <= 0.05:
        how = "the same speed in both runs (within 5%)"
    else:
        how = f"{'slower' if ratio > 1 else 'faster'} in AFTER: its reference work took {ratio:.2f}x the time"
    return f"machine: {how} ({a[MACHINE][0]:.1f} ms, then {b[MACHINE][0]:.1f} ms)"


def compare(before: str, after: str) -> list[str]:
    a, b = figures(before), figures(after)
    names = list(a) + [n for n in b if n not in a]
    width = max((len(n) for n in names), default=10)
    lines = [line] if (line := machine_line(a, b)) else []
    lines.append(f"{'figure':{width}}  {'before':>12}  {'after':>12}  {'after/before':>12}  unit")
    for name in names:
        if name not in a or name not in b:
            where = "after only" if name not in a else "before only"
            value, unit = (b if name not in a else a)[name]
            lines.append(f"{name:{width}}  {where:>12}  {value:>12.3f}  {'':>12}  {unit}")
            continue
        (va, unit), (vb, _) = a[name], b[name]
        ratio = f"{vb / va:.2f}x" if va else "-"
        said = "(the machine)" if name == MACHINE else verdict(name, unit, va, vb)
        lines.append(f"{name:{width}}  {va:>12.3f}  {vb:>12.3f}  {ratio:>12}  {unit}  {said}")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m benchmarks compare BEFORE.txt AFTER.txt (two `make bench` outputs)")
        return 2
    try:
        before, after = (Path(p).read_text(errors="replace") for p in argv)
    except OSError as e:
        print(f"cannot read {e.filename}: {e.strerror}")
        return 2
    print("\n".join(compare(before, after)))
    return 0

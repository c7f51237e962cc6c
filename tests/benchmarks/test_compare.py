"""`python -m benchmarks compare`: two bench outputs side by side, ratios and which way each figure went."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks._compare import compare, figures

BEFORE = """# bench_core
bench dispatch_p50_ms 1.740 ms
# dispatch_p50_ms spread 1.6..1.9 over 5 runs
bench audit_write_per_s 6400.000 1/s
bench exec_ratio_vs_docker_exec 31.000 x
bench glob_tree_ratio_vs_rg 2.200 x
bench gone_ms 3.000 ms
bench loop_cpu_per_step_ms 4.000 ms
bench audit_write_per_s_pg_4_writers 3000.000 1/s
"""
AFTER = """bench dispatch_p50_ms 0.580 ms
bench audit_write_per_s 8800.000 1/s
bench exec_ratio_vs_docker_exec 30.000 x
bench glob_tree_ratio_vs_rg 2.900 x
bench new_ms 1.000 ms
bench loop_cpu_per_step_ms 2.000 ms
bench audit_write_per_s_pg_4_writers 3300.000 1/s
"""


def test_ratios_and_the_right_direction_for_each_kind_of_figure() -> None:
    assert figures(BEFORE)["dispatch_p50_ms"] == (1.74, "ms")
    rows = {line.split()[0]: line for line in compare(BEFORE, AFTER)[1:]}
    assert rows["dispatch_p50_ms"].split()[3:] == ["0.33x", "ms", "better"]
    assert rows["audit_write_per_s"].split()[3:] == ["1.38x", "1/s", "better"]  # more per second is better
    assert rows["exec_ratio_vs_docker_exec"].split()[3:] == ["0.97x", "x", "same"]  # within the noise
    assert rows["glob_tree_ratio_vs_rg"].split()[3:] == ["1.32x", "x", "worse"]  # slower than rg by more
    assert rows["loop_cpu_per_step_ms"].split()[3:] == ["0.50x", "ms", "better"]  # "_per_step" is no rate
    assert rows["audit_write_per_s_pg_4_writers"].split()[3:] == ["1.10x", "1/s", "better"]
    assert "before only" in rows["gone_ms"] and "after only" in rows["new_ms"]


def test_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(BEFORE)
    (tmp_path / "b.txt").write_text(AFTER)
    root = Path(__file__).resolve().parents[2]
    run = [sys.executable, "-m", "benchmarks", "compare"]
    out = subprocess.run([*run, str(tmp_path / "a.txt"), str(tmp_path / "b.txt")], cwd=root, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "dispatch_p50_ms" in out.stdout and "better" in out.stdout
    missing = subprocess.run([*run, str(tmp_path / "a.txt"), str(tmp_path / "none.txt")], cwd=root,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "cannot read" in missing.stdout and "none.txt" in missing.stdout


def test_the_machine_s_own_speed_is_said_first_and_judged_as_neither() -> None:
    slow = compare(BEFORE + "bench machine_ref_ms 32.0 ms\n", AFTER + "bench machine_ref_ms 48.0 ms\n")
    assert slow[0] == "machine: slower in AFTER: its reference work took 1.50x the time (32.0 ms, then 48.0 ms)"
    rows = {line.split()[0]: line for line in slow[2:]}
    assert rows["machine_ref_ms"].split()[3:] == ["1.50x", "ms", "(the", "machine)"]  # not "worse": not the code
    same = compare(BEFORE + "bench machine_ref_ms 32.0 ms\n", AFTER + "bench machine_ref_ms 33.0 ms\n")
    assert same[0].startswith("machine: the same speed in both runs")
    fast = compare(BEFORE + "bench machine_ref_ms 40.0 ms\n", AFTER + "bench machine_ref_ms 32.0 ms\n")
    assert fast[0].startswith("machine: faster in AFTER: its reference work took 0.80x the time")
    assert compare(BEFORE, AFTER)[0].startswith("figure")  # an older output without it: no machine line


def test_the_reference_work_is_the_same_work_each_time() -> None:
    from benchmarks._machine import _work, reference_ms

    assert _work() == _work() > 4_000  # deterministic, and none of it skipped (the regex found each step)
    assert reference_ms(runs=1) > 0

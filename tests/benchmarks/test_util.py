"""The bench harness (benchmarks/_util.py): each figure's median on its `bench` line, its spread on a
comment line, report() alone still printing at once, and a failing run leaving nothing collecting."""

from __future__ import annotations

import itertools

import pytest

from benchmarks._util import measure, repeat, report


def test_repeat_prints_each_figures_median_and_spread(capsys):
    samples = itertools.count(1)

    def one() -> None:
        n = next(samples)
        report("alpha_ms", n * 10.0, "ms")
        report("beta_x", 1.0 / n, "x")

    medians = repeat(one, runs=5)
    out = capsys.readouterr().out.splitlines()
    assert out == ["bench alpha_ms 30.000 ms", "# alpha_ms spread 10.000..50.000 over 5 runs",
                   "bench beta_x 0.333 x", "# beta_x spread 0.200..1.000 over 5 runs"]
    assert medians == {"alpha_ms": 30.0, "beta_x": pytest.approx(1 / 3)}


def test_measure_and_a_lone_report(capsys):
    values = iter([3.0, 1.0, 2.0])
    assert measure("gamma_s", "s", lambda: next(values), runs=3) == 2.0
    report("delta_errors", 0, "errors")  # outside repeat: printed at once, no spread line
    assert capsys.readouterr().out.splitlines() == [
        "bench gamma_s 2.000 s", "# gamma_s spread 1.000..3.000 over 3 runs", "bench delta_errors 0.000 errors"]


def test_a_nested_repeat_collects_into_the_outer_one_and_a_failure_stops_collecting(capsys):
    repeat(lambda: repeat(lambda: report("eps", 1.0, "ms"), runs=2), runs=2)
    assert capsys.readouterr().out.splitlines() == ["bench eps 1.000 ms", "# eps spread 1.000..1.000 over 4 runs"]

    def broken() -> None:
        report("zeta", 1.0, "ms")
        raise RuntimeError("the benchmark failed")

    with pytest.raises(RuntimeError):
        repeat(broken, runs=3)
    report("eta", 2.0, "ms")  # nothing is left collecting: printed at once
    assert capsys.readouterr().out.splitlines() == ["bench eta 2.000 ms"]

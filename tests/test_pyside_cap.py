"""Why pyproject excludes PySide6-Essentials 6.12.0 on Python < 3.12, checked against the PySide6 installed here.

6.12.0 drops one reference to True each time a bool signal is emitted. Before 3.12 True is an ordinary object:
its count runs down and the process aborts ("bool_dealloc: deallocating True or False"); from 3.12 on True is
immortal and nothing happens. So the exclusion covers that release on those Pythons only, and this test
catches a later release with the same bug on whatever Python runs the suite."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import gc, sys
from PySide6.QtCore import QCoreApplication, QObject, Signal
app = QCoreApplication([])
class Probe(QObject):
    flag = Signal(bool)
probe, seen = Probe(), []
probe.flag.connect(seen.append)
before = sys.getrefcount(True)
for _ in range(EMITS):
    probe.flag.emit(True)
held = sys.getrefcount(True) - before
assert len(seen) == EMITS and all(v is True for v in seen)
mortal = sys.version_info < (3, 12)
assert not mortal or held >= EMITS, f"{EMITS} emits hold {held} references to True"
del seen
gc.collect()
print("ok", held)
"""


def test_emitting_a_bool_signal_keeps_its_reference_to_true():
    done = subprocess.run([sys.executable, "-c", PROBE.replace("EMITS", "20000")], capture_output=True, text=True,
                          timeout=120, env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, f"the PySide6 here loses references to True:\n{done.stderr[-2000:]}"
    assert done.stdout.startswith("ok")

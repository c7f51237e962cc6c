"""Daemons that try to outlive their command (issue 10, item 3): the shell variants the process-escape tests run
on every sandbox and exec transport, and how to see that a workspace writer stopped."""

from __future__ import annotations

import time
from pathlib import Path

WRITER = "while :; do date +%s%N > {f}; sleep 0.05; done"

# Each variant starts a workspace writer named by its marker ($0 of the inner shell, or exec -a's name)
# that leaves the command's process group or its parentage.
VARIANTS = {
    "setsid_f": "setsid -f sh -c '{w}' {m}",
    "nohup_bg": "nohup sh -c '{w}' {m} >/dev/null 2>&1 &",
    "double_fork": "( ( setsid sh -c '{w}' {m} & ) & )",
    "subshell_bg": "( sh -c '{w}' {m} & ) &",
    "disown": "bash -c \"sh -c '{w}' {m} >/dev/null 2>&1 & disown\"",
    "exec_a": "setsid -f bash -c 'exec -a {m} sh -c \"{w}\"'",
    "env_scrubbed": "setsid -f env -i /bin/sh -c '{w}' {m}",
    # a cookie forged to name the live helper ($PPID) as its owner: no cookie but a live run's own is proof
    "forged_cookie": "setsid -f env -i AGENT_DESK_RUN=$PPID-999:1 /bin/sh -c '{w}' {m}",
    "fork_loop": "setsid -f bash -c 'for i in $(seq 40); do (sleep 300 & exec -a {m} sleep 300) & sleep 0.01; done; "
    "exec -a {m} sh -c \"{w}\"'",
}


def stops_changing(file: Path) -> bool:
    """The writer writes every 50 ms: unchanged over 0.4 s means nobody writes it any more."""
    before = file.read_bytes() if file.exists() else b""
    time.sleep(0.4)
    return (file.read_bytes() if file.exists() else b"") == before

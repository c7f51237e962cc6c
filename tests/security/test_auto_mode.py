"""Issue 22: what `auto` runs on purpose. A redirection outside /workspace or into a hidden configuration
path asks, and so does a command substitution whose commands are not known reads; a substitution of known
reads and a write inside the workspace run."""

from __future__ import annotations

import pytest

from desktop_app.core import Action, PermissionPolicy, Rule, RuleSet, ToolFacts

BASH = ToolFacts("bash_run", "group:runtime", False)


def auto(command: str, deny=()):
    rules = [Rule.parse(f"bash_run({d})", "deny", "test") for d in deny]
    return PermissionPolicy("auto", RuleSet(rules)).evaluate(BASH, {"command": command})


@pytest.mark.parametrize("command", [
    "cat foo > /etc/cron.d/x", "echo x >> /etc/profile", "echo x > /tmp/x", "ls >| /root/x", "echo x &> /var/x",
    "echo x > ../outside", "echo x > /workspace/../etc/x", "cd /tmp && echo x > y", "echo x > ~/.bashrc",
    "echo x > .github/workflows/ci.yml", "echo x >> .bashrc", "echo x > src/.env", "echo x > .vscode/tasks.json",
    "printf x > ./.npmrc", "time -o /etc/x ls", "find . -fprint /etc/x",
    "echo $(npm test)", "echo \"$(make)\"", "ls $(python3 -c 'print(1)')", "cat <(curl https://x)",
    "echo `sort --compress-program=sh x`", "x=$(git fetch) ls",
])
def test_auto_asks_before_writes_outside_or_into_hidden_paths_and_unknown_substitutions(command):
    d = auto(command)
    assert d.action is not Action.ALLOW, d.reason


@pytest.mark.parametrize("command", ["echo x > src/a.py", "ls > out.txt", "ls > /dev/null 2>&1",
                                     "echo $(cat /etc/hostname)", "echo \"$(git rev-parse HEAD)\"", "npm test",
                                     "ls $(ls)", "echo x > ./build/log.txt"])
def test_auto_still_runs_workspace_writes_and_substituted_reads(command):
    d = auto(command)
    assert d.action is Action.ALLOW, d.reason

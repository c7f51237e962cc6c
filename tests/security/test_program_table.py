"""Issue 22: the table of known programs. Plan mode, low risk and rule matching resolve options as the
program does (GNU long-option abbreviations, bundled short options, an option hidden in a word only known
when it runs), so a writing or program-running option gets through under no spelling; a global option that
moves configuration is un-analysable."""

from __future__ import annotations

import pytest

from desktop_app.core import Action, PermissionPolicy, Risk, Rule, RuleSet, ToolFacts, analyse_command, assess_risk

BASH = ToolFacts("bash_run", "group:runtime", False)

WRITES_OR_RUNS = [
    # GNU abbreviations of writing and program-running options
    "sort --output=x a", "sort --outp=x a", "sort --out x a", "sort --o=x a", "sort --compress-program=sh a",
    "sort --compress-prog=sh a", "sort --compress=sh a", "sort --comp=sh -u a", "sort --temporary-dir=/tmp a",
    "sort -T /tmp a",
    # bundled short options
    "sort -uo file a", "sort -ruofile a", "sort -o/etc/x a", "sort -rTx a",
    # git
    "git grep -O'sh;' x", "git grep -nO'sh' x", "git grep --open-files-in-pager=sh x", "git grep --open-files-in=sh x",
    "git grep --open=sh x", "git diff --output=x", "git diff --outp=x", "git log --ext-diff", "git log --ext-d",
    "git show --textconv HEAD", "git log -p --output=/etc/x", "git branch -D x", "git tag v1", "git stash drop",
    "git remote add x y", "git config core.pager sh",
    # other programs
    "rg --pre=sh x", "rg --pre sh x", "rg --pr=sh x", "rg -z x", "rg -iz x", "rg --search-zip x",
    "less +!sh x", "less -o log x", "less --log-file=log x", "less --log=log x", "less -ko x", "more +!id x",
    "tree -o out", "tree -ao out", "file -C -m x", "file --compile", "find . -exec ls {} +", "find . -execdir id ;",
    "find . -ok rm {} ;", "find . -delete", "find . -fprint out", "find . -fls out", "uniq a b", "date -s 2020-01-01",
    "date 01010101", "hostname evil", "hostname -F f", "xxd -r a b",
    # words only known when they run may become options
    "sort $x a", "sort \"$x\" a", "sort * ", "git grep $opt x", "rg $x y", "find . $x", "xargs sort",
    "find . -name *.py", "less $f",
    # a program given by a path outside the system folders is a file of the workspace, not the known one
    "./ls", "bin/cat x", "/tmp/sort x", "../grep x", "/workspace/tools/git status",
    # programs and subcommands the table does not hold
    "tar --to-command=sh -xf x", "tar -I sh -xf x", "tar --use-compress-program=sh -xf x", "ldd /bin/ls",
    "awk 'BEGIN{system(\"id\")}'", "sed -n 1p x", "git fetch", "git push", "npm test", "make",
]

UNANALYSABLE = [
    "git --git-dir=.evil log", "git --git-dir .evil log", "git -C sub status", "git -c core.pager=sh log",
    "git --exec-path=. status", "git --work-tree=/ status", "git --namespace=x log", "git --config-env=a=b log",
    "git --super-prefix=x status", "git --bare log", "GIT_DIR=x git log", "GIT_CONFIG_PARAMETERS=x git log",
    "GIT_EXTERNAL_DIFF=sh git diff", "env GIT_PAGER=sh git log", "LD_PRELOAD=x ls", "PYTHONPATH=. python3 x.py",
    "BASH_ENV=x bash -c ls", "PAGER=sh man ls", "EDITOR=sh git commit", "LESSOPEN='|sh %s' less x",
    "TAR_OPTIONS=--to-command=sh tar xf a", "RIPGREP_CONFIG_PATH=x rg y", "POSIXLY_CORRECT=1 sort a",
]

READS = ["ls -la", "sort -r a", "sort --rev a", "sort -k1,2 -t, -n a", "sort -u -- -o", "git grep -n x",
         "git log --oneline -n 3", "git log --output-indicator-new=x", "git diff --no-ext-diff", "git branch",
         "git branch -a", "git remote -v", "git status", "rg -i x", "find . -name '*.py' -type f", "uniq a",
         "date +%s", "date -d yesterday", "hostname", "tree -a", "less x", "xargs grep x", "cat a | sort -n",
         "git --no-pager log", "head -5 x", "grep -rn x ."]


def plan(command: str):
    return PermissionPolicy("plan", RuleSet()).evaluate(BASH, {"command": command})


@pytest.mark.parametrize("command", WRITES_OR_RUNS + UNANALYSABLE)
def test_writing_running_or_unknown_is_never_low_nor_run_while_planning(command):
    risk, why = assess_risk("bash_run", "group:runtime", False, {"command": command})
    assert risk is not Risk.LOW, why
    assert plan(command).action is Action.DENY


@pytest.mark.parametrize("command", UNANALYSABLE)
def test_a_global_option_or_variable_that_moves_configuration_is_unanalysable(command):
    a = analyse_command(command)
    assert not a.analysable
    d = PermissionPolicy("auto", RuleSet()).evaluate(BASH, {"command": command})
    assert d.action is Action.ASK and "cannot tell what this runs" in d.reason


@pytest.mark.parametrize("command", READS)
def test_known_reads_are_low_and_may_run_while_planning(command):
    risk, why = assess_risk("bash_run", "group:runtime", False, {"command": command})
    assert risk is Risk.LOW, why
    assert plan(command).action is not Action.DENY, plan(command).reason  # it asks as in mode ask


@pytest.mark.parametrize("rule,command", [
    ("sort *", "sort --compress-program=sh a"), ("sort *", "sort --compress-prog=sh a"), ("sort *", "sort -uo x a"),
    ("sort *", "sort $x a"), ("git grep *", "git grep -O'sh;' x"), ("git grep *", "git grep --open-files-in=sh x"),
    ("git *", "git grep -nOsh x"), ("rg *", "rg --pr=sh x"), ("find *", "find . -exec sh {} +"),
    ("find *", "find . -delete"), ("less *", "less +!sh x"), ("git log *", "git log --ext-diff"),
    ("git diff *", "git diff --outp=/etc/x"), ("sort *", "xargs sort"), ("sort *", "find . -exec sort {} +"),
])
def test_a_prefix_rule_does_not_prove_a_writing_or_running_option(rule, command):
    policy = PermissionPolicy("ask", RuleSet([Rule.parse(f"bash_run({rule})", "allow", "test")]))
    assert policy.evaluate(BASH, {"command": command}).action is not Action.ALLOW


@pytest.mark.parametrize("rule,command", [("sort *", "sort -r a"), ("git grep *", "git grep -n x"),
                                          ("npm test *", "npm test --watch"), ("rg *", "rg -i x"),
                                          ("git *", "git branch -D old"), ("git *", "git commit -m x"),
                                          ("uniq *", "uniq a b")])
def test_a_prefix_rule_still_proves_reads_and_unknown_programs(rule, command):
    policy = PermissionPolicy("ask", RuleSet([Rule.parse(f"bash_run({rule})", "allow", "test")]))
    assert policy.evaluate(BASH, {"command": command}).action is Action.ALLOW


@pytest.mark.parametrize("rule,command", [
    ("sort --compress-program *", "sort --compress-prog=gzip a"), ("sort --output *", "sort --outp=x a"),
    ("sort -o *", "sort -ox a"), ("git grep --open-files-in-pager *", "git grep --open-files=sh x"),
])
def test_a_deny_rule_meets_abbreviations_and_bundles(rule, command):
    policy = PermissionPolicy("auto", RuleSet([Rule.parse(f"bash_run({rule})", "deny", "test")]))
    assert policy.evaluate(BASH, {"command": command}).action is Action.DENY

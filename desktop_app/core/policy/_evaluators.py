"""Bash constructs that evaluate text at run time: names bash reads as `name[subscript]` (the subscript is
arithmetic, and arithmetic runs `$(...)` held in a variable's value), arithmetic, prompt expansion, a
variable that moves where a program reads its configuration. Each makes a command un-analysable unless
it is proven inert (a literal name, literal arithmetic)."""

from __future__ import annotations

import re

from ._programs import PROGRAMS, git_subcommand
from ._shell_model import ShellAnalysis, SimpleCommand

WHY = "cannot tell what this runs: "
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NUMBER = re.compile(r"-?[0-9]+\Z")

# Expansion operators `${x@OP}` whose result is the value quoted or case-changed, never evaluated.
INERT_AT_OPERATORS = frozenset("QULu")
# Variables bash itself evaluates, or whose value is the text of another command: `${_@P}` runs what the
# previous command's last argument held.
EVALUATED_VARIABLES = frozenset({"_", "BASH_COMMAND"})

# Variables that change what runs or where a program reads its configuration.
_CONFIG_ENV = frozenset({
    "PATH", "ENV", "IFS", "PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "CDPATH",
    "GLOBIGNORE", "HOME", "PAGER", "EDITOR", "VISUAL", "MANPAGER", "MANOPT", "BROWSER", "TAR_OPTIONS",
    "GREP_OPTIONS", "RIPGREP_CONFIG_PATH", "POSIXLY_CORRECT", "EXECIGNORE", "INPUTRC", "SHELL", "GCONV_PATH",
    "OPENSSL_CONF", "WGETRC", "CURL_HOME", "PERLLIB", "RUBYLIB", "RUBYOPT", "LOCPATH", "NLSPATH", "HOSTALIASES",
    "TMPDIR", "SSH_ASKPASS", "SUDO_ASKPASS", "TERMINFO", "ZDOTDIR", "FPATH",
})
_ARITHMETIC_ENV = frozenset({"OPTIND", "RANDOM", "SRANDOM", "HISTCMD", "SECONDS", "LINENO", "OPTERR"})
_CONFIG_ENV_PREFIXES = ("GIT_", "LD_", "DYLD_", "BASH_", "PYTHON", "PERL5", "PERL_", "NODE_", "NPM_CONFIG_",
                        "npm_config_", "PIP_", "LESS", "JAVA_", "_JAVA_", "XDG_", "SSH_", "DOCKER_", "MALLOC_",
                        "GLIBC_", "CARGO_", "RUSTC", "RUSTFLAGS", "GOFLAGS", "UV_")


def config_variable(name: str) -> bool:
    return name in _CONFIG_ENV or name in _ARITHMETIC_ENV or name.startswith(_CONFIG_ENV_PREFIXES)


def literal_number(text: str) -> bool:
    return bool(_NUMBER.match(text))


def evaluated_text(cmd: SimpleCommand) -> str | None:
    """Why `cmd` evaluates text the analysis cannot see (a name with a subscript given to a builtin, a
    variable that moves configuration), or None."""
    for e in cmd.env:
        name = e.split("=", 1)[0].rstrip("+")
        if name in _ARITHMETIC_ENV:
            return f"{WHY}bash evaluates a value given to {name} as arithmetic, which can run commands"
        if config_variable(name):
            return f"{WHY}{name}=… changes what runs or where a program reads its configuration"
    if not cmd.argv:
        return None
    for outer, inner in zip(cmd.layers, cmd.layers[1:], strict=False):
        if outer and inner and outer[0] == "builtin" and inner[0] not in BASH_BUILTINS:
            return f"{WHY}builtin {inner[0]} (not a bash builtin the judge knows)"
        if outer and inner and outer[0] == "command" and inner[0] not in BASH_BUILTINS and inner[0] not in PROGRAMS:
            return f"{WHY}command {inner[0]} (neither a bash builtin nor a program the judge knows)"
    if cmd.program == "git" and cmd.kinds[0] == "lit":
        problem = git_subcommand(cmd.argv)[1]
        if problem is not None:
            return WHY + problem
    check = _NAME_TAKERS.get(cmd.program)
    if check is None:
        return None
    for name, kind in check(cmd):
        if name.startswith(("-", "+")) and kind == "dyn":
            return f"{WHY}{cmd.program} {name} makes values arithmetic or names, which bash evaluates"
        if kind != "lit" or not _NAME.match(name):
            return f"{WHY}{cmd.program} is given the name {name!r}, which bash evaluates (a subscript is arithmetic)"
        if config_variable(name) and cmd.program in _DECLARERS:
            return f"{WHY}{cmd.program} sets {name}, which changes what runs"
    return None


def _options(cmd: SimpleCommand, with_arg: str, named: str = "") -> tuple[list[tuple[str, str]], int]:
    """Bash builtin getopt: the values of the options in `named` (they are names), and where operands begin."""
    names: list[tuple[str, str]] = []
    argv, kinds = cmd.argv, cmd.kinds
    i = 1
    while i < len(argv):
        v = argv[i]
        if v == "--":
            return names, i + 1
        if not v.startswith("-") or v == "-" or kinds[i] != "lit":
            break
        for k in range(1, len(v)):
            if v[k] in with_arg:
                value, kind = (v[k + 1:], kinds[i]) if k + 1 < len(v) else (
                    (argv[i + 1], kinds[i + 1]) if i + 1 < len(argv) else ("", "lit"))
                if v[k] in named:
                    names.append((value, kind))
                i += 0 if k + 1 < len(v) else 1
                break
        i += 1
    return names, i


def _operands_as_names(with_arg: str, named: str = "") -> object:
    def check(cmd: SimpleCommand) -> list[tuple[str, str]]:
        names, i = _options(cmd, with_arg, named)
        return names + list(zip(cmd.argv[i:], cmd.kinds[i:], strict=True))
    return check


def _printf(cmd: SimpleCommand) -> list[tuple[str, str]]:
    return _options(cmd, "v", "v")[0]


def _declared(cmd: SimpleCommand) -> list[tuple[str, str]]:
    """declare/local/export/readonly/typeset: each operand's name (before `=` or `+=`); -i and -n make
    values arithmetic or names, so they count as an unknown name."""
    out: list[tuple[str, str]] = []
    operands = False
    for v, k in zip(cmd.argv[1:], cmd.kinds[1:], strict=True):
        if not operands and v == "--":
            operands = True
        elif not operands and k == "lit" and v[:1] in "-+" and len(v) > 1:
            if "i" in v[1:] or "n" in v[1:]:
                out.append((v, "dyn"))
        else:
            operands = True
            name = v.split("=", 1)[0].removesuffix("+") if k == "lit" else v
            out.append((name, k))
    return out


def _getopts(cmd: SimpleCommand) -> list[tuple[str, str]]:
    return list(zip(cmd.argv[2:3], cmd.kinds[2:3], strict=True))


def _tested(cmd: SimpleCommand) -> list[tuple[str, str]]:
    """test -v NAME / -R NAME anywhere in the expression."""
    return [(cmd.argv[i + 1], cmd.kinds[i + 1]) if i + 1 < len(cmd.argv) else ("", "dyn")
            for i, v in enumerate(cmd.argv) if i > 0 and v in ("-v", "-R")]


BASH_BUILTINS = frozenset(
    ". : [ alias bg bind break builtin caller cd command compgen complete compopt continue declare dirs "
    "disown echo enable eval exec exit export false fc fg getopts hash help history jobs kill let local logout "
    "mapfile popd printf pushd pwd read readarray readonly return set shift shopt source suspend test times "
    "trap true type typeset ulimit umask unalias unset wait".split())
_DECLARERS = frozenset({"declare", "typeset", "local", "export", "readonly"})
_NAME_TAKERS = {
    "printf": _printf,
    "read": _operands_as_names("adinNptu", "a"),
    "wait": lambda c: _options(c, "p", "p")[0],
    "getopts": _getopts,
    "unset": _operands_as_names(""),
    "test": _tested,
    "[": _tested,
    **dict.fromkeys(_DECLARERS, _declared),
}


def unanalysable(a: ShellAnalysis) -> str:
    """The reason an un-analysable command asks: "cannot tell what this runs: <the construct>"."""
    first = a.problems[0] if a.problems else "it is not understood"
    return first if first.startswith(WHY) else WHY + first

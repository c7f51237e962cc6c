"""The programs the judge knows: the options each accepts, which of them write a file or run a program, and
which operand a program writes, with options resolved as the program resolves them (GNU getopt: a long
option by any unambiguous prefix, short options bundled, an option's value attached or in the next word).
A command is read-only only when its program is here and every option of it is known to only read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Effect = Literal["read", "write", "run", "unknown"]
_GLOB_START = frozenset("*?[{")


@dataclass(frozen=True, slots=True)
class Spec:
    """One program's options. `closed`: every option it accepts is listed; otherwise every option reads
    except those named in `writes` and `runs`, which also catch their abbreviations and bundles."""

    short_arg: str = ""  # short options that take a value
    short_flag: str = ""  # short options without
    long_arg: frozenset[str] = frozenset()  # long options that take a value (`--key=v` or `--key v`)
    long_flag: frozenset[str] = frozenset()  # long options without (or with an optional `=v`)
    writes: frozenset[str] = frozenset()  # options whose value is a file written ("-o", "--output")
    runs: frozenset[str] = frozenset()  # options that run a program
    closed: bool = True
    numeric: bool = False  # `head -5`
    write_operand: int | None = None  # the operand (0-based) it writes: `uniq in OUT`
    plus_runs: bool = False  # `less +CMD`: a leading + runs a command
    exact: bool = False  # options are whole words, never abbreviated or bundled (find's `-exec`, `-delete`)

    @property
    def pure(self) -> bool:
        """No option of it writes or runs: an option only known when it runs cannot make it do either."""
        return not (self.writes or self.runs or self.plus_runs) and self.write_operand is None


def _spec(short_arg: str = "", short_flag: str = "", long_arg: str = "", long_flag: str = "", writes: str = "",
          runs: str = "", **kw: object) -> Spec:
    return Spec(short_arg, short_flag, frozenset(long_arg.split()), frozenset(long_flag.split()),
                frozenset(writes.split()), frozenset(runs.split()), **kw)  # type: ignore[arg-type]


_READS = Spec(closed=False)  # every option only reads (GNU ls, cat, grep ...: none writes or runs)

PROGRAMS: dict[str, Spec] = {
    **dict.fromkeys((
        "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "pwd", "echo", "printf", "true", "false", ":",
        "whoami", "id", "uname", "which", "type", "stat", "du", "df", "basename", "dirname", "realpath", "readlink",
        "cut", "tr", "diff", "cmp", "md5sum", "sha1sum", "sha256sum", "sha512sum", "test", "[", "[[", "nl", "column",
        "printenv", "jq", "cd", "pushd", "popd", "whereis", "ps", "uptime", "free", "nproc", "seq", "expr", "rev",
        "tac", "od", "hexdump", "xxd", "strings", "comm", "paste", "fold", "locale", "groups", "users", "sleep",
        "env", "command", "wc", "look", "cksum", "b2sum", "numfmt", "join", "expand", "unexpand", "fmt", "pr",
        "getconf", "arch", "tty", "logname", "dircolors", "lsblk", "lscpu", "base32", "base64", "zcat", "bzcat",
        "xzcat",
    ), _READS),
    "xxd": Spec(closed=False, write_operand=1),
    "find": _spec(runs="-exec -execdir -ok -okdir", writes="-delete -fprint -fprint0 -fls -fprintf", closed=False,
                  exact=True),
    "sort": _spec(
        "k o S t T", "b d f g i M h n R r V c C m s u z",
        "--key --output --buffer-size --field-separator --temporary-directory --sort --random-source "
        "--batch-size --compress-program --files0-from --parallel",
        "--ignore-leading-blanks --dictionary-order --ignore-case --general-numeric-sort --ignore-nonprinting "
        "--month-sort --human-numeric-sort --numeric-sort --random-sort --reverse --version-sort --check "
        "--merge --stable --unique --zero-terminated --debug --help --version",
        writes="-o --output -T --temporary-directory", runs="--compress-program"),
    "uniq": _spec("f s w", "c d D i u z", "--skip-fields --skip-chars --check-chars",
                  "--count --repeated --all-repeated --group --ignore-case --unique --zero-terminated --help "
                  "--version", write_operand=1),
    "tree": _spec(writes="-o", closed=False),
    "file": _spec(writes="-C --compile", closed=False),
    "less": _spec(writes="-o -O --log-file --LOG-FILE",
                  runs="-k --lesskey-file --lesskey-src --lesskey-content --lesskey", closed=False, plus_runs=True),
    "more": _spec(writes="-o -O --log-file --LOG-FILE", runs="-k --lesskey-file", closed=False, plus_runs=True),
    "rg": _spec(runs="--pre -z --search-zip --hostname-bin", closed=False),
    "date": _spec("d f r I s", "u R", "--date --file --reference --iso-8601 --rfc-3339",
                  "--utc --universal --rfc-email --debug --help --version", writes="-s --set", write_operand=0),
    "hostname": _spec("F", "a A d f i I s y", "", "--alias --all-fqdns --domain --fqdn --long --ip-address "
                      "--all-ip-addresses --short --yp --nis --help --version", writes="-F --file", write_operand=0),
}

# git: global options that only change how it prints; anything else (-C, -c, --git-dir, --work-tree,
# --exec-path, --namespace, --config-env ...) moves where it reads its configuration and is un-analysable.
GIT_SAFE_GLOBALS = frozenset({"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--glob-pathspecs",
                              "--noglob-pathspecs", "--icase-pathspecs", "--no-replace-objects", "--version",
                              "--help", "-h"})
GIT_READS: dict[str, Spec] = {
    **{s: _spec(writes="--output", runs="--ext-diff --textconv", closed=False)
       for s in ("log", "diff", "show", "shortlog", "whatchanged")},
    **dict.fromkeys(("status", "rev-parse", "ls-files", "describe", "ls-tree", "merge-base", "name-rev",
                     "count-objects", "show-ref", "var", "check-ignore", "check-attr"), _READS),
    **dict.fromkeys(("cat-file", "blame", "annotate", "for-each-ref", "rev-list", "diff-tree", "diff-files",
                     "diff-index"), _spec(runs="--textconv --ext-diff --filters", writes="--output", closed=False)),
    "ls-remote": _spec(runs="--upload-pack -u", closed=False),
    "grep": _spec(runs="-O --open-files-in-pager --textconv --ext-grep", closed=False),
}
# git subcommands that list without arguments and change things with them
GIT_LISTERS = frozenset({"branch", "tag", "remote", "stash", "worktree", "reflog", "config", "notes", "submodule"})


@dataclass(slots=True)
class Judged:
    """What a command's words do by the table: its effect, the word that decided it, and its argv with
    long options spelled out and short bundles split (for deny rules that name an option)."""

    effect: Effect
    why: str = ""
    canonical: list[str] = field(default_factory=list)
    in_table: bool = True  # False: the program (or git subcommand) is not in the table at all
    by_option: bool = False  # an option (or a word that may become one) decided it, not an operand


def judge_words(name: str, spec: Spec, argv: tuple[str, ...], kinds: tuple[str, ...],
                open_args: bool = False) -> Judged:
    out = Judged("read", canonical=[argv[0]])
    if open_args and not spec.pure:
        return Judged("unknown", f"{name} is given arguments only known when it runs", list(argv), by_option=True)
    operands: list[str] = []
    i, options = 1, True
    while i < len(argv):
        v, k = argv[i], kinds[i]
        i += 1
        if options and v == "--":
            options = False
            out.canonical.append(v)
            continue
        if options and k != "lit" and not spec.pure and _could_be_option(v, k):
            out.canonical += argv[i - 1:]
            return _worse(out, "unknown", f"{name} is given {v!r}, which may become an option when it runs")
        if not options or k != "lit" or not v.startswith(("-", "+")) or v in ("-", "+"):
            operands.append(v)
            out.canonical.append(v)
            continue
        if v.startswith("+"):
            if spec.plus_runs:
                out.canonical += argv[i - 1:]
                return _worse(out, "run", f"{name} {v} runs a command")
            operands.append(v)
            out.canonical.append(v)
            continue
        if spec.numeric and v[1:].isdigit():
            out.canonical.append(v)
            continue
        if spec.exact:
            if v in spec.runs or v in spec.writes:
                out.canonical += argv[i - 1:]
                return _worse(out, "run" if v in spec.runs else "write",
                              f"{name} {v} {'runs a program' if v in spec.runs else 'writes or deletes files'}")
            out.canonical.append(v)
            continue
        used = _long(name, spec, v, argv, i, out) if v.startswith("--") else _short(name, spec, v, argv, i, out)
        if used is None:
            out.canonical += argv[i:]
            return out
        i += used
    if spec.write_operand is not None and len(operands) > spec.write_operand:
        if name != "date" or not operands[spec.write_operand].startswith("+"):
            return _worse(out, "write", f"{name} writes {operands[spec.write_operand]}", by_option=False)
    return out


def _worse(out: Judged, effect: Effect, why: str, by_option: bool = True) -> Judged:
    out.effect, out.why, out.by_option = effect, why, by_option
    return out


def _could_be_option(v: str, kind: str) -> bool:
    """A word only known when it runs that may begin with `-` or `+` (`~/x` expands to a path: never)."""
    if v.startswith(("~/", "/")) or v == "~":
        return False
    return kind == "dyn" or v[:1] in _GLOB_START or v.startswith(("-", "+"))


def _resolve_long(spec: Spec, key: str) -> tuple[str | None, bool]:
    """GNU getopt_long: an exact name, else the one option `key` is a prefix of. (name, takes a value);
    name None when unknown or ambiguous. An open spec resolves only to its writing or running options."""
    names = spec.long_arg | spec.long_flag | {o for o in spec.writes | spec.runs if o.startswith("--")}
    if key in names:
        return key, key in spec.long_arg
    hits = sorted(n for n in names if n.startswith(key))
    if len(hits) == 1:
        return hits[0], hits[0] in spec.long_arg
    if not spec.closed:
        risky = [n for n in spec.writes | spec.runs if n.startswith(key)]
        return (risky[0] if risky else key), False
    return None, False


def _long(name: str, spec: Spec, v: str, argv: tuple[str, ...], i: int, out: Judged) -> int | None:
    key, eq, value = v.partition("=")
    full, takes = _resolve_long(spec, key)
    if full is None:
        _worse(out, "unknown", f"{name} {key} is an option the judge does not know")
        return None
    out.canonical.append(f"{full}={value}" if eq else full)
    if full in spec.runs or full in spec.writes:
        runs = full in spec.runs
        _worse(out, "run" if runs else "write", f"{name} {v} {'runs a program' if runs else 'writes a file'}")
        return None
    if takes and not eq:
        if i < len(argv):
            out.canonical.append(argv[i])
        return 1
    return 0


def _short(name: str, spec: Spec, v: str, argv: tuple[str, ...], i: int, out: Judged) -> int | None:
    if not spec.closed:
        bad = next((o for o in (*spec.runs, *spec.writes) if len(o) == 2 and o[1] in v[1:]), None)
        if bad is not None:
            out.canonical.append(v)
            _worse(out, "run" if bad in spec.runs else "write", f"{name} {v} holds {bad}, which "
                   f"{'runs a program' if bad in spec.runs else 'writes a file'}")
            return None
        out.canonical.append(v)
        return 0
    for k in range(1, len(v)):
        c = v[k]
        if c in spec.short_arg.split():
            out.canonical.append("-" + c)
            if "-" + c in spec.writes:
                out.canonical += [v[k + 1:]] if k + 1 < len(v) else []
                _worse(out, "write", f"{name} -{c} writes a file")
                return None
            if k + 1 < len(v):
                out.canonical.append(v[k + 1:])
                return 0
            if i < len(argv):
                out.canonical.append(argv[i])
            return 1
        if c not in spec.short_flag.split():
            _worse(out, "unknown", f"{name} -{c} is an option the judge does not know")
            return None
        out.canonical.append("-" + c)
    return 0


def git_subcommand(argv: tuple[str, ...]) -> tuple[int, str | None]:
    """Where git's subcommand is, after its global options; the problem when a global option moves its
    configuration or is not known (None when every global option is safe)."""
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] not in GIT_SAFE_GLOBALS:
            return i, f"git {argv[i].split('=', 1)[0]} changes where git reads its configuration"
        i += 1
    return i, None


SYSTEM_BIN = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/", "/usr/local/sbin/")


def judge_program(argv: tuple[str, ...], kinds: tuple[str, ...], open_args: bool = False, path: str = "") -> Judged:
    """The effect of one simple command by the table; "unknown" for a program or option it does not hold.
    `path` is the program as written: `./sort` is a file of the workspace, not the sort the table knows."""
    if not argv:
        return Judged("read")
    name = argv[0]
    if kinds[0] != "lit":
        return Judged("unknown", "its program is only known when it runs", list(argv), in_table=False)
    if "/" in path and not path.startswith(SYSTEM_BIN):
        return Judged("unknown", f"runs {path}, a program the judge does not know", list(argv), in_table=False)
    if name == "git":
        return _judge_git(argv, kinds, open_args)
    spec = PROGRAMS.get(name)
    if spec is None:
        return Judged("unknown", f"runs {name}, which can change things", list(argv), in_table=False)
    return judge_words(name, spec, argv, kinds, open_args)


def _judge_git(argv: tuple[str, ...], kinds: tuple[str, ...], open_args: bool) -> Judged:
    i, problem = git_subcommand(argv)
    if problem is not None:
        return Judged("unknown", problem, list(argv))
    if i >= len(argv):
        return Judged("read", canonical=list(argv))
    sub = argv[i]
    if kinds[i] != "lit":
        return Judged("unknown", "git's subcommand is only known when it runs", list(argv))
    rest, rest_kinds = argv[i:], kinds[i:]
    if sub == "stash" and rest[1:2] not in (("list",), ("show",)):
        return Judged("write", "git stash changes the working tree or the stash", list(argv))
    if sub in GIT_LISTERS:
        if len(rest) == 1 or (sub == "remote" and rest[1:] == ("-v",)) or (sub == "branch" and all(
                x in ("-a", "-r", "-v", "-vv", "--list", "--all", "--remotes") for x in rest[1:])):
            return Judged("read", canonical=list(argv))
        return Judged("write", f"git {sub} with arguments changes things", list(argv))
    spec = GIT_READS.get(sub)
    if spec is None:
        return Judged("unknown", f"runs git {sub}, which can change things", list(argv), in_table=False)
    j = judge_words(f"git {sub}", spec, rest, rest_kinds, open_args)
    j.canonical = [*argv[:i], *j.canonical]
    return j


def widening_adds_only_reads(words: list[str]) -> bool:
    """Whether a rule `WORDS *` allows only reads whatever words follow: the program (git: the subcommand)
    is in the table and no option or operand of it writes or runs."""
    if not words:
        return False
    if words[0] == "git":
        return len(words) == 2 and words[1] in GIT_READS and GIT_READS[words[1]].pure
    spec = PROGRAMS.get(words[0])
    return len(words) == 1 and spec is not None and spec.pure

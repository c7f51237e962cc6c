"""What a shell command really runs: every simple command, wherever it sits, with its effective program,
environment and redirections, read with tree-sitter-bash. Anything not fully understood makes the command
un-analysable (fail closed), with a reason in plain words."""

from __future__ import annotations

from dataclasses import replace

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from ._evaluators import (
    EVALUATED_VARIABLES,
    INERT_AT_OPERATORS,
    WHY,
    evaluated_text,
    literal_number,
)
from ._shell_model import (
    OPAQUE_PROGRAMS,
    Redirect,
    ShellAnalysis,
    SimpleCommand,
    WalkContext,
    Word,
)
from ._wrappers import Unwrap

# A command longer than this is never allowed without a person, and is not parsed.
AUTO_ALLOW_LIMIT = 4096
PARSE_LIMIT = AUTO_ALLOW_LIMIT  # tree-sitter recovers from some errors in quadratic time: keep it small
_MAX_NESTING = 60  # syntax nesting: deeper is un-analysable (and keeps the walk's recursion bounded)
_MAX_SCRIPT_DEPTH = 3  # `bash -c 'bash -c "..."'` levels followed
_MAX_COMMANDS = 2000

_PARSER = Parser(Language(tree_sitter_bash.language()))
_OK_BYTES = frozenset(range(0x20, 0x7F)) | {0x09, 0x0A}
_GLOB_CHARS = frozenset("*?[]{}")


def analyse_command(command: str, *, _depth: int = 0) -> ShellAnalysis:
    """Every simple command that `command` can run, or the reasons it cannot be analysed."""
    w = _Walker(command)
    w.run(WalkContext(depth=_depth))
    return ShellAnalysis(command, tuple(w.commands), tuple(dict.fromkeys(w.problems)), tuple(w.functions))


def _precheck(command: str) -> list[str]:
    problems = []
    if len(command) > PARSE_LIMIT:
        return [f"it is {len(command)} characters long, more than the {PARSE_LIMIT} that are analysed"]
    bad = next((c for c in command if ord(c) not in _OK_BYTES), None)
    if bad is not None:
        problems.append(f"it contains the character {bad!r}, outside printable ASCII, tab and newline")
    i = command.find("\\\n")
    while i >= 0:
        if i == 0 or command[i - 1] not in " \t":
            problems.append("a line continuation (backslash-newline) inside a word")
            break
        i = command.find("\\\n", i + 2)
    return problems


class _Walker:
    def __init__(self, source: str) -> None:
        self.source = source
        self.commands: list[SimpleCommand] = []
        self.problems: list[str] = []
        self.functions: list[str] = []
        self._pipes = 0

    def problem(self, why: str) -> None:
        self.problems.append(why)

    def run(self, ctx: WalkContext) -> None:
        self.problems += _precheck(self.source)
        if len(self.source) > PARSE_LIMIT:
            return
        root = _PARSER.parse(self.source.encode("ascii", "replace")).root_node
        skipped = _skipped_text(root, self.source)
        if skipped is not None:
            self.problem(f"the parser skipped {skipped!r}, which bash reads")
        self.functions = _function_names(root)
        self.stmt(root, ctx, 0)
        if len(self.commands) > _MAX_COMMANDS:
            self.problem(f"it holds more than {_MAX_COMMANDS} commands")

    # -- statements --------------------------------------------------------------------------------
    def stmt(self, node: Node, ctx: WalkContext, nest: int) -> None:
        if nest > _MAX_NESTING:
            self.problem("it is nested too deeply")
            return
        if node.is_missing or node.type == "ERROR" or node.is_error:
            self.problem(f"bash would read {_snip(node)} differently (a syntax error)")
            return
        handler = _STATEMENTS.get(node.type)
        if handler is None:
            self.problem(f"the construct {node.type.replace('_', ' ')} ({_snip(node)}) is not understood")
            return
        handler(self, node, ctx, nest)

    def seq(self, node: Node, ctx: WalkContext, nest: int) -> None:
        """Children in order; a child followed by `&` runs in the background."""
        kids = node.children
        for i, child in enumerate(kids):
            if not child.is_named:
                if child.is_missing:
                    self.problem(f"bash would read {_snip(node)} differently (a syntax error)")
                continue
            bg = i + 1 < len(kids) and kids[i + 1].type == "&"
            self.stmt(child, replace(ctx, background=ctx.background or bg), nest + 1)

    def pipeline(self, node: Node, ctx: WalkContext, nest: int) -> None:
        pid = self._new_pipe()
        stage = 0
        for child in node.children:
            if child.is_named:
                self.stmt(child, replace(ctx, pipe=(*ctx.pipe, (pid, stage))), nest + 1)
                stage += 1

    def _new_pipe(self) -> int:
        self._pipes += 1
        return self._pipes

    def function_definition(self, node: Node, ctx: WalkContext, nest: int) -> None:
        name = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        fname = name.text.decode() if name is not None and name.text else ""
        if not fname or body is None or fname in OPAQUE_PROGRAMS:
            self.problem(f"the function {fname or '?'} cannot be analysed")
            return
        for child in node.children:
            if child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                self.problem("a function with redirections cannot be analysed")
        self.stmt(body, replace(ctx, function=fname), nest + 1)

    def redirected(self, node: Node, ctx: WalkContext, nest: int) -> None:
        body = node.child_by_field_name("body")
        redirects: list[Redirect] = []
        extra: list[Word] = []
        follow: list[tuple[Node, WalkContext]] = []
        owner: list[tuple[int, int]] = []
        slot = self.reserve() if body is not None and body.type == "command" else None
        saved, self._current = self._current, slot
        for child in node.children:
            if child == body or not child.is_named:
                continue
            self.redirect(child, ctx, nest, redirects, extra, follow, owner)
        self._current = saved
        inner = replace(ctx, redirects=ctx.redirects + tuple(redirects), pipe=ctx.pipe + tuple(owner))
        if body is None:
            self.problem(f"a redirection without a command ({_snip(node)})")
        elif body.type == "command":
            self.command(body, inner, nest + 1, extra, slot)
        else:
            if extra:
                self.problem(f"words after a redirection of a compound command ({_snip(node)})")
            self.stmt(body, inner, nest + 1)
        for n, c in follow:
            self.stmt(n, c, nest + 1)

    # -- redirections ------------------------------------------------------------------------------
    def redirect(self, node: Node, ctx: WalkContext, nest: int, out: list[Redirect], extra: list[Word],
                 follow: list[tuple[Node, WalkContext]], owner: list[tuple[int, int]]) -> None:
        if node.type == "file_redirect":
            self.file_redirect(node, ctx, nest, out, extra)
        elif node.type == "herestring_redirect":
            words = [c for c in node.children if c.is_named]
            for w in words:
                self.word(w, ctx, nest)
            out.append(Redirect("<<<", None, ""))
        elif node.type == "heredoc_redirect":
            self.heredoc(node, ctx, nest, out, extra, follow, owner)
        else:
            self.problem(f"the redirection {_snip(node)} is not understood")

    def file_redirect(self, node: Node, ctx: WalkContext, nest: int, out: list[Redirect], extra: list[Word]) -> None:
        fd: int | None = None
        op = ""
        dests: list[Node] = []
        for child in node.children:
            if child.type == "file_descriptor":
                fd = int(child.text or b"0") if (child.text or b"").isdigit() else None
                if fd is None:
                    self.problem(f"the file descriptor in {_snip(node)} is not understood")
            elif not child.is_named:
                op += (child.text or b"").decode()
            elif node.field_name_for_child(node.children.index(child)) == "destination":
                dests.append(child)
            else:
                self.problem(f"the redirection {_snip(node)} is not understood")
        if op not in _REDIRECT_OPS:
            self.problem(f"the redirection {_snip(node)} is not understood")
            return
        if not dests:
            if op not in (">&-", "<&-"):
                self.problem(f"the redirection {_snip(node)} has no target")
            out.append(Redirect(op, fd, "-"))
            return
        target = self.word(dests[0], ctx, nest)
        if not target.literal:
            self.problem(f"the redirection {_snip(node)} goes to a path only known when it runs")
        out.append(Redirect(op, fd, target.value, target.literal))
        extra += [self.word(d, ctx, nest) for d in dests[1:]]  # `ls > a b`: b is ls's argument

    def heredoc(self, node: Node, ctx: WalkContext, nest: int, out: list[Redirect], extra: list[Word],
                follow: list[tuple[Node, WalkContext]], owner: list[tuple[int, int]]) -> None:
        op, start, body_text, end = "", "", "", None
        for child in node.children:
            t = child.type
            if t in ("<<", "<<-"):
                op = t
            elif t == "heredoc_start":
                start = (child.text or b"").decode()
            elif t == "heredoc_body":
                body_text = (child.text or b"").decode()
            elif t == "heredoc_end":
                row = child.start_point[0]
                end = self.source.split("\n")[row] if row < self.source.count("\n") + 1 else ""
                end = end.lstrip("\t") if op == "<<-" else end
            elif t == "file_redirect":
                self.file_redirect(child, ctx, nest, out, extra)
            elif t == "pipeline":
                owner.append(self.heredoc_pipe(child, ctx, follow))
            elif t in ("&&", "||", ";", "&", "|"):
                continue
            elif child.is_named and node.field_name_for_child(node.children.index(child)) == "right":
                follow.append((child, ctx))
            else:
                self.problem(f"the here-document {_snip(node)} is not understood")
        delim = _heredoc_delimiter(start)
        quoted = delim != start
        if not delim or end != delim:
            self.problem(f"the here-document {_snip(node)} does not end where bash ends it")
        elif any((ln.lstrip("\t") if op == "<<-" else ln) == delim for ln in body_text.split("\n")[:-1]):
            self.problem(f"the here-document {_snip(node)} does not end where bash ends it")
        if not quoted and any(c in body_text for c in "$`\\"):
            self.problem("a here-document whose body expands (unquoted delimiter with $, ` or \\)")
        out.append(Redirect(op, None, ""))

    def heredoc_pipe(self, node: Node, ctx: WalkContext, follow: list[tuple[Node, WalkContext]]) -> tuple[int, int]:
        """`cat <<EOF | sh`: tree-sitter hangs the rest of the pipeline under the here-doc; the command
        that owns the here-doc is stage 0 of that pipeline."""
        pid = self._new_pipe()
        stage = 1
        for child in node.children:
            if child.is_named:
                follow.append((child, replace(ctx, pipe=(*ctx.pipe, (pid, stage)))))
                stage += 1
        return (pid, 0)

    # -- words -------------------------------------------------------------------------------------
    def word(self, node: Node, ctx: WalkContext, nest: int) -> Word:
        """Quote removal of a word; substitutions in it are analysed as commands of their own."""
        if nest > _MAX_NESTING:
            self.problem("it is nested too deeply")
            return Word(_text(node), "dyn")
        t = node.type
        if t in ("word", "number"):
            return _plain_word(_text(node))
        if t == "raw_string":
            return Word(_text(node)[1:-1])
        if t == "string":
            return self.dq_string(node, ctx, nest)
        if t == "concatenation":
            if any(not c.is_named for c in node.children):
                self.problem(f"the word {_snip(node)} is not understood")
            parts = [self.word(c, ctx, nest + 1) for c in node.children if c.is_named]
            kind = "dyn" if any(p.kind == "dyn" for p in parts) else "glob" if any(
                p.kind == "glob" for p in parts) else "lit"
            return Word(_text(node) if kind == "dyn" else "".join(p.value for p in parts), kind)
        if t in ("simple_expansion", "expansion"):
            self.expansion(node, ctx, nest)
            return Word(_text(node), "dyn")
        if t in ("command_substitution", "process_substitution"):
            self.substitution(node, ctx, nest)
            return Word(_text(node), "dyn")
        if t in ("brace_expression", "extglob_pattern"):
            return Word(_text(node), "glob")
        if t in ("ansi_c_string", "translated_string"):
            self.problem(f"ANSI-C or locale quoting ({_snip(node)})")
        elif t == "arithmetic_expansion":
            self.problem(f"{WHY}arithmetic ({_snip(node)}) evaluates variable values, which can run commands")
        else:
            self.problem(f"the word {_snip(node)} ({t.replace('_', ' ')}) is not understood")
        return Word(_text(node), "dyn")

    def dq_string(self, node: Node, ctx: WalkContext, nest: int) -> Word:
        parts: list[str] = []
        dynamic = False
        for child in node.children:
            if not child.is_named:
                if child.type != '"':
                    self.problem(f"the string {_snip(node)} is not understood")
                continue
            if child.type == "string_content":
                parts.append(_dq_unescape(_text(child)))
            else:
                self.word(child, ctx, nest + 1)
                dynamic = True
        return Word(_text(node), "dyn") if dynamic else Word("".join(parts))

    def expansion(self, node: Node, ctx: WalkContext, nest: int) -> None:
        """`$x`, `${x...}`: what bash evaluates in it (a subscript, a substring offset, `@P`, `${!x}`,
        `$_`) makes it un-analysable; the words of its operators (`${x:-$(id)}`) are analysed."""
        kids = node.children
        substring = False
        for i, child in enumerate(kids):
            t = child.type
            if t == "subscript":
                index = child.child_by_field_name("index")
                if index is None or not (_text(index).isdigit() or _text(index) in ("@", "*")):
                    self.problem(f"{WHY}an array subscript ({_snip(child)}) is arithmetic, which can run commands")
            elif t == "!" and node.type == "expansion" and i == 1:
                self.problem(f"{WHY}indirect expansion ({_snip(node)})")
            elif t in ("variable_name", "special_variable_name") and _text(child) in EVALUATED_VARIABLES and (
                    i <= 2 and not substring):
                self.problem(f"{WHY}{_snip(node)} holds the text of another command")
            elif t == "@" and node.type == "expansion":
                op = _text(kids[i + 1]) if i + 1 < len(kids) else ""
                if op not in INERT_AT_OPERATORS:
                    self.problem(f"{WHY}the expansion operator @{op} ({_snip(node)})")
            elif t == ":" and node.type == "expansion":
                substring = True
            elif substring and child.is_named:
                if not (t == "number" and literal_number(_text(child))):
                    self.problem(f"{WHY}a substring offset ({_snip(node)}) is arithmetic, which can run commands")
            elif child.is_named and t not in ("variable_name", "special_variable_name"):
                self.word(child, ctx, nest + 1)

    def substitution(self, node: Node, ctx: WalkContext, nest: int) -> None:
        if _text(node).lstrip().startswith("`") and "\\" in _text(node):
            self.problem(f"backslashes inside backquotes ({_snip(node)}) are read twice by bash")
        # what runs inside sees the environment of its command's shell, not its command's wrappers
        inner = replace(ctx, parent=self._current, background=False, redirects=(), layers=())
        for child in node.children:
            if child.is_named:
                self.stmt(child, inner, nest + 1)
            elif child.is_missing:
                self.problem(f"bash would read {_snip(node)} differently (a syntax error)")

    _current: int | None = None

    # -- simple commands ---------------------------------------------------------------------------
    def nested(self, script: str, ctx: WalkContext) -> list[SimpleCommand]:
        """The commands of a `sh -c` script, analysed again under `ctx` (its wrappers, environment and
        redirections)."""
        if ctx.depth + 1 > _MAX_SCRIPT_DEPTH:
            self.problem("shell scripts nested too deeply")
            return []
        sub = _Walker(script)
        sub._pipes = self._pipes
        sub.run(replace(ctx, depth=ctx.depth + 1))
        self._pipes = sub._pipes
        self.problems += [f"in a shell script: {p}" for p in sub.problems]
        base = len(self.commands) + 1  # the shell itself is added first
        return [replace(c, parent=ctx.parent if c.parent is None else base + c.parent) for c in sub.commands]

    def reserve(self) -> int:
        """A slot for a command whose substitutions are analysed before it (they point to it as parent)."""
        self.commands.append(None)  # type: ignore[arg-type]
        return len(self.commands) - 1

    def command(self, node: Node, ctx: WalkContext, nest: int, extra: list[Word] | None = None,
                slot: int | None = None) -> None:
        slot = self.reserve() if slot is None else slot
        saved, self._current = self._current, slot
        env: list[str] = list(ctx.env)
        words: list[Word] = []
        redirects: list[Redirect] = list(ctx.redirects)
        follow: list[tuple[Node, WalkContext]] = []
        owner: list[tuple[int, int]] = []
        for child in node.children:
            t = child.type
            if t == "variable_assignment":
                env.append(self.assignment(child, ctx, nest))
            elif t == "command_name":
                named = [c for c in child.children if c.is_named]
                words.append(self.word(named[0], ctx, nest + 1) if len(named) == 1 else Word(_text(child), "dyn"))
            elif t in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                self.redirect(child, ctx, nest, redirects, words, follow, owner)
            elif child.is_named:
                words.append(self.word(child, ctx, nest + 1))
            else:  # e.g. the `$` of `$"..."`, which tree-sitter leaves beside the string
                self.problem(f"{_snip(child)} in {_snip(node)} is not understood")
        words += extra or []
        self._current = saved
        base = replace(ctx, pipe=ctx.pipe + tuple(owner), env=tuple(env), redirects=tuple(redirects))
        cmds = Unwrap(self, base, _text(node)).run(words)
        if not cmds:
            self.commands[slot] = SimpleCommand((), (), env=base.env, redirects=base.redirects, text=_text(node))
        for i, cmd in enumerate(cmds):
            self.add(cmd, slot if i == 0 else None)
        for n, c in follow:
            self.stmt(n, c, nest + 1)

    def add(self, cmd: SimpleCommand, slot: int | None = None) -> None:
        why = evaluated_text(cmd)
        if why is not None:
            self.problem(why)
        if cmd.program in self.functions:
            cmd = replace(cmd, calls_function=True)
        if slot is None:
            self.commands.append(cmd)
        else:
            self.commands[slot] = cmd

    def assignment(self, node: Node, ctx: WalkContext, nest: int) -> str:
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if name is None or name.type != "variable_name":
            self.problem(f"the assignment {_snip(node)} is not understood")
            return _text(node)
        if value is None:
            return _text(name) + "="
        if value.type == "array":
            for c in value.children:
                if not c.is_named:
                    continue
                key = _text(c)[1:].split("]", 1)[0] if _text(c).startswith("[") else "0"
                if not key.isdigit():  # `a=([x]=1)`: the subscript is arithmetic on x's value
                    self.problem(f"{WHY}an array subscript ({_snip(c)}) is arithmetic, which can run commands")
                self.word(c, ctx, nest + 1)
            return _text(node)
        w = self.word(value, ctx, nest + 1)
        op = "+=" if "+=" in _text(node)[: len(_text(name)) + 2] else "="
        return f"{_text(name)}{op}{w.value}"

    def standalone_assignment(self, node: Node, ctx: WalkContext, nest: int) -> None:
        """`X=1; cmd`: an assignment changes what later commands see (PATH, IFS...), so it is a part of its
        own, with no program, that a rule must name to allow."""
        slot = self.reserve()
        saved, self._current = self._current, slot
        assigns = [node] if node.type == "variable_assignment" else [c for c in node.children if c.is_named]
        env = tuple(self.assignment(a, ctx, nest) for a in assigns)
        self._current = saved
        self.add(SimpleCommand((), (), env=ctx.env + env, redirects=ctx.redirects, text=_text(node),
                               background=ctx.background, pipe=ctx.pipe, parent=ctx.parent, function=ctx.function,
                               layers=ctx.layers), slot)

    def keyword_command(self, node: Node, ctx: WalkContext, nest: int) -> None:
        """`export A=1 B`, `local x`, `unset y`, `declare -r z`: a program named by its keyword."""
        slot = self.reserve()
        saved, self._current = self._current, slot
        words: list[Word] = []
        for child in node.children:
            if not child.is_named:
                words.append(Word(_text(child)))
            elif child.type == "variable_assignment":
                words.append(Word(self.assignment(child, ctx, nest)))
            elif child.type == "variable_name":
                words.append(Word(_text(child)))
            else:
                words.append(self.word(child, ctx, nest + 1))
        self._current = saved
        if any(w.value in ("-i", "-n") or w.value.startswith(("-i", "-n")) for w in words[1:2]):
            self.problem(f"{words[0].value} -i/-n evaluates values as arithmetic or names")
        self.add(_simple(words, ctx, _text(node)), slot)

    def test_command(self, node: Node, ctx: WalkContext, nest: int) -> None:
        """`[[ ... ]]` and `[ ... ]`: only their substitutions run; arithmetic and -v are refused."""
        slot = self.reserve()
        saved, self._current = self._current, slot
        stack = [c for c in node.children if c.is_named]
        while stack:
            n = stack.pop()
            if n.type == "test_operator" and _text(n) in ("-v", "-R"):
                operand = n.next_named_sibling
                if operand is None or operand.type != "word" or not _text(operand).isidentifier():
                    self.problem(f"{WHY}{_text(n)} is given a name bash evaluates ({_snip(node)})")
            elif n.type == "test_operator" and _text(n) in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
                if _text(node).startswith("[["):
                    self.problem(f"{WHY}{_text(n)} inside [[ ]] evaluates variable values as arithmetic")
            elif n.type in ("binary_expression", "unary_expression", "parenthesized_expression",
                            "negated_expression"):
                stack += [c for c in n.children if c.is_named]
            elif n.type in ("regex", "test_operator"):
                continue
            else:
                self.word(n, ctx, nest + 1)
        self._current = saved
        bracket = "[[" if _text(node).startswith("[[") else "["
        self.add(_simple([Word(bracket)], ctx, _text(node)), slot)

    def skip(self, node: Node, ctx: WalkContext, nest: int) -> None:
        return

    def compound(self, node: Node, ctx: WalkContext, nest: int) -> None:
        if node.children and node.children[0].type == "((":
            self.problem(f"{WHY}arithmetic ({_snip(node)}) evaluates variable values, which can run commands")
            return
        self.seq(node, ctx, nest)

    def words_then_seq(self, node: Node, ctx: WalkContext, nest: int) -> None:
        """for/case/select: their word lists expand (substitutions run), their bodies are statements."""
        for child in node.children:
            name = node.field_name_for_child(node.children.index(child)) if child.is_named else None
            if name == "value":
                self.word(child, ctx, nest + 1)
            elif name == "variable" or not child.is_named or child.type == "variable_name":
                continue
            else:
                self.stmt(child, ctx, nest + 1)


def _simple(words: list[Word], ctx: WalkContext, text: str) -> SimpleCommand:
    argv = tuple(w.value for w in words)
    return SimpleCommand(argv, tuple(w.kind for w in words), argv[0] if argv else "",
                         layers=(*ctx.layers, argv), env=ctx.env, redirects=ctx.redirects, text=text,
                         background=ctx.background, pipe=ctx.pipe, parent=ctx.parent, function=ctx.function)


def _skipped_text(root: Node, source: str) -> str | None:
    """Text between the children of a node that is not blank: tree-sitter dropped it (e.g. the `\\ ` of
    `"a"\\ b`), so its words are not bash's."""
    stack = [root]
    while stack:
        n = stack.pop()
        kids = n.children
        if not kids or n.type in ("heredoc_body", "comment"):
            continue
        edges = [n.start_byte] + [x for k in kids for x in (k.start_byte, k.end_byte)] + [n.end_byte]
        for a, b in zip(edges[0::2], edges[1::2], strict=False):
            gap = source[a:b].replace("\\\n", "")
            if gap.strip(" \t\n"):
                return gap
        stack += kids
    return None


def _function_names(root: Node) -> list[str]:
    names: list[str] = []
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type == "function_definition":
            name = n.child_by_field_name("name")
            if name is not None and name.text:
                names.append(name.text.decode())
        stack += n.children
    return names


_REDIRECT_OPS = frozenset({">", ">>", ">|", "&>", "&>>", ">&", "<", "<&", ">&-", "<&-", "<>"})

_STATEMENTS = {
    "program": _Walker.seq, "list": _Walker.seq, "subshell": _Walker.seq, "do_group": _Walker.seq,
    "compound_statement": _Walker.compound, "if_statement": _Walker.seq, "elif_clause": _Walker.seq,
    "else_clause": _Walker.seq, "while_statement": _Walker.seq, "negated_command": _Walker.seq,
    "case_item": _Walker.words_then_seq, "case_statement": _Walker.words_then_seq,
    "for_statement": _Walker.words_then_seq, "pipeline": _Walker.pipeline,
    "redirected_statement": _Walker.redirected, "function_definition": _Walker.function_definition,
    "command": _Walker.command, "variable_assignment": _Walker.standalone_assignment,
    "variable_assignments": _Walker.standalone_assignment, "declaration_command": _Walker.keyword_command,
    "unset_command": _Walker.keyword_command, "test_command": _Walker.test_command, "comment": _Walker.skip,
}


# -- quote removal ---------------------------------------------------------------------------------
def _text(node: Node) -> str:
    return (node.text or b"").decode("ascii", "replace")


def _snip(node: Node, n: int = 40) -> str:
    t = _text(node)
    return repr(t if len(t) <= n else t[:n] + "…")


def _plain_word(text: str) -> Word:
    """An unquoted word: backslashes removed; unquoted glob or brace characters make it a pattern."""
    out: list[str] = []
    glob = False
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        glob = glob or c in _GLOB_CHARS
        out.append(c)
        i += 1
    value = "".join(out)
    if text.startswith("~"):
        return Word(value, "dyn")
    if "$" in value or "`" in value:  # tree-sitter left an expansion inside a word
        return Word(text, "dyn")
    return Word(value, "glob" if glob else "lit")


def _dq_unescape(text: str) -> str:
    """Inside double quotes a backslash escapes only $ ` " \\ and newline."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in '$`"\\\n':
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _heredoc_delimiter(start: str) -> str:
    """The delimiter bash compares lines with: the start word after quote removal."""
    out: list[str] = []
    quote = ""
    i = 0
    while i < len(start):
        c = start[i]
        if quote:
            if c == quote:
                quote = ""
            else:
                out.append(c)
        elif c in "'\"":
            quote = c
        elif c == "\\" and i + 1 < len(start):
            out.append(start[i + 1])
            i += 1
        else:
            out.append(c)
        i += 1
    return "".join(out)

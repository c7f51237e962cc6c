"""The `agent-desk` argument tree: global options, one parser per subcommand group, the --help epilog."""

from __future__ import annotations

import argparse
from typing import Any

from ..core import (
    DEFAULT_MAX_STEPS,
    TOOL_PROFILES,
    ConsentKind,
)
from ._common import (
    EXIT_FAILED,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_MAX_STEPS,
    EXIT_OK,
    EXIT_PAUSED,
    EXIT_USAGE,
    MODES,
    version,
)

SUBCOMMANDS = ("run", "sessions", "audit", "images", "rules", "mcp", "doctor", "completion", "hooks", "consent",
               "network")


GLOBAL_FLAGS = ("-v", "--debug")


GLOBAL_VALUED = ("--db",)


EPILOG = f"""\
With no subcommand, opens the window: agent-desk [PATH] [--db URL] [-v] [--screenshot FILE ...]
(PATH: a project folder, made a project on first use; a running window receives it instead).

exit codes:
  {EXIT_OK}    done (a turn that ended normally)
  {EXIT_FAILED}    done, with a "no": a turn that failed, `audit verify` found the chain broken, an
       export rejected, a `doctor` check failed, `rules diff` found untrusted rules
  {EXIT_USAGE}    could not run as asked: bad arguments, a bad --db URL or image name, no API key,
       the Docker engine unreachable (the message says which, and the fix)
  {EXIT_PAUSED}    the turn was paused: the loop guard stopped the same call repeated (nothing waits;
       look at the calls, then `sessions resume ID "…"` to go on)
  {EXIT_MAX_STEPS}    the turn used all its steps (--max-steps)
  {EXIT_INTERNAL}   a bug in agent-desk: the traceback is in the log file (--debug prints it)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C), or the output closed mid-turn (`run … | head`)

environment: ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL override the stored key and endpoint;
ANTHROPIC_AUTH_TOKEN is sent as a bearer token (Authorization header) instead of a key, and wins over
ANTHROPIC_API_KEY; ANTHROPIC_MODEL is the model (--model > ANTHROPIC_MODEL > the settings);
AGENT_DESK_DB is the default --db."""


def _globals() -> argparse.ArgumentParser:
    """The options every command takes, before or after its subcommand (`audit list --db X`). Their default
    is SUPPRESS so that a subcommand's parser never overwrites a value given before it."""
    g = argparse.ArgumentParser(add_help=False)
    db = g.add_argument("--db", default=argparse.SUPPRESS, metavar="URL",
                        help="database URL or path (default: $AGENT_DESK_DB or the user data folder)")
    db.complete = {"bash": "_shtab_compgen_files", "zsh": "_files"}  # type: ignore[attr-defined]
    g.add_argument("-v", "--debug", action="store_true", default=argparse.SUPPRESS,
                   help="log debug messages to stderr (the log file always has INFO and above)")
    return g


class _Sub:
    """Adds subcommand parsers that all take the global options."""

    def __init__(self, sub: Any, common: argparse.ArgumentParser) -> None:
        self.sub, self.common = sub, common

    def add(self, name: str, **kw: Any) -> argparse.ArgumentParser:
        return self.sub.add_parser(name, parents=[self.common], **kw)


def build_parser() -> argparse.ArgumentParser:
    common = _globals()
    p = argparse.ArgumentParser(
        prog="agent-desk", parents=[common], epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Agent Desk: an LLM agent whose every tool call is visible, governed and recorded.",
    )
    p.add_argument("--version", action="version", version=f"agent-desk {version()}")
    sub = _Sub(p.add_subparsers(dest="command", metavar="COMMAND"), common)
    _add_run(sub)
    _add_sessions(sub)
    _add_audit(sub)
    _add_images(sub)
    _add_rules(sub)
    _add_mcp(sub)
    _add_hooks(sub)
    _add_consent(sub)
    _add_network(sub)
    sub.add("doctor", help="check what Agent Desk needs (Docker, images, key, endpoint, Qt, database)")
    comp = sub.add("completion", help="print a shell completion script (bash, zsh or fish)",
                   description="Print a completion script. bash: agent-desk completion bash > "
                   "~/.local/share/bash-completion/completions/agent-desk; zsh: agent-desk completion zsh > "
                   "~/.zfunc/_agent-desk (with ~/.zfunc in $fpath); fish: agent-desk completion fish > "
                   "~/.config/fish/completions/agent-desk.fish.")
    comp.add_argument("shell", choices=("bash", "zsh", "fish"))
    return p


def _dir_arg(action: argparse.Action) -> argparse.Action:
    action.complete = {"bash": "_shtab_compgen_dirs", "zsh": "_files -/"}  # type: ignore[attr-defined]
    return action


def _run_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--model", help="model id (default: $ANTHROPIC_MODEL, else the settings)")
    sp.add_argument("--permission-mode", choices=MODES, help="how tool calls are allowed")
    sp.add_argument("--on-ask", choices=("allow", "deny", "prompt"), default="deny",
                    help="what to answer when a call needs approval (default: deny); the model's questions and "
                         "plans are asked at the terminal with prompt, and told no answer will come otherwise")
    sp.add_argument("--break", dest="break_on", action="append", metavar="TOOL",
                    help="stop before each call of TOOL (a tool name, a group such as group:fs, or @write: the next "
                         "call that may write) and ask at the terminal whatever --on-ask says (repeatable)")
    sp.add_argument("--json", action="store_true", help="one JSON envelope per line instead of text")
    sp.add_argument("--sandbox", choices=("docker", "local"), help="where tools run (default: docker)")
    sp.add_argument("--max-steps", type=int, help=f"steps per turn (default {DEFAULT_MAX_STEPS})")
    sp.add_argument("--profile", choices=TOOL_PROFILES,
                    help="the tools offered to the model (default: the project's, else coding)")
    sp.add_argument("--template", help="the agent template: coding, explore, read-only review, or the user's or "
                    "project's own (default: the project's pick, else coding); it only narrows the permissions")


def _add_run(sub: _Sub) -> None:
    run = sub.add("run", help="run one turn in a project and print it")
    _dir_arg(run.add_argument("--project", default=".", help="the project folder (default: here)"))
    run.add_argument("--image", help="sandbox image: a catalog name (python, node, minimal) or a tag")
    run.add_argument("--session", help="continue this session instead of starting one")
    _image_files_arg(run)
    _run_options(run)
    run.add_argument("prompt", nargs="?", help="what to ask; `-` (or no prompt, with stdin piped) reads it from "
                     "stdin")


def _image_files_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--image-file", action="append", metavar="PATH", dest="image_files", default=[],
                   help="an image to send with the prompt (PNG, JPEG, GIF or WebP, at most 3.75 MB and 8000 px a "
                   "side; repeatable, up to 20)")


def _add_sessions(sub: _Sub) -> None:
    ses = sub.add("sessions", help="list, show or resume sessions")
    ssub = _Sub(ses.add_subparsers(dest="action", required=True, metavar="ACTION"), sub.common)
    sl = ssub.add("list", help="list sessions")
    _dir_arg(sl.add_argument("--project", help="only this project folder"))
    ssub.add("show", help="print a session's messages").add_argument("id")
    st = ssub.add("status", help="a session's agent state, steps, what waits for a person, the last error")
    st.add_argument("id")
    st.add_argument("--json", action="store_true", help="the status as one JSON object")
    sr = ssub.add("resume", help="reopen a session (seals unfinished calls) and continue it")
    sr.add_argument("id")
    sr.add_argument("prompt", nargs="?", help="a new message (`-` reads it from stdin); without one, the "
                    "interrupted turn continues")
    _image_files_arg(sr)
    _run_options(sr)
    sc = ssub.add("compact", help="summarise a session's older turns with the model (the audit keeps them)")
    sc.add_argument("id")
    sc.add_argument("--model", help="model id (default: $ANTHROPIC_MODEL, else the settings)")
    sc.add_argument("--sandbox", choices=("docker", "local"), help="where tools run (default: docker)")
    sc.set_defaults(permission_mode=None)
    rw = ssub.add("rewind", help="put a session's files back as they were before one of its calls, and by default"
                                 " its conversation too, in a new session (asks first)")
    rw.add_argument("id")
    rw.add_argument("--before", required=True, metavar="CALL_ID", help="the call to rewind to before")
    rw.add_argument("--yes", action="store_true", help="rewind without asking (your own changes are kept)")
    rw.add_argument("--files-only", action="store_true",
                    help="rewind the files only: the conversation goes on as it is. Without it, the conversation"
                         " is rewound too: a new session starts from the messages before that call's turn (the"
                         " original session stays in the audit log as it was)")
    rw.add_argument("--overwrite-mine", action="store_true",
                    help="also put back the files you changed since (kept otherwise)")


def _add_audit(sub: _Sub) -> None:
    aud = sub.add("audit", help="the tool-call audit log")
    asub = _Sub(aud.add_subparsers(dest="action", required=True, metavar="ACTION"), sub.common)
    al = asub.add("list", help="list tool calls, newest first")
    for flag in ("--session", "--tool", "--state", "--outcome", "--text", "--project"):
        al.add_argument(flag)
    al.add_argument("--tool-use-id", help="the model's tool_use id (several calls may carry one)")
    al.add_argument("--risk", choices=("low", "medium", "high"), help="as the call was judged")
    al.add_argument("--decider", choices=("person", "desk", "rule", "mode", "hook", "expiry"),
                    help="person: someone answered its approval; desk: the rules, the mode or a hook decided "
                         "(rule, mode, hook: which); expiry: nobody answered in time")
    al.add_argument("--mcp-server", metavar="NAME", help="the calls of one MCP server's tools")
    al.add_argument("--domain", help="calls that connected (or tried to) to this domain or its subdomains through "
                    "the network proxy")
    al.add_argument("--limit", type=int, default=50)
    asub.add("show", help="one call with its audit trail").add_argument(
        "id", help="the desk's call id, or a model's tool_use id that only one call carries")
    ae = asub.add("export", help="export the log")
    ae.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    ae.add_argument("--out", help="file (default: stdout)")
    ae.add_argument("--session")
    ae.add_argument("--signed", action="store_true",
                    help="end the export with the database's signed head and this installation's signature")
    ar = asub.add("report", help="one self-contained HTML (or PDF) report for an auditor: prompts, calls, "
                  "decisions, refusals, cost, and the chain's verify result and signed head")
    ar.add_argument("--session", help="one session (default: every session in the period)")
    _dir_arg(ar.add_argument("--project", metavar="PATH", help="one project's sessions"))
    ar.add_argument("--since", metavar="WHEN", help="ISO date or time (UTC unless it has an offset): from then on")
    ar.add_argument("--until", metavar="WHEN", help="ISO date or time: before then")
    ar.add_argument("--out", required=True, help="the report's file (report.html, or report.pdf with --pdf)")
    ar.add_argument("--pdf", action="store_true", help="write a PDF (printed by Qt, A4) instead of HTML")
    av = asub.add("verify", help="check the audit hash chain, its signed heads and its witness")
    av.add_argument("--trust-key", action="append", default=[], metavar="KEY_ID",
                    help="accept entries signed by another desk's key (repeatable): on an installation with a "
                         "witness, a key it never registered, or one claiming its user@host, fails otherwise")
    ve = asub.add("verify-export", help="check a signed export offline (no database needed)")
    ve.add_argument("file")
    ve.add_argument("--key", action="append", default=[], metavar="KEY_ID",
                    help="a key id to trust (repeatable); any other signing key is refused")


def _add_images(sub: _Sub) -> None:
    img = sub.add("images", help="sandbox images")
    isub = _Sub(img.add_subparsers(dest="action", required=True, metavar="ACTION"), sub.common)
    isub.add("list", help="the catalog and what is built")
    ib = isub.add("build", help="build a catalog image, or a project's own (--project)")
    ib.add_argument("name", nargs="?", help="a catalog name: minimal, python, node (see `images list`)")
    ib.add_argument("--no-cache", action="store_true")
    _dir_arg(ib.add_argument("--project", metavar="PATH", help="build the project's .agent-desk/Dockerfile or "
                             ".devcontainer/devcontainer.json and make it the project's sandbox image"))


def _add_rules(sub: _Sub) -> None:
    rul = sub.add("rules", help="review and trust a project's .agent-desk/rules.toml")
    rsub = _Sub(rul.add_subparsers(dest="action", required=True, metavar="ACTION"), sub.common)
    rd = rsub.add("diff", help="what changed since the rules were last trusted (exit 1: untrusted)")
    rt = rsub.add("trust", help="show the change and trust the rules as they are now")
    for sp in (rd, rt):
        _dir_arg(sp.add_argument("path", nargs="?", default=".", help="the project folder (default: here)"))
    rt.add_argument("--yes", action="store_true", help="trust without asking")


def _add_mcp(sub: _Sub) -> None:
    mcp = sub.add("mcp", help="a project's MCP servers: list them, grant one a relaxation")
    msub = _Sub(mcp.add_subparsers(dest="action", required=True, metavar="ACTION"), sub.common)
    ml = msub.add("list", help="start the servers and show each one's state, where it runs and its tools")
    _dir_arg(ml.add_argument("--project", default=".", help="the project folder (default: here)"))
    ml.add_argument("--json", action="store_true", help="the servers as a JSON list")
    ml.add_argument("--image", help="the project's sandbox image, as for `run` (the catalog's `mcp` image has the "
                    "reference servers)")
    ml.add_argument("--sandbox", choices=("docker", "local"), help="where sandboxed servers run (default: docker)")
    mg = msub.add("grant", help="let a project's server run with the network, on the host, or over HTTP")
    mg.add_argument("server", help="the server's name in .agent-desk/mcp.json")
    _dir_arg(mg.add_argument("--project", default=".", help="the project folder (default: here)"))
    mg.add_argument("--revoke", action="store_true", help="take the grant back")


def _add_hooks(sub: _Sub) -> None:
    hooks = sub.add("hooks", help="the person's hooks: list them, grant a project's .agent-desk/hooks.toml")
    hsub = _Sub(hooks.add_subparsers(dest="action", required=True, metavar="ACTION"), sub.common)
    hl = hsub.add("list", help="the hooks that run for a project (yours, and its file when granted)")
    _dir_arg(hl.add_argument("--project", default=".", help="the project folder (default: here)"))
    hg = hsub.add("grant", help="let the project's hooks file run, exactly as it is now (shown first)")
    _dir_arg(hg.add_argument("--project", default=".", help="the project folder (default: here)"))
    hg.add_argument("--yes", action="store_true", help="grant without asking")
    hg.add_argument("--revoke", action="store_true", help="take the grant back")


def _add_network(sub: _Sub) -> None:
    net = sub.add("network", help="a project's network: its mode (off, allowlist, on), its allowlist: list it, "
                  "allow a domain, revoke one (your list and your 'for this project' answers; the repository's list "
                  "goes through consent)")
    nsub = _Sub(net.add_subparsers(dest="action", required=True, metavar="ACTION"), sub.common)
    nl = nsub.add("list", help="your list, your answers and the repository's list (with its consent)")
    _dir_arg(nl.add_argument("--project", default=".", help="the project folder (default: here)"))
    nm = nsub.add("mode", help="show or set the project's network: off (none), allowlist (only what is listed, "
                  "through the desk's proxy; anything else asks) or on (the full network)")
    nm.add_argument("mode", nargs="?", choices=("off", "allowlist", "on"), help="the mode to set (none: print it)")
    _dir_arg(nm.add_argument("--project", default=".", help="the project folder (default: here)"))
    nm.add_argument("--yes", action="store_true", help="set `on` without asking")
    for action, text in (("allow", "add a pattern to your list (pypi.org, *.example.org:443, 10.0.0.5, @python)"),
                         ("revoke", "take a pattern out of your list and your answers (host or host:port)")):
        sp = nsub.add(action, help=text)
        sp.add_argument("pattern", help="a domain, *.domain, an address or network, maybe :ports, or a preset")
        _dir_arg(sp.add_argument("--project", default=".", help="the project folder (default: here)"))


def _add_consent(sub: _Sub) -> None:
    con = sub.add("consent", help="what of a project's rules, hooks, MCP servers, templates and skills you "
                  "approved: list, approve, "
                  "revoke (`rules trust`, `hooks grant` and `mcp grant` are the same for one kind)")
    csub = _Sub(con.add_subparsers(dest="action", required=True, metavar="ACTION"), sub.common)
    helps = {"list": "each subject and its status (approved, new, changed, deleted)",
             "approve": "show each unapproved subject, then approve exactly what was shown",
             "revoke": "take an approval back"}
    for action, text in helps.items():
        sp = csub.add(action, help=text)
        sp.add_argument("name", nargs="?",
                        help="an MCP server's or a template's name (default: every subject of the kind)")
        sp.add_argument("--kind", choices=[k.value for k in ConsentKind],
                        help="rules, hooks, mcp, template, skills, instructions or network-list (default: all)")
        _dir_arg(sp.add_argument("--project", default=".", help="the project folder (default: here)"))
        if action == "approve":
            sp.add_argument("--yes", action="store_true", help="approve without asking")

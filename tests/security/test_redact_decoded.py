"""Redaction decodes before it matches: a secret hidden in base64 (standard, URL-safe, unpadded, wrapped,
twice), hex (lower, upper, wrapped, `\\xHH`), `\\uHHHH`, percent-encoding, or split by terminal escape
sequences (CSI, OSC, OSC 8 links) and invisible characters is redacted like the plain one, in one text and in
a stream; a git sha, a sha256, a UUID, base64 of plain text or of random bytes, and colour output stay as
they are. End to end: the CLI on Docker, then the raw bytes of the database, its WAL, the artifacts, a signed
export, the `--json` stdout and every request the model received are scanned for each variant."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import secrets
import string
import subprocess
import textwrap
import uuid
from pathlib import Path

import pytest

from desktop_app.core._redaction import REDACTED, Redactor, StreamRedactor
from tests.conftest import TEST_IMAGE
from tests.e2e.conftest import cli, env, workspace_dir  # noqa: F401  (fixtures)
from tests.fakes.anthropic_server import reply, text, tool_use


def _r(n: int) -> str:
    return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(n))


def _split(s: str, mark: str, every: int = 0) -> str:
    """`s` with `mark` in its middle (or after every `every` characters)."""
    if every:
        return mark.join(s[i:i + every] for i in range(0, len(s), every))
    return s[: len(s) // 2] + mark + s[len(s) // 2:]


def variants(line: str, token: str) -> dict[str, str]:
    """The ways a `line` holding `token` is hidden: name -> the text that carries it."""
    raw = (">>> " + line).encode()  # ">>>" makes '+' and '/' in base64, so URL-safe differs
    b64 = base64.b64encode(raw).decode()
    hidden = {
        "base64": b64,
        "base64 url-safe": base64.urlsafe_b64encode(raw).decode(),
        "base64 unpadded": b64.rstrip("="),
        "base64 wrapped at 76": "\n".join(textwrap.wrap(base64.b64encode((line + " " + _r(80)).encode()).decode(), 76)),
        "base64 wrapped at 13": "\n".join(textwrap.wrap(b64, 13)),
        "base64 twice": base64.b64encode(b64.encode()).decode(),
        "base64 of hex": base64.b64encode(raw.hex().encode()).decode(),
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "hex wrapped like xxd -p": "\n".join(textwrap.wrap(raw.hex(), 60)),
        "\\x escapes": "".join(f"\\x{b:02x}" for b in raw),
        "\\u escapes": "".join(f"\\u{ord(c):04x}" for c in line),
        "percent-encoded": "".join(f"%{b:02X}" for b in raw),
        "percent-encoded in part": "".join(f"%{b:02x}" if i % 2 else chr(b) for i, b in enumerate(line.encode())),
        "CSI colour inside": line.replace(token, _split(token, "\x1b[31m")),
        "CSI around each character": line.replace(token, "".join(f"\x1b[1m{c}\x1b[0m" for c in token)),
        "CSI erase inside": line.replace(token, _split(token, "\x1b[K")),
        "OSC title inside": line.replace(token, _split(token, "\x1b]0;build\x07")),
        "OSC 8 link inside": line.replace(token, _split(token, "\x1b]8;;https://example.com/\x1b\\")),
        "zero-width space inside": line.replace(token, _split(token, "\u200b", 7)),
        "soft hyphen and word joiner": line.replace(token, _split(_split(token, "\u00ad"), "\u2060", 11)),
        "8-bit CSI inside": line.replace(token, _split(token, "\x9b31m")),
    }
    assert "-" in hidden["base64 url-safe"] or "_" in hidden["base64 url-safe"]
    return hidden


def planted() -> dict[str, tuple[str, str]]:
    """kind -> (a line that holds the secret, the secret): a shaped token and a password by its name."""
    gh, pw = f"ghp_{_r(36)}", _r(28)
    return {"github": (f"export GITHUB_TOKEN={gh}", gh), "password": (f"DB_PASSWORD={pw}", pw),
            "anthropic": (f"key sk-ant-api03-{_r(40)}", "")}


def _secret(line: str, secret: str) -> str:
    return secret or line.split(" ", 1)[1]


def needles(hidden: str, secret: str) -> list[str]:
    """What must not be found: the secret, each half of it (a split one), the hidden form, and each line
    of a wrapped form."""
    out = [secret, secret[: len(secret) // 2], secret[len(secret) // 2:], hidden]
    out += [ln for ln in hidden.split("\n") if len(ln) >= 12]
    return [n for n in out if len(n) >= 10]


def all_hidden() -> dict[str, tuple[str, str]]:
    """"kind / variant" -> (the hidden text, the secret), for every kind and variant."""
    return {f"{kind} / {name}": (hidden, _secret(line, s))
            for kind, (line, s) in planted().items() for name, hidden in variants(line, _secret(line, s)).items()}


CASES = sorted(all_hidden())


@pytest.mark.parametrize("numbered", [False, True], ids=["as is", "numbered like cat -n"])
@pytest.mark.parametrize("case", CASES)
def test_a_hidden_secret_is_redacted(case: str, numbered: bool) -> None:
    hidden, secret = all_hidden()[case]
    shown = f"before it\n{hidden}\nafter it"
    if numbered:
        shown = "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(shown.split("\n"), 1))
    out = Redactor().redact(shown)
    assert REDACTED in out and "before it" in out and out.endswith("after it")
    assert [n for n in needles(hidden, secret) if n in out] == [], repr(out)


def test_there_are_fifteen_variants_and_more() -> None:
    assert len(variants("DB_PASSWORD=x" + _r(20), "x")) >= 15


@pytest.mark.parametrize("seed", range(12))
def test_a_hidden_secret_split_across_stream_chunks_is_caught(seed: int) -> None:
    rnd = random.Random(seed)
    cases = all_hidden()
    body = "\n".join(h for h, _ in cases.values()) + "\nthe end\n"
    sr = StreamRedactor(Redactor())
    out, i = [], 0
    while i < len(body):
        n = rnd.randint(1, 90)
        out.append(sr.feed(body[i:i + n]))
        i += n
    text_out = "".join(out) + sr.flush()
    assert [c for c, (h, s) in cases.items() if any(n in text_out for n in needles(h, s))] == []
    assert "the end" in text_out


def _letters_only_tail(seed: int, width: int = 76) -> tuple[str, str]:
    """A secret line and its base64 wrapped at `width`, chosen so that the block's last line has letters only:
    it reads like a word of prose, yet it is the encoding's end (a block in a few hundred, by chance)."""
    rnd = random.Random(seed)
    while True:
        gh = "ghp_" + "".join(rnd.choice(string.ascii_letters + string.digits) for _ in range(36))
        tail = "".join(rnd.choice(string.ascii_letters) for _ in range(rnd.randint(20, 80)))
        lines = textwrap.wrap(base64.b64encode(f"export GITHUB_TOKEN={gh} {tail}".encode()).decode(), width)
        if len(lines) > 1 and len(lines[-1]) >= 8 and lines[-1].isalpha():
            return gh, "\n".join(lines)


@pytest.mark.parametrize("width", [76, 64, 13])
@pytest.mark.parametrize("after", [" x", " Pj4+IGV4cG9yd", "\tdone", " the end", " and then\nmore prose"])
def test_a_wrapped_block_whose_last_line_reads_like_a_word_is_redacted_whole(width: int, after: str) -> None:
    secret, hidden = _letters_only_tail(width, width)
    for shown in (f"I keep {hidden}{after}", f"{hidden}{after}",
                  "\n".join(f"{i:>6}\t{ln}" for i, ln in enumerate(f"{hidden}{after}".split("\n"), 1)),
                  json.dumps({"content": f"{hidden}{after}"})):
        out = Redactor().redact(shown)
        assert [n for n in needles(hidden, secret) if n in out or json.dumps(n)[1:-1] in out] == [], repr(out)
    sr = StreamRedactor(Redactor())
    streamed = "".join(sr.feed(ln + "\n") for ln in f"{hidden}{after}".split("\n")) + sr.flush()
    assert [n for n in needles(hidden, secret) if n in streamed] == [], repr(streamed)
    assert streamed.rstrip("\n").endswith(after.split("\n")[-1].strip())  # the prose after it stays


def _random_b64(n: int) -> str:
    return base64.b64encode(os.urandom(n)).decode()


# How the redactor tells an encoded secret from an ordinary run: a run is decoded, and redacted only when
# what it decodes to is text (UTF-8, almost all printable) that holds a secret by the same patterns. A
# digest or a UUID decodes to random bytes, so it is never even scanned.
@pytest.mark.parametrize("plain", [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "3F786850E387550FDAB836ED7E6DC881DE23001B",
    f"sha256:{hashlib.sha256(b'x').hexdigest()}",
    f"{hashlib.sha512(b'y').hexdigest()}  archive.tar.gz",
    f"id {uuid.uuid4()} and {uuid.uuid4().hex}",
    f"integrity sha512-{base64.b64encode(hashlib.sha512(b'z').digest()).decode()}",
    base64.b64encode(b"hello world, there is nothing secret in this sentence at all").decode(),
    base64.b64encode(b"max_tokens: 1024, and the primary_key = id").decode(),  # names that hold no secret
    "\n".join(textwrap.wrap(_random_b64(600), 76)),
    os.urandom(200).hex(),
    "\x1b[32mPASSED\x1b[0m tests/test_api.py::test_login \x1b[1m[100%]\x1b[0m",
    "\x1b[0m\x1b[01;34msrc\x1b[0m  \x1b[01;32mbuild.sh\x1b[0m  README.md",
    "\x1b]0;~/work/project\x07$ ls -la",
    "https://example.com/search?q=hello%20world&lang=en%2Dgb",
    "printf '\\x1b[31mred\\x1b[0m\\n'",
    "/usr/lib/python3/dist-packages/setuptools/_vendor/packaging/requirements.py",
    "some_very_long_function_name_that_is_only_code(argument_number_one)",
    "A\u200bB zero-width between two letters of no secret",
])
def test_ordinary_runs_stay(plain: str) -> None:
    assert Redactor().redact(plain) == plain


# -- the whole desk: the CLI on Docker, then the raw bytes scanned ---------------------------------


def _blobs(tmp_path: Path, extra: list[str]) -> list[bytes]:
    db = tmp_path / "desk.db"
    paths = [db, Path(f"{db}-wal"), Path(f"{db}-shm"), tmp_path / "data", tmp_path / "export.jsonl"]
    blobs = [e.encode() for e in extra]
    for p in paths:
        files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else []
        blobs += [f.read_bytes() for f in files]
    return blobs


def _found(blobs: list[bytes], cases: dict[str, tuple[str, str]]) -> list[str]:
    """The cases some blob holds, as is or JSON-escaped (how the database and the exports store text)."""
    hits = []
    for case, (hidden, secret) in cases.items():
        forms = {f for n in needles(hidden, secret)
                 for f in (n, json.dumps(n)[1:-1], json.dumps(n, ensure_ascii=False)[1:-1])}
        where = [i for i, b in enumerate(blobs) if any(f.encode() in b for f in forms)]
        if where:
            hits.append(f"{case} (in blobs {where})")
    return hits


def _run(environ: dict[str, str], workspace: Path, prompt: str) -> subprocess.CompletedProcess[str]:
    args = cli("run", "--project", str(workspace), "--image", TEST_IMAGE, "--permission-mode", "auto", "--json",
               prompt)
    return subprocess.run(args, env=environ, capture_output=True, text=True, timeout=300)


def _export(environ: dict[str, str], tmp_path: Path) -> None:
    out = subprocess.run(cli("audit", "export", "--signed", "--out", str(tmp_path / "export.jsonl")), env=environ,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "export.jsonl").stat().st_size > 0


@pytest.mark.docker
def test_hidden_secrets_in_tool_output_reach_no_storage_and_no_model(env, server, docker_client,  # noqa: F811
                                                                     workspace_dir, tmp_path) -> None:  # noqa: F811  # noqa: F811
    cases = all_hidden()
    (workspace_dir / "hidden.txt").write_text("\n".join(h for h, _ in cases.values()) + "\n")
    line, token = planted()["github"]
    (workspace_dir / "plain.txt").write_text(line + "\n" + "filler line of the file\n" * 40)
    cases["base64 made in the sandbox"] = (base64.b64encode((line + "\n" + "filler line of the file\n" * 40)
                                                            .encode()).decode(), token)
    if os.geteuid() == 0:
        for f in ("hidden.txt", "plain.txt"):
            os.chown(workspace_dir / f, 1000, 1000)
    pad = "for i in $(seq 1 1500); do echo padding line $i of the long output; done"
    server.add(
        reply(tool_use("bash_run", {"command": "cat hidden.txt"})),
        reply(tool_use("fs_read", {"path": "hidden.txt"})),
        reply(tool_use("bash_run", {"command": "base64 plain.txt; base64 -w 0 plain.txt; echo; xxd -p plain.txt"})),
        reply(tool_use("bash_run", {"command": "while IFS= read -r l; do printf '%s' \"${l:0:9}\"; sleep 0.02; "
                                               "printf '%s\\n' \"${l:9}\"; done < hidden.txt"})),
        reply(tool_use("bash_run", {"command": f"{pad}; cat hidden.txt; {pad}"})),
        reply(text("done")),
    )
    out = _run(env, workspace_dir, "show me the files")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "data" / "artifacts").is_dir()  # the long output was truncated to an artifact
    _export(env, tmp_path)
    requests = [json.dumps(r.body) for r in server.requests]
    assert len(requests) == 6
    found = _found(_blobs(tmp_path, [out.stdout, out.stderr, *requests]), cases)
    assert not found, "\n".join(found)


@pytest.mark.docker
def test_hidden_secrets_in_what_the_model_writes_reach_no_storage(env, server, docker_client,  # noqa: F811
                                                                  workspace_dir, tmp_path) -> None:  # noqa: F811
    cases = all_hidden()
    content = "\n".join(h for h, _ in cases.values()) + "\n"
    some = list(cases.values())[:6]
    server.add(
        reply(text("I will keep these: " + " ".join(h for h, _ in some)),
              tool_use("fs_write", {"path": "kept.txt", "content": content})),
        reply(tool_use("bash_run", {"command": "echo " + " ".join(f"'{h}'" for h, _ in some if "'" not in h)})),
        reply(text("done")),
    )
    out = _run(env, workspace_dir, "keep them")
    assert out.returncode == 0, out.stderr
    assert (workspace_dir / "kept.txt").read_text() == content  # written as the model sent it
    _export(env, tmp_path)
    found = _found(_blobs(tmp_path, [out.stdout, out.stderr]), cases)
    assert not found, "\n".join(found)


def test_ordinary_lines_stream_at_once_and_an_encoded_block_waits_for_its_end() -> None:
    sr = StreamRedactor(Redactor())
    for line in ("added 200 packages in 3s\n", "Compiling\n", "running the tests\n", "done: ok\n"):
        assert sr.feed(line) == line  # nothing held: a word is not an encoding
    block = base64.b64encode(f"DB_PASSWORD={_r(30)}".encode()).decode()
    first, rest = block[:20], block[20:]
    assert sr.feed(first + "\n") == ""  # may go on over the next lines: it waits
    assert sr.feed(rest + "\n") == ""
    out = sr.feed("the end\n")
    assert out == f"{REDACTED}\nthe end\n", out

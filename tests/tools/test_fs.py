"""fs_read, fs_write, fs_edit, fs_multi_edit, fs_glob and fs_grep on a real sandbox."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from pydantic import ValidationError

from desktop_app.core import ImageBlock
from desktop_app.tools import (
    READ_HASHES_KEY,
    FsEdit,
    FsGlob,
    FsGrep,
    FsMultiEdit,
    FsRead,
    FsWrite,
)
from desktop_app.tools._fs import image_media_type, looks_binary

read, write, edit, multi, glob_, grep = FsRead(), FsWrite(), FsEdit(), FsMultiEdit(), FsGlob(), FsGrep()

PNG_1PX = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def error_of(res) -> dict:
    assert res.is_error, res.text_content
    body = json.loads(res.text_content)
    assert body["ok"] is False and body["error"]
    return body


async def put(sandbox, path: str, data: bytes | str) -> None:
    await sandbox.write_file(path, data.encode() if isinstance(data, str) else data)


async def get(sandbox, path: str) -> bytes:
    return await sandbox.read_file(path)


# ---------------------------------------------------------------- fs_read


async def test_read_numbers_lines_like_cat_n(sandbox, call, ctx):
    await put(sandbox, "src/app.py", "import os\n\nprint(os.name)\n")
    res = await call(read, path="src/app.py")
    assert not res.is_error
    assert res.text_content == "     1\timport os\n     2\t\n     3\tprint(os.name)"
    assert res.details["total_lines"] == 3 and res.details["truncated"] is False
    assert res.details["kind"] == "text" and res.details["path"] == "src/app.py"


async def test_read_records_sha256_of_whole_file_even_for_a_window(sandbox, call, ctx):
    body = "".join(f"line {i}\n" for i in range(1, 51)).encode()
    await put(sandbox, "big.txt", body)
    res = await call(read, path="big.txt", offset=10, limit=5)
    assert ctx.state[READ_HASHES_KEY]["/workspace/big.txt"] == hashlib.sha256(body).hexdigest()
    assert res.details["sha256"] == hashlib.sha256(body).hexdigest()


async def test_read_offset_and_limit_window_and_continuation_hint(sandbox, call):
    await put(sandbox, "n.txt", "".join(f"row{i}\n" for i in range(1, 101)))
    res = await call(read, path="n.txt", offset=10, limit=3)
    lines = res.text_content.splitlines()
    assert lines[:3] == ["    10\trow10", "    11\trow11", "    12\trow12"]
    assert "offset=13" in res.text_content and "88 more lines" in res.text_content
    assert (res.details["start_line"], res.details["end_line"], res.details["truncated"]) == (10, 12, True)

    tail = await call(read, path="n.txt", offset=99)
    assert tail.text_content.splitlines() == ["    99\trow99", "   100\trow100"]
    assert tail.details["truncated"] is False


async def test_read_default_window_is_2000_lines(sandbox, call):
    await put(sandbox, "long.txt", "".join(f"{i}\n" for i in range(1, 2501)))
    res = await call(read, path="long.txt")
    assert res.details["end_line"] == 2000 and res.details["truncated"] is True
    assert "  2000\t2000" in res.text_content and "  2001\t" not in res.text_content
    assert "offset=2001" in res.text_content


async def test_read_caps_a_window_at_256_kb(sandbox, call):
    await put(sandbox, "wide.txt", "".join(("x" * 1500) + "\n" for _ in range(400)))
    res = await call(read, path="wide.txt")
    body = res.text_content.split("\n\n[")[0]
    assert len(body.encode()) <= 256 * 1024
    assert res.details["truncated"] is True and res.details["end_line"] < 400
    assert f"offset={res.details['end_line'] + 1}" in res.text_content


async def test_read_cuts_very_long_lines(sandbox, call):
    await put(sandbox, "min.js", "a" * 5000 + "\nshort\n")
    res = await call(read, path="min.js")
    first = res.text_content.splitlines()[0]
    assert "[line cut: 5000 characters]" in first and len(first) < 2100
    assert "     2\tshort" in res.text_content


async def test_read_offset_past_end_is_an_error(sandbox, call):
    await put(sandbox, "s.txt", "a\nb\n")
    body = error_of(await call(read, path="s.txt", offset=5))
    assert "2 lines" in body["error"] and body["recommendations"]


async def test_read_empty_file(sandbox, call):
    await put(sandbox, "empty.txt", b"")
    res = await call(read, path="empty.txt")
    assert not res.is_error and "empty" in res.text_content and res.details["total_lines"] == 0


async def test_read_offset_must_be_one_based():
    with pytest.raises(ValidationError):
        read.parse({"path": "x", "offset": 0})


async def test_read_refuses_binary_with_a_hint(sandbox, call, ctx):
    await put(sandbox, "blob.bin", b"ELF\x00\x01\x02" * 100)
    body = error_of(await call(read, path="blob.bin"))
    assert "binary" in body["error"]
    assert any("xxd" in r or "file" in r for r in body["recommendations"])
    await put(sandbox, "latin1.txt", "caf\xe9 cr\xe8me\n".encode("latin-1"))
    res = await call(read, path="latin1.txt")  # text that is not UTF-8 is not binary
    assert not res.is_error and "café crème" in res.text_content and "not UTF-8" in res.text_content
    assert res.details["encoding"] == "latin-1"


def test_binary_sniff_forgives_a_character_cut_at_8_kb():
    data = ("a" * 8191 + "é" + "tail\n").encode()
    assert data[:8192].endswith(b"\xc3")
    assert not looks_binary(data)
    assert looks_binary(b"a\x00b")
    assert not looks_binary(b"caf\xe9 cr\xe8me\n")  # Latin-1 is text, not binary
    assert looks_binary(bytes(range(1, 32)) * 10)


async def test_read_returns_images_as_image_blocks(sandbox, call, ctx):
    await put(sandbox, "img/dot.png", PNG_1PX)
    res = await call(read, path="img/dot.png")
    assert not res.is_error
    images = [b for b in res.content if isinstance(b, ImageBlock)]
    assert len(images) == 1 and images[0].media_type == "image/png"
    assert base64.b64decode(images[0].data) == PNG_1PX
    assert res.details["kind"] == "image"
    assert ctx.state[READ_HASHES_KEY]["/workspace/img/dot.png"] == hashlib.sha256(PNG_1PX).hexdigest()
    assert res.to_api_content()[1]["source"]["media_type"] == "image/png"


def test_image_magic_bytes():
    assert image_media_type(b"\xff\xd8\xff\xe0rest") == "image/jpeg"
    assert image_media_type(b"GIF89a....") == "image/gif"
    assert image_media_type(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert image_media_type(b"RIFF\x00\x00\x00\x00WAVEfmt ") is None
    assert image_media_type(b"plain text") is None


async def test_read_refuses_an_image_over_the_cap(sandbox, call):
    await put(sandbox, "huge.png", PNG_1PX + b"\x00" * 4_000_000)
    body = error_of(await call(read, path="huge.png"))
    assert "cap" in body["error"] and body["recommendations"]


async def test_read_missing_file_suggests_same_name(sandbox, call):
    await put(sandbox, "pkg/deep/config.toml", "x = 1\n")
    body = error_of(await call(read, path="config.toml"))
    assert "does not exist" in body["error"]
    assert any("pkg/deep/config.toml" in r for r in body["recommendations"])


async def test_read_directory_is_refused(sandbox, call):
    await put(sandbox, "d/f.txt", "x")
    body = error_of(await call(read, path="d"))
    assert "directory" in body["error"] and any("fs_glob" in r for r in body["recommendations"])


async def test_absolute_workspace_path_is_accepted(sandbox, call):
    await put(sandbox, "a.txt", "hello\n")
    res = await call(read, path="/workspace/a.txt")
    assert res.text_content == "     1\thello"


@pytest.mark.parametrize("path", ["../secret", "a/../../etc/passwd", "/etc/passwd", "/workspace/../etc", "~/x"])
async def test_escaping_paths_are_refused_before_the_sandbox(sandbox, call, path):
    body = error_of(await call(read, path=path))
    assert "outside the workspace" in body["error"] or "not expanded" in body["error"]


async def test_symlink_out_of_the_workspace_is_refused(sandbox, call, ctx, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("host secret\n")
    res = await sandbox.exec(f"ln -s {outside} link.txt && ln -s /etc passwd_dir")
    assert res.exit_code == 0, res.stderr
    for path in ("link.txt", "passwd_dir/passwd"):
        body = error_of(await call(read, path=path))
        assert "outside the workspace" in body["error"], body
        assert "host secret" not in json.dumps(body)
    # Writing through the link must not reach the host either.
    error_of(await call(write, path="link.txt", content="overwritten\n"))
    error_of(await call(write, path="passwd_dir/new.txt", content="x\n"))
    assert outside.read_text() == "host secret\n"
    assert not (tmp_path / "new.txt").exists()


# ---------------------------------------------------------------- fs_write


async def test_write_creates_file_and_parents_with_a_diff(sandbox, call, ctx):
    res = await call(write, path="new/dir/hello.py", content="print('hi')\nprint('bye')\n")
    assert not res.is_error, res.text_content
    assert await get(sandbox, "new/dir/hello.py") == b"print('hi')\nprint('bye')\n"
    d = res.details
    assert d["created"] is True and d["added"] == 2 and d["removed"] == 0
    assert d["diff"].startswith("--- /dev/null\n+++ b/new/dir/hello.py\n")
    assert "+print('hi')\n" in d["diff"]
    assert ctx.state[READ_HASHES_KEY]["/workspace/new/dir/hello.py"] == hashlib.sha256(
        b"print('hi')\nprint('bye')\n"
    ).hexdigest()


async def test_write_refuses_an_existing_file_not_read_in_this_session(sandbox, call):
    await put(sandbox, "keep.txt", "original\n")
    body = error_of(await call(write, path="keep.txt", content="clobber\n"))
    assert "read it again" in body["error"]
    assert any("fs_read" in r for r in body["recommendations"])
    assert await get(sandbox, "keep.txt") == b"original\n"


async def test_write_refuses_when_the_file_changed_since_it_was_read(sandbox, call):
    await put(sandbox, "f.txt", "v1\n")
    await call(read, path="f.txt")
    await sandbox.exec("echo v2-by-command > f.txt")
    body = error_of(await call(write, path="f.txt", content="v3\n"))
    assert "changed since you last read it" in body["error"] and "read it again" in body["error"]
    assert await get(sandbox, "f.txt") == b"v2-by-command\n"
    await call(read, path="f.txt")
    res = await call(write, path="f.txt", content="v3\n")
    assert not res.is_error
    assert "-v2-by-command\n+v3\n" in res.details["diff"]


async def test_write_after_read_has_a_b_headers_and_counts_and_updates_the_hash(sandbox, call):
    await put(sandbox, "m.txt", "a\nb\nc\n")
    await call(read, path="m.txt")
    res = await call(write, path="m.txt", content="a\nB\nc\nd\n")
    d = res.details
    assert d["diff"].startswith("--- a/m.txt\n+++ b/m.txt\n")
    assert (d["added"], d["removed"], d["created"]) == (2, 1, False)
    # Our own write updated the stored hash: a second write needs no new read.
    again = await call(write, path="m.txt", content="only\n")
    assert not again.is_error and await get(sandbox, "m.txt") == b"only\n"


async def test_write_to_a_directory_is_refused(sandbox, call):
    await put(sandbox, "d/x.txt", "x")
    assert "directory" in error_of(await call(write, path="d", content="x"))["error"]
    assert "directory" in error_of(await call(write, path=".", content="x"))["error"]


async def test_write_refuses_paths_outside(sandbox, call):
    assert "outside" in error_of(await call(write, path="../escape.txt", content="x"))["error"]


# ---------------------------------------------------------------- fs_edit


async def test_edit_replaces_one_exact_match_with_a_diff(sandbox, call, ctx):
    await put(sandbox, "src/app.py", "def f():\n    return 1\n\ndef g():\n    return 2\n")
    await call(read, path="src/app.py")
    res = await call(edit, path="src/app.py", old_string="    return 1\n", new_string="    x = 1\n    return x\n")
    assert not res.is_error, res.text_content
    assert await get(sandbox, "src/app.py") == b"def f():\n    x = 1\n    return x\n\ndef g():\n    return 2\n"
    assert res.details["diff"].startswith("--- a/src/app.py\n+++ b/src/app.py\n")
    assert (res.details["added"], res.details["removed"]) == (2, 1)
    # The hash follows our own edit, so a chained edit works without a re-read.
    res2 = await call(edit, path="src/app.py", old_string="return 2", new_string="return 3")
    assert not res2.is_error


async def test_edit_zero_matches_names_the_count(sandbox, call):
    await put(sandbox, "a.txt", "alpha\n")
    await call(read, path="a.txt")
    body = error_of(await call(edit, path="a.txt", old_string="beta", new_string="gamma"))
    assert "0 matches" in body["error"] and any("fs_read" in r for r in body["recommendations"])


async def test_edit_several_matches_need_replace_all(sandbox, call):
    await put(sandbox, "a.txt", "x = 1\nx = 1\nx = 1\n")
    await call(read, path="a.txt")
    body = error_of(await call(edit, path="a.txt", old_string="x = 1", new_string="x = 2"))
    assert "3 times" in body["error"]
    assert any("replace_all" in r and "context" in r for r in body["recommendations"])
    assert await get(sandbox, "a.txt") == b"x = 1\nx = 1\nx = 1\n"
    res = await call(edit, path="a.txt", old_string="x = 1", new_string="x = 2", replace_all=True)
    assert not res.is_error and await get(sandbox, "a.txt") == b"x = 2\nx = 2\nx = 2\n"
    assert (res.details["added"], res.details["removed"]) == (3, 3)


async def test_edit_same_strings_is_an_error(sandbox, call):
    await put(sandbox, "a.txt", "same\n")
    await call(read, path="a.txt")
    assert "the same" in error_of(await call(edit, path="a.txt", old_string="same", new_string="same"))["error"]


async def test_edit_empty_old_string_is_an_error(sandbox, call):
    await put(sandbox, "a.txt", "x\n")
    await call(read, path="a.txt")
    body = error_of(await call(edit, path="a.txt", old_string="", new_string="y"))
    assert "empty" in body["error"] and any("fs_write" in r for r in body["recommendations"])


async def test_edit_needs_a_read_and_an_unchanged_file(sandbox, call):
    await put(sandbox, "a.txt", "one\n")
    assert "read it again" in error_of(await call(edit, path="a.txt", old_string="one", new_string="two"))["error"]
    await call(read, path="a.txt")
    await sandbox.exec("printf 'one\\nmore\\n' > a.txt")
    body = error_of(await call(edit, path="a.txt", old_string="one", new_string="two"))
    assert "changed since you last read it" in body["error"]
    assert await get(sandbox, "a.txt") == b"one\nmore\n"


async def test_edit_missing_file_points_to_fs_write(sandbox, call):
    body = error_of(await call(edit, path="nope.txt", old_string="a", new_string="b"))
    assert "does not exist" in body["error"] and any("fs_write" in r for r in body["recommendations"])


async def test_edit_keeps_crlf_line_endings(sandbox, call):
    await put(sandbox, "win.txt", b"one\r\ntwo\r\nthree\r\n")
    await call(read, path="win.txt")
    res = await call(edit, path="win.txt", old_string="one\ntwo", new_string="one\n2")
    assert not res.is_error, res.text_content
    assert await get(sandbox, "win.txt") == b"one\r\n2\r\nthree\r\n"


# ---------------------------------------------------------------- fs_multi_edit


async def test_multi_edit_chains_edits_per_file_and_diffs_each(sandbox, call):
    await put(sandbox, "a.py", "a = 1\nb = 2\n")
    await put(sandbox, "b.py", "import a\n")
    await call(read, path="a.py")
    await call(read, path="b.py")
    res = await call(
        multi,
        edits=[
            {"path": "a.py", "old_string": "a = 1", "new_string": "a = 10"},
            {"path": "b.py", "old_string": "import a", "new_string": "import a as alpha"},
            # sees the first edit's result
            {"path": "a.py", "old_string": "a = 10\n", "new_string": "a = 10\nc = 3\n"},
        ],
    )
    assert not res.is_error, res.text_content
    assert await get(sandbox, "a.py") == b"a = 10\nc = 3\nb = 2\n"
    assert await get(sandbox, "b.py") == b"import a as alpha\n"
    files = {f["path"]: f for f in res.details["files"]}
    assert set(files) == {"a.py", "b.py"}
    assert files["a.py"]["diff"].startswith("--- a/a.py\n+++ b/a.py\n")
    assert (files["a.py"]["added"], files["a.py"]["removed"]) == (2, 1)
    assert res.details["added"] == 3 and res.details["removed"] == 2
    assert res.details["diff"] == files["a.py"]["diff"] + files["b.py"]["diff"]


async def test_multi_edit_is_all_or_none(sandbox, call):
    await put(sandbox, "a.py", "a = 1\n")
    await put(sandbox, "b.py", "b = 1\n")
    await call(read, path="a.py")
    await call(read, path="b.py")
    body = error_of(
        await call(
            multi,
            edits=[
                {"path": "a.py", "old_string": "a = 1", "new_string": "a = 2"},
                {"path": "b.py", "old_string": "not there", "new_string": "x"},
            ],
        )
    )
    assert body["error"].startswith("edit 2 (b.py)") and "0 matches" in body["error"]
    assert await get(sandbox, "a.py") == b"a = 1\n"
    assert await get(sandbox, "b.py") == b"b = 1\n"


async def test_multi_edit_second_edit_on_same_file_fails_leaves_it_unchanged(sandbox, call):
    await put(sandbox, "a.py", "x\ny\n")
    await call(read, path="a.py")
    body = error_of(
        await call(
            multi,
            edits=[
                {"path": "a.py", "old_string": "x", "new_string": "z"},
                {"path": "a.py", "old_string": "x", "new_string": "w"},  # gone after edit 1
            ],
        )
    )
    assert "edit 2" in body["error"]
    assert await get(sandbox, "a.py") == b"x\ny\n"


async def test_multi_edit_read_rule_applies_to_every_file(sandbox, call):
    await put(sandbox, "a.py", "a\n")
    await put(sandbox, "unread.py", "u\n")
    await call(read, path="a.py")
    body = error_of(
        await call(
            multi,
            edits=[
                {"path": "a.py", "old_string": "a", "new_string": "A"},
                {"path": "unread.py", "old_string": "u", "new_string": "U"},
            ],
        )
    )
    assert "read it again" in body["error"]
    assert await get(sandbox, "a.py") == b"a\n"


async def test_multi_edit_needs_at_least_one_edit():
    with pytest.raises(ValidationError):
        multi.parse({"edits": []})


# ---------------------------------------------------------------- fs_glob


async def test_glob_newest_first_and_under_a_path(sandbox, call):
    for name in ("old.py", "mid.py", "new.py", "notes.md", "sub/inner.py"):
        await put(sandbox, f"src/{name}", "x\n")
    r = await sandbox.exec(
        "touch -d '2020-01-01' src/old.py && touch -d '2021-01-01' src/mid.py && "
        "touch -d '2022-01-01' src/new.py && touch -d '2019-01-01' src/sub/inner.py"
    )
    assert r.exit_code == 0, r.stderr
    res = await call(glob_, pattern="src/*.py", newest_first=True)
    assert res.text_content.splitlines() == ["src/new.py", "src/mid.py", "src/old.py"]
    assert res.details["count"] == 3 and res.details["truncated"] is False
    in_path_order = await call(glob_, pattern="src/*.py")  # the default: no time looked at
    assert in_path_order.text_content.splitlines() == ["src/mid.py", "src/new.py", "src/old.py"]
    deep = await call(glob_, pattern="**/*.py", path="src")
    assert "src/sub/inner.py" in deep.details["paths"]
    assert "src/notes.md" not in deep.details["paths"]


GLOB_TREE = ["b.py", "a.py", "c.txt", "d.pyi", "x.py/inner.txt", "src/deep/e.py", "src/f.PY", "g[1].py", "h{a}.py",
             "tests/t.py", "pkg/tests/u.py"]
GLOB_PATTERNS = ["**/*.py", "*.py", "src/**", "**/tests", "**/*.{py,txt}", "g[1].py", "g[!x]*", "h{a}.py", "**/?.py",
                 "**/*.py/**", "**/inner.txt", "*", "**/*PY"]


async def test_glob_finds_what_the_glob_regex_matches_in_path_order(sandbox):
    """Each sandbox (LocalSandbox, the container's helper with rg, the exec transport) lists exactly what the
    desk's glob dialect matches (the files and the folders holding them), in path order; the helper's
    literal-tail shortcut included."""
    from desktop_app.core import glob_regex

    for name in GLOB_TREE:
        await put(sandbox, name, "x")
    entries = set(GLOB_TREE) | {"/".join(n.split("/")[:i]) for n in GLOB_TREE for i in range(1, n.count("/") + 1)}
    for pattern in GLOB_PATTERNS:
        want = sorted(e for e in entries if glob_regex(pattern).match(e))
        assert [f.path for f in await sandbox.glob(pattern)] == want, pattern


async def test_glob_lists_a_name_that_is_not_utf8(sandbox):
    """A file name with a byte that is not UTF-8 (written by some tool, or an archive) is listed, once, beside
    its neighbours: the listing is decoded as a whole, undecodable bytes kept."""
    r = await sandbox.exec("mkdir -p enc && : > enc/plain.py && : > \"enc/$(printf 'caf\\351').py\"")
    assert r.exit_code == 0, r.stderr
    paths = [f.path for f in await sandbox.glob("enc/*.py")]
    assert len(paths) == 2 and paths[1] == "enc/plain.py", paths
    assert paths[0].startswith("enc/caf") and paths[0].endswith(".py") and paths[0] != "enc/caf.py"


async def test_glob_caps_at_200_newest(sandbox, call):
    r = await sandbox.exec("mkdir -p many && for i in $(seq 1 205); do : > many/f$i.txt; done")
    assert r.exit_code == 0
    res = await call(glob_, pattern="many/*.txt", newest_first=True)
    assert res.details["count"] == 200 and res.details["truncated"] is True
    assert "200 newest" in res.text_content
    first = await call(glob_, pattern="many/*.txt")
    assert first.details["count"] == 200 and first.details["truncated"] is True and "200 first" in first.text_content
    assert first.details["paths"] == sorted(first.details["paths"]) and first.details["paths"][0] == "many/f1.txt"
    assert "many/f99.txt" not in first.details["paths"]  # past the first 200 in path order (f1, f10, f100, ...)


async def test_glob_no_match_and_escape(sandbox, call):
    res = await call(glob_, pattern="*.nothing")
    assert not res.is_error and "No files match" in res.text_content and res.details["count"] == 0
    assert "outside" in error_of(await call(glob_, pattern="../*"))["error"]
    assert "outside" in error_of(await call(glob_, pattern="*", path="../.."))["error"]


# ---------------------------------------------------------------- fs_grep


async def test_grep_outputs_path_line_text(sandbox, call):
    await put(sandbox, "src/a.py", "import os\nTODO: fix\nprint(1)\n")
    await put(sandbox, "src/b.md", "nothing\ntodo later\n")
    res = await call(grep, pattern="TODO")
    assert res.text_content.splitlines() == ["src/a.py:2:TODO: fix"]
    res = await call(grep, pattern="todo", ignore_case=True)
    assert sorted(res.text_content.splitlines()) == ["src/a.py:2:TODO: fix", "src/b.md:2:todo later"]
    assert res.details["count"] == 2 and res.details["files"] == 2
    res = await call(grep, pattern="todo", ignore_case=True, glob="*.md")
    assert res.text_content.splitlines() == ["src/b.md:2:todo later"]
    res = await call(grep, pattern="import", path="src")
    assert res.text_content.splitlines() == ["src/a.py:1:import os"]


async def test_grep_max_results_and_no_match(sandbox, call):
    await put(sandbox, "many.txt", "".join(f"hit {i}\n" for i in range(50)))
    res = await call(grep, pattern="hit", max_results=10)
    assert res.details["count"] == 10 and res.details["truncated"] is True
    assert "max_results" in res.text_content
    none = await call(grep, pattern="zzz_absent")
    assert not none.is_error and none.details["count"] == 0 and "No matches" in none.text_content
    assert "outside" in error_of(await call(grep, pattern="x", path="../"))["error"]


async def test_grep_bad_regex_is_a_clear_error(sandbox, call):
    await put(sandbox, "a.txt", "f(x)\n")
    body = error_of(await call(grep, pattern="f(x"))
    assert "regular expression" in body["error"]
    assert any("backslash" in r for r in body["recommendations"])
    res = await call(grep, pattern=r"f\(x\)")
    assert res.text_content == "a.txt:1:f(x)"


# ---------------------------------------------------------------- .gitignore and include_ignored
# On docker this is ripgrep in the container; on the host (no rg here) the Python walker's own reading of
# .gitignore files: the same answers either way.
IGNORED_TREE = {
    ".gitignore": "node_modules/\n*.log\n/top.txt\n!keep.log\n",
    "src/.gitignore": "build\n",
    "src/a.py": "needle\n",
    "src/top.txt": "needle\n",  # /top.txt is anchored to the root: this one is kept
    "src/build/gen.py": "needle\n",
    "node_modules/pkg/index.js": "needle\n",
    "debug.log": "needle\n",
    "keep.log": "needle\n",
    "top.txt": "needle\n",
    ".github/ci.yml": "needle\n",  # hidden, not ignored: searched
}
KEPT = ["keep.log", "src/a.py", "src/top.txt", ".github/ci.yml"]
IGNORED = ["debug.log", "node_modules/pkg/index.js", "src/build/gen.py", "top.txt"]


async def test_grep_and_glob_skip_what_gitignore_ignores_unless_asked(sandbox, call):
    for path, text in IGNORED_TREE.items():
        await put(sandbox, path, text)
    res = await call(grep, pattern="needle")
    assert sorted(r.split(":")[0] for r in res.text_content.splitlines()) == sorted(KEPT)
    res = await call(grep, pattern="needle", include_ignored=True)
    assert sorted(r.split(":")[0] for r in res.text_content.splitlines()) == sorted(KEPT + IGNORED)
    listed = set((await call(glob_, pattern="**/*")).details["paths"])
    assert listed == {*KEPT, ".gitignore", "src/.gitignore", ".github", "src"}
    every = (await call(glob_, pattern="**/*", include_ignored=True)).details["paths"]
    assert set(IGNORED) <= set(every) and "node_modules" in every
    # A file named outright is searched even when ignored, as rg does.
    res = await call(grep, pattern="needle", path="debug.log")
    assert res.text_content == "debug.log:1:needle"


# More trees, each a .gitignore rule the three sandboxes must read alike: (the tree, the files kept). Every
# file holds "needle"; every folder that is not ignored holds a kept file (a folder of ignored files only is
# listed by the walker, not by rg).
GITIGNORE_CASES = {
    "nested": ({
        ".gitignore": "*.tmp\n",
        "a/.gitignore": "!x.tmp\nsecret/\n",  # a deeper file takes back what the one above ignores
        "a/b/.gitignore": "*.md\n",
        "a.tmp": "", "a/x.tmp": "", "a/y.tmp": "", "a/secret/s.txt": "", "secret/s.txt": "",
        "a/b/r.md": "", "a/b/c.txt": "", "r.md": "",
    }, ["a/x.tmp", "secret/s.txt", "a/b/c.txt", "r.md"]),
    "negated": ({
        ".gitignore": "*.log\n!keep.log\n!early.log\n*arly.log\nlogs/\n!logs/keep.log\n",
        "x.log": "", "keep.log": "", "sub/keep.log": "", "sub/x.log": "", "early.log": "", "logs/keep.log": "",
        "sub/a.txt": "",
    }, ["keep.log", "sub/keep.log", "sub/a.txt"]),  # the last match wins; no file back from an ignored folder
    "directory": ({
        ".gitignore": "build/\n/dist/\n",
        "build/out.js": "", "src/build/x.js": "", "lib/build": "", "dist/a.js": "", "src/dist/a.js": "",
        "src/a.js": "",
    }, ["lib/build", "src/dist/a.js", "src/a.js"]),  # build/ is folders only, anywhere; /dist/ at the root
    "spaces": ({
        ".gitignore": "my notes.txt\nspaced dir/\n* draft.md\n",
        "my notes.txt": "", "other notes.txt": "", "spaced dir/f.txt": "", "a b/c d.txt": "",
        "a b/my notes.txt": "", "x draft.md": "", "draft.md": "",
    }, ["other notes.txt", "a b/c d.txt", "draft.md"]),
}


def _with_folders(paths) -> set[str]:
    out = set(paths)
    for p in paths:
        while "/" in p:
            p = p.rsplit("/", 1)[0]
            out.add(p)
    return out


@pytest.mark.parametrize("case", sorted(GITIGNORE_CASES))
async def test_gitignore_rules_read_alike_on_every_sandbox(sandbox, call, case):
    tree, kept = GITIGNORE_CASES[case]
    for path, text in tree.items():
        await put(sandbox, path, text or "needle\n")
    files = [p for p in tree if not p.endswith(".gitignore")]
    res = await call(grep, pattern="needle", max_results=100)
    assert sorted(r.rsplit(":", 2)[0] for r in res.text_content.splitlines()) == sorted(kept)
    res = await call(grep, pattern="needle", max_results=100, include_ignored=True)
    assert sorted(r.rsplit(":", 2)[0] for r in res.text_content.splitlines()) == sorted(files)
    ignores = [p for p in tree if p.endswith(".gitignore")]
    listed = set((await call(glob_, pattern="**/*")).details["paths"])
    assert listed == _with_folders(kept) | _with_folders(ignores)
    every = set((await call(glob_, pattern="**/*", include_ignored=True)).details["paths"])
    assert every == _with_folders(files) | _with_folders(ignores)
    spaced = [p for p in kept if " " in p]
    for path in spaced:  # a name with a space, as a glob and as the path searched
        assert (await call(glob_, pattern=path)).details["paths"] == [path]
        assert (await call(grep, pattern="needle", path=path)).text_content == f"{path}:1:needle"


# fs_glob narrows rg's listing to the files a pattern's literal end can match (an ignore file of its own that
# rg reads after the project's): what it answers must be what the full listing filtered by the regex answers,
# ignore files, hidden files, .git, folders named like the end, and odd names included.
NARROWED_TREE = {
    ".gitignore": "*.gen.pyi\n!keep.gen.pyi\nbuild/\nold.pyi/\n",
    "a/.ignore": "*.py\n",
    "a/.rgignore": "!main.py\n",
    "a/one.pyi": "", "a/b/two.pyi": "", "a/b/two.py": "", "a/main.py": "", "a/z.gen.pyi": "",
    "a/keep.gen.pyi": "", "build/three.pyi": "", "x.pyi/inner.txt": "", "old.pyi/gone.txt": "",
    ".hid/h.pyi": "", ".x.pyi": "", "sp ace.pyi": "", "odd\\name.pyi": "", "h#!.pyi": "", "c:d.pyi": "",
    "é.pyi": "", "tests/conftest.py": "", "pkg/tests/t.txt": "", "a/tests": "",
    "br[1].pyi": "", "br1.pyi": "", "cu{a}.pyi": "", "src/w/v.ts": "", "src/v.ts.pyi/u.md": "",
}
NARROWED_PATTERNS = ["**/*.pyi", "*.pyi", "a/**/*.pyi", "**/*.gen.pyi", "**/keep.gen.pyi", "**/tests",
                     "**/conftest.py", "**/inner.txt", "**/*ace.pyi", "**/odd\\name.pyi", "**/h#!.pyi",
                     "**/c:d.pyi", "**/é.pyi", "**/*.py", "**/.x.pyi", "**/HEAD", "**/*.{pyi,txt}", "a/*",
                     "**/br[1].pyi", "**/*].pyi", "**/cu{a}.pyi", "src/**/*.ts", "**/*.ts.pyi", "*.md", "**/*.md"]


async def test_glob_narrowed_listing_answers_as_the_full_one(sandbox):
    from desktop_app.core import glob_regex

    for path, text in NARROWED_TREE.items():
        await put(sandbox, path, text or "x\n")
    r = await sandbox.exec("mkdir -p .git && : > .git/HEAD && : > .git/x.pyi")
    assert r.exit_code == 0, r.stderr
    for include_ignored in (False, True):
        every = [f.path for f in await sandbox.glob("**/*", limit=1000, include_ignored=include_ignored)]
        assert not any(p == ".git" or p.startswith(".git/") for p in every)
        assert ("a/z.gen.pyi" in every) is include_ignored and ("build/three.pyi" in every) is include_ignored
        # The exec transport lists by a script per call and narrows nothing: a few patterns there.
        for pattern in NARROWED_PATTERNS[:: 4 if getattr(sandbox, "transport", "") == "exec" else 1]:
            want = [p for p in every if glob_regex(pattern).match(p)]
            got = [f.path for f in await sandbox.glob(pattern, limit=1000, include_ignored=include_ignored)]
            assert got == want, (pattern, include_ignored)
    assert "x.pyi" in [f.path for f in await sandbox.glob("**/*.pyi")]  # a folder named like the end


def test_the_tools_say_which_dialect_runs():
    assert "Rust regex" in grep.description and "ripgrep" in grep.description
    assert "Python `re`" in grep.description and "RE2" in grep.description
    assert "include_ignored" in grep.description and "include_ignored" in glob_.description

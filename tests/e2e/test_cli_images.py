"""`agent-desk run --image-file PATH` (repeatable): the images reach the model as image blocks before the
prompt, `sessions show` and the audit report name them by digest, and each bad file is a one-line usage error
before any request."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from desktop_app.cli import main
from desktop_app.core import image_block, read_prompt_image
from tests.fakes.anthropic_server import reply, text
from tests.kit.pictures import png, webp

pytestmark = pytest.mark.e2e
EXIT_USAGE = 2


def test_run_sends_the_image_files_and_sessions_show_names_them(env, server, tmp_path: Path, capsys) -> None:
    (tmp_path / "p").mkdir()
    shot, pic = tmp_path / "screen shot.jpg", tmp_path / "pic.webp"  # the first is a PNG whatever its name says
    shot.write_bytes(png(32, 24))
    pic.write_bytes(webp(10, 5))
    server.add(reply(text("A blue rectangle, twice.")))
    # in this process (the refusals below too): a CLI subprocess costs seconds of imports on a loaded machine
    code = main(["run", "--project", str(tmp_path / "p"), "--sandbox", "local", "--image-file", str(shot),
                 "--image-file", str(pic), "what are these?"])
    err = capsys.readouterr().err
    assert code == 0, err
    [req] = server.requests
    sent = [{k: v for k, v in b.items() if k != "cache_control"} for b in req.messages[-1]["content"]]
    expect_shot, expect_pic = read_prompt_image(shot.read_bytes()), read_prompt_image(pic.read_bytes())
    assert sent == [image_block(expect_shot), image_block(expect_pic), {"type": "text", "text": "what are these?"}]
    assert sent[0]["source"]["media_type"] == "image/png"
    sid = err.split("session ", 1)[1].split()[0]
    assert main(["sessions", "show", sid]) == 0
    shown = capsys.readouterr().out
    assert f"[image sha256:{expect_shot.sha256} image/png {len(shot.read_bytes())} bytes 32×24]" in shown
    assert f"[image sha256:{expect_pic.sha256} image/webp" in shown
    assert main(["audit", "verify"]) == 0
    # the auditor's report names the prompt's images by digest too
    assert main(["audit", "report", "--project", str(tmp_path / "p"), "--out", str(tmp_path / "r.html")]) == 0
    assert f"[image sha256:{expect_shot.sha256} image/png" in (tmp_path / "r.html").read_text()


def _files(tmp_path: Path, kind: str) -> tuple[list[str], str]:
    """The --image-file paths of one bad case, and what the one-line error says."""
    f = tmp_path / "pic.png"
    if kind == "missing":
        return [str(tmp_path / "nope.png")], "nope.png was not attached: there is no such file"
    if kind == "folder":
        (tmp_path / "shots").mkdir()
        return [str(tmp_path / "shots")], "was not attached: it is a folder, not an image file"
    if kind == "under-a-file":
        f.write_bytes(png(2, 2))
        return [str(f / "x.png")], "x.png was not attached: Not a directory"
    if kind == "too-large":
        with f.open("wb") as out:
            out.write(png(2, 2))
            out.truncate(5 * 1024 * 1024)  # sparse: 5 MB that take no disk
        return [str(f)], "5.0 MB is over the 3.75 MB an image may have"
    if kind == "text":
        f.write_text("not a picture at all\n")
        return [str(f)], "pic.png was not attached: its bytes are not PNG, JPEG, GIF or WebP"
    if kind == "svg":
        f.write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
        return [str(f)], "its bytes are not PNG, JPEG, GIF or WebP"
    if kind == "damaged":
        f.write_bytes(png(2, 2)[:14])
        return [str(f)], "pic.png was not attached: its PNG header is damaged or cut short"
    if kind == "too-wide":
        f.write_bytes(png(9000, 1))
        return [str(f)], "9000×1 px is over the 8000 px a side"
    f.write_bytes(png(2, 2))  # too many
    return [str(f)] * 21, "21 images is more than the 20 a message may carry"


@pytest.mark.parametrize("kind", ["missing", "folder", "under-a-file", "too-large", "text", "svg", "damaged",
                                  "too-wide", "too-many"])
def test_a_bad_image_file_is_a_usage_error_before_any_request(env, server, tmp_path: Path, capsys,
                                                              kind: str) -> None:
    (tmp_path / "p").mkdir()
    paths, says = _files(tmp_path, kind)
    args = ["run", "--project", str(tmp_path / "p"), "--sandbox", "local"]
    for p in paths:
        args += ["--image-file", p]
    assert main([*args, "look"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert says in err and err.startswith("agent-desk: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert server.requests == []
    assert not os.path.exists(tmp_path / "desk.db")  # nothing stored either


def test_resume_sends_image_files_with_its_new_message(env, server, tmp_path: Path, capsys) -> None:
    """`sessions resume ID PROMPT --image-file PATH`: the picture goes with the new message, after the history;
    a picture without a message, or a bad one, is a usage error that leaves the session as it was."""
    (tmp_path / "p").mkdir()
    pic = tmp_path / "after.png"
    pic.write_bytes(png(12, 7))
    server.add(reply(text("Noted.")), reply(text("A small picture.")))
    assert main(["run", "--project", str(tmp_path / "p"), "--sandbox", "local", "remember this"]) == 0
    sid = capsys.readouterr().err.split("session ", 1)[1].split()[0]
    opts = ["--sandbox", "local", "--image-file", str(pic)]
    assert main(["sessions", "resume", sid, *opts]) == EXIT_USAGE  # no message to carry it
    assert "--image-file goes with a new message" in capsys.readouterr().err
    (tmp_path / "bad.png").write_text("not a picture")
    assert main(["sessions", "resume", sid, "and this?", *opts, "--image-file", str(tmp_path / "bad.png")]) == 2
    assert "bad.png was not attached" in capsys.readouterr().err
    assert len(server.requests) == 1  # neither refusal reached the model
    assert main(["sessions", "resume", sid, "and this?", *opts]) == 0, capsys.readouterr().err
    last = server.requests[-1].messages
    sent = [{k: v for k, v in b.items() if k != "cache_control"} for b in last[-1]["content"]]
    assert sent == [image_block(read_prompt_image(pic.read_bytes())), {"type": "text", "text": "and this?"}]
    assert [m["role"] for m in last] == ["user", "assistant", "user"]  # the history, then the new message
    assert main(["audit", "verify"]) == 0

"""Images in the window's prompt: pasted (a clipboard image), dropped (image files), attached with the file
dialog, removed; a refused one says why in one line and nothing else is lost; sent, they reach the model as
image blocks, show as thumbnails (a click shows one whole), and show again when the session is reopened."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QImage
from PySide6.QtWidgets import QApplication

from desktop_app.core import image_block, read_prompt_image
from tests.fakes.anthropic_server import AnthropicServer, reply, text
from tests.kit.pictures import gif, png, webp
from tests.ui.window_kit import open_app

pytestmark = pytest.mark.e2e


def _drop(widget, mime: QMimeData) -> None:
    """The events Qt delivers when files are dragged onto the prompt and dropped: enter, move, drop."""
    args = (Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    enter = QDragEnterEvent(QPoint(10, 10), *args)
    QApplication.sendEvent(widget.viewport(), enter)
    assert enter.isAccepted()
    QApplication.sendEvent(widget.viewport(), QDragMoveEvent(QPoint(12, 12), *args))
    QApplication.sendEvent(widget.viewport(), QDropEvent(QPointF(12, 12), *args))


def _files(*paths) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    return mime


def _sent(req) -> list[dict]:
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in req.messages[-1]["content"]]


def test_paste_drop_attach_remove_send_show_and_reopen(qtbot, run, store, window_project, tmp_path):
    _folder, project = window_project
    shot, pic, anim, fake = tmp_path / "shot.jpg", tmp_path / "pic.webp", tmp_path / "anim.gif", tmp_path / "x.png"
    shot.write_bytes(png(120, 80, "#2f9e44"))  # a PNG named .jpg: sent as image/png
    pic.write_bytes(webp(40, 30))
    anim.write_bytes(gif(5, 5))
    fake.write_text("not an image\n")
    with AnthropicServer([reply(text("Three pictures: a square, a rectangle, a photo."))]) as server:
        run(store.save_project(project))
        window, controller, desk = open_app(qtbot, run, store, server, project)
        run(controller.start(check_docker=False))
        sid = run(controller.new_session(project.id)).id
        strip = window.attachments
        window.prompt.setPlainText("what are these?")

        # paste: the clipboard holds a decoded image (a screenshot tool's copy)
        pasted = QMimeData()
        pasted.setImageData(QImage.fromData(png(64, 48, "#d9363e")))
        assert window.prompt.canInsertFromMimeData(pasted)
        window.prompt.insertFromMimeData(pasted)
        assert strip.count() == 1 and strip.images()[0].media_type == "image/png"
        # drop: two image files and one that only says it is a PNG
        _drop(window.prompt, _files(shot, pic))
        assert [i.name for i in strip.images()[1:]] == ["shot.jpg", "pic.webp"]
        assert strip.images()[1].media_type == "image/png"
        _drop(window.prompt, _files(fake))
        assert strip.refusal.isVisible()
        assert strip.refusal.text() == f"{fake} was not attached: its bytes are not PNG, JPEG, GIF or WebP"
        assert strip.count() == 3 and window.prompt.toPlainText() == "what are these?"  # nothing else lost
        # the same image again: refused, said
        _drop(window.prompt, _files(pic))
        assert "the same image is already attached" in strip.refusal.text() and strip.count() == 3
        # the attach button's dialog (opened, not exec'd), then the remove button of what it added
        qtbot.mouseClick(strip.attach_btn, Qt.MouseButton.LeftButton)
        dialog = strip._dialog
        assert dialog is not None and dialog.isVisible()
        dialog.filesSelected.emit([str(anim)])
        dialog.close()
        assert strip.count() == 4 and not strip.refusal.isVisible()
        gif_digest = strip.images()[3].sha256
        qtbot.mouseClick(strip._thumbs[gif_digest].remove, Qt.MouseButton.LeftButton)
        assert strip.count() == 3 and gif_digest not in strip._thumbs
        images = strip.images()

        with qtbot.waitSignal(controller.turnFinished, timeout=60_000) as finished:
            qtbot.keyClick(window.prompt, Qt.Key.Key_Return)
        assert finished.args[1].reason == "end_turn"
        assert strip.count() == 0 and window.prompt.toPlainText() == ""
        [req] = server.requests
        assert _sent(req) == [*(image_block(i) for i in images), {"type": "text", "text": "what are these?"}]
        # the conversation: a thumbnail each, a click shows it whole
        conv = window.conversation
        assert conv.image_digests() == [i.sha256 for i in images]
        conv.anchorClicked.emit(QUrl(f"image:{images[1].sha256}"))
        viewer = conv._viewer
        assert viewer is not None and viewer.isVisible()
        assert viewer.picture.pixmap().size().toTuple() == (120, 80)
        viewer.close()
        run(controller.close())
        run(desk.close())

        # the window again (a restart): the session's images are shown from the store
        window2, controller2, desk2 = open_app(qtbot, run, store, server, project)
        run(controller2.start(check_docker=False))
        run(controller2.select_session(sid))
        qtbot.waitUntil(lambda: window2.conversation.image_digests() == [i.sha256 for i in images], timeout=15_000)
        assert "what are these?" in window2.conversation.toPlainText()
        assert run(store.verify()).ok
        run(controller2.close())
        run(desk2.close())


def test_an_image_only_prompt_is_sent_and_a_session_limit_refusal_gives_everything_back(
        qtbot, run, store, window_project, tmp_path):
    _folder, project = window_project
    with AnthropicServer([reply(text("A green rectangle."))]) as server:
        run(store.save_project(project))
        window, controller, desk = open_app(qtbot, run, store, server, project)
        run(controller.start(check_docker=False))
        run(controller.new_session(project.id))
        strip = window.attachments
        assert strip.add_data(png(30, 10, "#2f9e44"), "green.png")
        with qtbot.waitSignal(controller.turnFinished, timeout=60_000):
            window._send_clicked()  # no text: the image alone is the prompt
        assert _sent(server.requests[0]) == [image_block(read_prompt_image(png(30, 10, "#2f9e44")))]
        # a send the session refuses (it would hold 21 images, one over 2000 px): text and images come back
        for k in range(19):
            assert strip.add_data(png(2, 2 + k), f"small{k}.png")
        assert strip.add_data(png(2100, 4), "wide.png")
        window.prompt.setPlainText("and all these?")
        window._send_clicked()
        qtbot.waitUntil(lambda: strip.count() == 20, timeout=15_000)
        assert window.prompt.toPlainText() == "and all these?"
        qtbot.waitUntil(lambda: "wide.png was not attached: with more than 20 images in a session each side may "
                        "have at most 2000 px" in window.conversation.toPlainText(), timeout=15_000)
        assert len(server.requests) == 1  # nothing was sent
        run(controller.close())
        run(desk.close())

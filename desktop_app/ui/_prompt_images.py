"""Images in the prompt box: pasted (a clipboard image or image files), dropped, or attached with a file dialog;
shown as thumbnails with a remove button above the box, refused in one line (why), and seen full size."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMimeData, QSize, Qt, Signal
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..core import MAX_IMAGES_PER_MESSAGE, ImageRefused, PromptImage, check_prompt_images, read_prompt_image
from ..runtime import read_image_file

THUMB = 56  # px, the longer side of a thumbnail in the prompt's strip
FILE_FILTER = "Images (*.png *.jpg *.jpeg *.gif *.webp);;All files (*)"


def thumbnail(data: bytes, side: int) -> QPixmap:
    """The image scaled down (never up) to fit `side`×`side`; a null pixmap when Qt cannot decode it."""
    img = QImage.fromData(data)
    if img.isNull():
        return QPixmap()
    if max(img.width(), img.height()) > side:
        img = img.scaled(side, side, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)
    return QPixmap.fromImage(img)


def png_bytes(image: QImage) -> bytes:
    """A clipboard image (Qt holds it decoded) as PNG bytes: what is sent and stored."""
    ba = QByteArray()
    buf = QBuffer(ba)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buf, "PNG")
    return bytes(ba.data())


class _Thumb(QFrame):
    removeRequested = Signal(str)
    viewRequested = Signal(str)

    def __init__(self, image: PromptImage, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.digest = image.sha256
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setToolTip(f"{image.label}: {image.width}×{image.height} px, {image.media_type}, "
                        f"{image.size / 1024:.0f} KB (click to see it whole)")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.setSpacing(2)
        self.picture = QLabel()
        self.picture.setPixmap(thumbnail(image.data, THUMB))
        self.picture.setFixedSize(QSize(THUMB, THUMB))
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.picture.setCursor(Qt.CursorShape.PointingHandCursor)
        self.picture.mousePressEvent = lambda _e: self.viewRequested.emit(self.digest)  # type: ignore[method-assign]
        self.remove = QToolButton()
        self.remove.setText("✕")
        self.remove.setAccessibleName(f"Remove {image.label}")
        self.remove.setToolTip(f"Remove {image.label} from the prompt")
        self.remove.setAutoRaise(True)
        self.remove.clicked.connect(lambda: self.removeRequested.emit(self.digest))
        lay.addWidget(self.picture)
        lay.addWidget(self.remove, 0, Qt.AlignmentFlag.AlignTop)


class AttachmentStrip(QWidget):
    """The images the next prompt carries, in order, and the last refusal's one line."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._images: list[PromptImage] = []
        self._thumbs: dict[str, _Thumb] = {}
        self.row = QHBoxLayout()
        self.row.setContentsMargins(0, 0, 0, 0)
        self.row.setSpacing(4)
        self.attach_btn = QPushButton("Image…")
        self.attach_btn.setToolTip(f"Add PNG, JPEG, GIF or WebP images to the prompt (up to {MAX_IMAGES_PER_MESSAGE}; "
                                   "you can also paste or drop them into the box)")
        self.attach_btn.setAccessibleName("Attach image")
        self.attach_btn.clicked.connect(self.choose_files)
        self.refusal = QLabel()
        self.refusal.setStyleSheet("color: #d9363e")
        self.refusal.setWordWrap(False)
        self.refusal.hide()
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(self.row)
        lay.addWidget(self.refusal, 1)
        self._dialog: QFileDialog | None = None
        self._viewer: ImageViewer | None = None
        self.changed.connect(self._fit)
        self.hide()  # shown while it holds an image or a refusal (the attach button lives beside Send)

    def _fit(self) -> None:
        self.setVisible(bool(self._images) or bool(self.refusal.text()))

    # what the prompt carries -------------------------------------------------------------------------
    def images(self) -> list[PromptImage]:
        return list(self._images)

    def count(self) -> int:
        return len(self._images)

    def take(self) -> list[PromptImage]:
        """The images, in order, and the strip emptied (the prompt was sent)."""
        taken = list(self._images)
        self.clear()
        return taken

    def clear(self) -> None:
        for digest in list(self._thumbs):
            self.remove(digest)
        self.say("")

    def restore(self, images: Iterable[PromptImage]) -> None:
        """Put back images of a send that was refused (nothing the person chose is lost)."""
        for img in images:
            self._add(img)

    def remove(self, digest: str) -> None:
        self._images = [i for i in self._images if i.sha256 != digest]
        thumb = self._thumbs.pop(digest, None)
        if thumb is not None:
            self.row.removeWidget(thumb)
            thumb.deleteLater()
        self.changed.emit()

    # ways in -----------------------------------------------------------------------------------------
    def add_data(self, data: bytes, name: str) -> bool:
        """Bytes from a paste or a drop; False (and the line says why) when refused."""
        try:
            img = read_prompt_image(data, name)
        except ImageRefused as e:
            return self.say(str(e))
        return self._accept(img)

    def add_files(self, paths: Iterable[str]) -> int:
        """Files from the dialog, a paste or a drop: how many were attached (the last refusal is shown)."""
        added = 0
        for path in paths:
            try:
                img = read_image_file(path)
            except ImageRefused as e:
                self.say(str(e))
                continue
            added += self._accept(img)
        return added

    def accepts(self, mime: QMimeData) -> bool:
        """Whether a paste or drop carries an image or local files (text goes to the box as usual)."""
        return mime.hasImage() or any(u.isLocalFile() for u in mime.urls())

    def add_mime(self, mime: QMimeData) -> bool:
        """A paste or a drop: its local files, else the clipboard's image (as PNG). True when handled."""
        files = [u.toLocalFile() for u in mime.urls() if u.isLocalFile()]
        if files:
            self.add_files(files)
            return True
        if mime.hasImage():
            image = QImage(mime.imageData())
            if image.isNull():
                self.say("the pasted image was not attached: the clipboard's image could not be read")
            else:
                self.add_data(png_bytes(image), "pasted image")
            return True
        return False

    def choose_files(self) -> None:
        """The attach button: a file dialog, opened without blocking the loop."""
        dlg = QFileDialog(self.window(), "Attach images", str(Path.home()), FILE_FILTER)
        dlg.setFileMode(QFileDialog.FileMode.ExistingFiles)
        dlg.filesSelected.connect(self.add_files)
        self._dialog = dlg
        dlg.open()

    # inside ------------------------------------------------------------------------------------------
    def say(self, line: str) -> bool:
        self.refusal.setText(line)
        self.refusal.setToolTip(line)
        self.refusal.setVisible(bool(line))
        self._fit()
        return False

    def _accept(self, img: PromptImage) -> bool:
        if any(i.sha256 == img.sha256 for i in self._images):
            return self.say(f"{img.label} was not attached: the same image is already attached")
        if QImage.fromData(img.data).isNull():
            return self.say(f"{img.label} was not attached: its {img.media_type} data cannot be decoded")
        try:
            check_prompt_images([*self._images, img])
        except ImageRefused as e:
            return self.say(f"{img.label} was not attached: {e}")
        self.say("")
        self._add(img)
        return True

    def _add(self, img: PromptImage) -> None:
        if img.sha256 in self._thumbs:
            return
        self._images.append(img)
        thumb = _Thumb(img)
        thumb.removeRequested.connect(self.remove)
        thumb.viewRequested.connect(self.view)
        self._thumbs[img.sha256] = thumb
        self.row.addWidget(thumb)
        self.changed.emit()

    def view(self, digest: str) -> None:
        img = next((i for i in self._images if i.sha256 == digest), None)
        if img is not None:
            self._viewer = show_full_size(self.window(), img.data, img.label)


class ImageViewer(QDialog):
    """An image at its full size (scrolled when larger than the screen)."""

    def __init__(self, parent: QWidget | None, data: bytes, title: str) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        image = QImage.fromData(data)
        self.picture = QLabel()
        self.picture.setPixmap(QPixmap.fromImage(image))
        self.picture.setAccessibleName(title)
        scroll = QScrollArea()
        scroll.setWidget(self.picture)
        scroll.setAlignment(Qt.AlignmentFlag.AlignCenter)
        lay = QVBoxLayout(self)
        lay.addWidget(scroll)
        lay.addWidget(QLabel(f"{image.width()}×{image.height()} px"))
        screen = self.screen().availableGeometry() if self.screen() else None
        w, h = image.width() + 40, image.height() + 70
        if screen is not None:
            w, h = min(w, screen.width() - 80), min(h, screen.height() - 80)
        self.resize(max(w, 240), max(h, 160))


def show_full_size(parent: QWidget | None, data: bytes, title: str) -> ImageViewer:
    viewer = ImageViewer(parent, data, title)
    viewer.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    viewer.open()
    return viewer


def demo_pictures() -> list[tuple[bytes, str]]:
    """Two pictures a person might paste (`--screenshot --view prompt-images`): a terminal with an error, a chart."""
    from PySide6.QtGui import QColor, QFont, QPainter

    term = QImage(640, 360, QImage.Format.Format_RGB32)
    term.fill(QColor("#1e1f22"))
    p = QPainter(term)
    p.setFont(QFont("monospace", 13))
    for i, (line, colour) in enumerate([("$ pytest -q tests/test_parser.py", "#d4d4d4"),
                                        ("F.....                                   [100%]", "#d4d4d4"),
                                        ("FAILED test_parser.py::test_dates - KeyError: 'tz'", "#f14c4c"),
                                        ("1 failed, 5 passed in 0.41s", "#f14c4c")]):
        p.setPen(QColor(colour))
        p.drawText(16, 36 + 28 * i, line)
    p.end()
    chart = QImage(480, 320, QImage.Format.Format_RGB32)
    chart.fill(QColor("white"))
    p = QPainter(chart)
    for i, h in enumerate((60, 120, 90, 200, 170, 240)):
        p.fillRect(40 + i * 70, 290 - h, 44, h, QColor("#3b82c4"))
    p.setPen(QColor("#333333"))
    p.drawLine(30, 290, 460, 290)
    p.end()
    return [(png_bytes(term), "pytest-failure.png"), (png_bytes(chart), "latency-chart.png")]


def show_demo_prompt(window: QWidget) -> None:
    """The prompt with two pictures attached, a refused file's line, and an earlier prompt with one in view."""
    pictures = demo_pictures()
    strip: AttachmentStrip = window.attachments  # type: ignore[attr-defined]
    for data, name in pictures:
        strip.add_data(data, name)
    strip.add_data(b"meeting notes\n", "notes.txt")  # refused: it says why, the two stay
    window.prompt.setPlainText("Why does this test fail? The chart is the latency since the change.")  # type: ignore[attr-defined]
    first = read_prompt_image(pictures[0][0], pictures[0][1])
    window.conversation.add_user_message("Here is what I see after the upgrade:", [first])  # type: ignore[attr-defined]

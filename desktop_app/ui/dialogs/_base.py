"""Dialogs that async code awaits: opened with open() and answered through a future, never exec()."""

from __future__ import annotations

import asyncio
from typing import Any

from PySide6.QtWidgets import QDialog, QFileDialog


class FutureDialog(QDialog):
    """open() the dialog and await `ask()`: `value()` on accept, None on cancel. Never exec()."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._future: asyncio.Future | None = None
        self.finished.connect(self._finished)

    def ask(self) -> asyncio.Future:
        self._future = asyncio.get_running_loop().create_future()
        self.open()
        return self._future

    def value(self) -> Any:
        return True

    def _finished(self, code: int) -> None:
        if self._future is not None and not self._future.done():
            self._future.set_result(self.value() if code == QDialog.DialogCode.Accepted else None)


async def ask_file(parent, title: str, start: str = "", filters: str = "", *, save: bool = False,
                   folder: bool = False) -> str | None:
    """A file (or, with `folder`, a folder) chosen in a non-blocking QFileDialog; None when cancelled."""
    dlg = QFileDialog(parent, title, start, filters)
    if save:
        dlg.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
    if folder:
        dlg.setFileMode(QFileDialog.FileMode.Directory)
        dlg.setOption(QFileDialog.Option.ShowDirsOnly)
    fut = asyncio.get_running_loop().create_future()
    dlg.fileSelected.connect(lambda p: fut.done() or fut.set_result(p))
    dlg.rejected.connect(lambda: fut.done() or fut.set_result(None))
    dlg.open()
    try:
        return await fut
    finally:
        dlg.deleteLater()

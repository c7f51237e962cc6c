"""An image file a person names (the CLI's --image-file, the window's attach button or a dropped file), read
as a prompt image: a missing, unreadable or too large file is refused in one line before it is read whole."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from ..core import MAX_IMAGE_BYTES, ImageRefused, PromptImage, read_prompt_image

_MIB = 1024 * 1024


def read_image_file(path: str | os.PathLike[str]) -> PromptImage:
    """The image in the file at `path` (its type judged from its bytes, not its name), or ImageRefused."""
    p = Path(path).expanduser()
    label = str(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ImageRefused(f"{label} was not attached: there is no such file") from None
    except OSError as e:
        raise ImageRefused(f"{label} was not attached: {e.strerror or e}") from None
    if p.is_dir():
        raise ImageRefused(f"{label} was not attached: it is a folder, not an image file")
    if st.st_size > MAX_IMAGE_BYTES:  # never read a large file only to refuse it
        raise ImageRefused(f"{label} was not attached: {st.st_size / _MIB:.1f} MB is over the "
                           f"{MAX_IMAGE_BYTES / _MIB:.2f} MB an image may have (5 MB once base64-encoded)")
    try:
        with p.open("rb") as f:
            data = f.read(MAX_IMAGE_BYTES + 1)
    except OSError as e:
        raise ImageRefused(f"{label} was not attached: it cannot be read ({e.strerror or e})") from None
    return replace(read_prompt_image(data, label), name=p.name)  # refused by the path given, shown by its name

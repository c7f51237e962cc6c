"""web_fetch's parts that need no sandbox: the URLs it takes, and HTML turned into Markdown or text. (Its fetch
through the proxy, from a real sandbox, is in tests/test_runtime_network.py.)"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from desktop_app.tools import builtin_tools
from desktop_app.tools._web import WebFetchInput, _convert
from tests.kit.netservers import PAGE


@pytest.mark.parametrize("url", ["ftp://example.org/x", "file:///etc/passwd", "example.org", "https://",
                                 "https://user:pw@example.org/", "http://example.org:99999/", "javascript:alert(1)"])
def test_only_plain_web_urls(url: str) -> None:
    with pytest.raises(ValidationError):
        WebFetchInput(url=url)


def test_markdown_and_text() -> None:
    md = _convert(PAGE, "text/html; charset=utf-8", "markdown")
    assert md.startswith("# Release notes")
    assert "[the docs](/docs)" in md and "`pip install x`" in md and "- one" in md and "- two" in md
    assert "secret" not in md and "<" not in md  # scripts and the head are left out
    text = _convert(PAGE, "text/html", "text")
    assert text.startswith("Release notes") and "the docs" in text and "](" not in text
    assert _convert(PAGE, "text/html", "raw") == PAGE.decode()
    assert _convert(b"plain body", "text/plain", "markdown") == "plain body"


def test_it_is_in_the_web_group_and_read_only() -> None:
    [tool] = [t for t in builtin_tools() if t.name == "web_fetch"]
    assert tool.group == "group:web" and tool.read_only

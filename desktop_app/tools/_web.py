"""web_fetch: a URL in, its text or Markdown out, fetched inside the sandbox (through the allowlist mode's proxy,
so the list, the asking and the evidence are the same as for any command), size-capped; the result is redacted
like every tool's."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from ..core import CallField, Risk, ToolContext, ToolInput, ToolResult, value_text
from ._common import BuiltinTool, Refusal, need_sandbox

MAX_BYTES = 2_000_000
DEFAULT_BYTES = 300_000
MAX_TEXT = 100_000
_FETCH_TIMEOUT_S = 45.0

# Runs in the container (python3 with socket, ssl, zlib, base64 and urllib.parse: what the minimal image has).
FETCH = r"""
import base64, os, socket, ssl, sys, zlib
from urllib.parse import urljoin, urlsplit
url, cap = sys.argv[1], int(sys.argv[2])
def die(m):
    print("ERR " + m)
    sys.exit(2)
def head_of(s):
    data = b""
    while b"\r\n\r\n" not in data:
        c = s.recv(1)
        if not c:
            break
        data += c
    return data
def proxy():
    p = os.environ.get("HTTPS_PROXY") or os.environ.get("HTTP_PROXY")
    return (urlsplit(p).hostname, urlsplit(p).port or 80) if p else None
def get(url):
    u = urlsplit(url)
    port = u.port or (443 if u.scheme == "https" else 80)
    path = (u.path or "/") + ("?" + u.query if u.query else "")
    px = proxy()
    s = socket.create_connection(px or (u.hostname, port), timeout=30)
    if px and u.scheme == "https":
        s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (u.hostname, port, u.hostname, port)).encode())
        h = head_of(s)
        if not h.startswith(b"HTTP/1.1 200"):
            die((h + s.recv(4096)).decode("utf-8", "replace").split("\r\n\r\n", 1)[-1].strip())
    if u.scheme == "https":
        s = ssl.create_default_context().wrap_socket(s, server_hostname=u.hostname)
    target = url.split("#")[0] if px and u.scheme == "http" else path
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: agent-desk-web-fetch\r\nAccept-Encoding: gzip, deflate"
               "\r\nConnection: close\r\n\r\n" % (target, u.netloc.rsplit("@", 1)[-1])).encode())
    h = head_of(s)
    body, cut = b"", False
    while True:
        c = s.recv(65536)
        if not c:
            break
        body += c
        if len(body) > cap + 65536:
            cut = True
            break
    lines = h.decode("latin-1").split("\r\n")
    hd = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if ":" in x)}
    if hd.get("x-agent-desk-proxy") == "refused":
        die(body.decode("utf-8", "replace").strip())
    if hd.get("transfer-encoding", "").lower() == "chunked" and not cut:
        out, rest = b"", body
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size.split(b";")[0] or b"0", 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    enc = hd.get("content-encoding", "").lower()
    if enc in ("gzip", "deflate") and not cut:
        body = zlib.decompressobj(47).decompress(body, cap + 1)
    return int(lines[0].split(" ", 2)[1]), hd, body[:cap], cut or len(body) > cap
for hop in range(6):
    status, hd, body, cut = get(url)
    if status in (301, 302, 303, 307, 308) and hd.get("location") and hop < 5:
        url = urljoin(url, hd["location"])
        continue
    break
print("OK", status, url)
print(hd.get("content-type", ""))
print(int(cut))
print(base64.b64encode(body).decode())
"""


class WebFetchInput(ToolInput):
    url: str = Field(min_length=1, description="The http:// or https:// URL to fetch.")
    format: Literal["markdown", "text", "raw"] = Field(
        default="markdown", description="markdown (default) or text: an HTML page converted; raw: the body as is.")
    max_bytes: int = Field(default=DEFAULT_BYTES, ge=1_000, le=MAX_BYTES,
                           description=f"Read at most this many bytes of the body (default {DEFAULT_BYTES}).")

    @field_validator("url")
    @classmethod
    def _web_url(cls, v: str) -> str:
        u = urlsplit(v.strip())
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("the URL must be http:// or https:// with a host")
        if u.username or u.password:
            raise ValueError("the URL must not carry a user name or password")
        u.port  # noqa: B018  a bad port is a ValueError here
        return v.strip()


class WebFetch(BuiltinTool, name="web_fetch", group="group:web", input_model=WebFetchInput, read_only=True,
               timeout_s=_FETCH_TIMEOUT_S + 15.0, risk=Risk.MEDIUM):
    label = "Fetch web page"
    description = (
        "Fetch a web page or file (http/https) from inside the project's sandbox and return it as Markdown (HTML "
        "converted), plain text or raw. It goes through the project's network allowlist: a site not listed asks "
        "the user, or is refused; with no network the call fails. Follows up to 5 redirects."
    )

    async def _run(self, args: WebFetchInput, ctx: ToolContext) -> ToolResult:
        sandbox = need_sandbox(ctx)
        res = await sandbox.exec(["python3", "-c", FETCH, args.url, str(args.max_bytes)],
                                 timeout=ctx.remaining(_FETCH_TIMEOUT_S), output_limit=args.max_bytes * 2 + 4096)
        out = res.stdout.strip()
        if not out.startswith("OK "):
            why = out.removeprefix("ERR ").strip() or (res.stderr.strip().splitlines() or ["no answer"])[-1]
            raise Refusal(f"could not fetch {args.url}: {why[:500]}",
                          ["a site the project does not list needs the user's allow; without network, ask the "
                           "user to enable the allowlist mode"])
        first, ctype, cut, body64 = [*out.split("\n", 3), "", "", ""][:4]
        _, status, final = first.split(" ", 2)
        body = base64.b64decode(body64.strip() or b"")
        text = _convert(body, ctype, args.format)
        capped = len(text) > MAX_TEXT
        head = f"{final} ({status}, {ctype or 'no content type'}, {len(body):,} bytes" + (
            ", cut at max_bytes" if cut.strip() == "1" else "") + ")"
        return ToolResult.text(f"{head}\n\n{text[:MAX_TEXT]}" + ("\n… [cut]" if capped else ""),
                               status=int(status), url=final, bytes=len(body))

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        url = str(raw.get("url", "?"))
        try:
            domain = urlsplit(url).hostname or "?"
        except ValueError:
            domain = "?"
        fields = [CallField("URL", value_text(url), "url"), CallField("Domain", domain)]
        if raw.get("format"):
            fields.append(CallField("As", value_text(raw["format"])))
        return tuple(fields)

    def outcome_fields(self, raw: dict[str, Any], result: dict[str, Any]) -> tuple[CallField, ...]:
        d = result.get("details") or {}
        if result.get("is_error") or "status" not in d:
            return super().outcome_fields(raw, result)
        return (CallField("Status", str(d["status"])), CallField("Final URL", value_text(d.get("url", "")), "url"),
                CallField("Size", f"{d.get('bytes', 0):,} bytes"))

    def summarize(self, raw: dict[str, Any]) -> str:
        return f"web_fetch: {str(raw.get('url', '?'))[:200]}"


def _convert(body: bytes, ctype: str, fmt: str) -> str:
    charset = re.search(r"charset=([\w-]+)", ctype or "")
    try:
        text = body.decode(charset.group(1) if charset else "utf-8", "replace")
    except LookupError:
        text = body.decode("utf-8", "replace")
    if fmt == "raw" or "html" not in (ctype or "").lower():
        return text
    page = _Page(markdown=fmt == "markdown")
    page.feed(text)
    page.close()
    return re.sub(r"\n{3,}", "\n\n", "".join(page.out)).strip()


class _Page(HTMLParser):
    """HTML to Markdown (or text): headings, paragraphs, links, lists, code; scripts, styles and heads left out."""

    SKIP = frozenset({"script", "style", "noscript", "head", "template", "svg", "iframe"})
    BLOCK = frozenset({"p", "div", "section", "article", "main", "header", "footer", "table", "tr", "br", "hr",
                       "blockquote", "ul", "ol", "dl", "nav", "form"})

    def __init__(self, *, markdown: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.md, self.out, self.skip, self.pre, self.href = markdown, [], 0, 0, ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIP:
            self.skip += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self.out.append("\n\n" + ("#" * int(tag[1]) + " " if self.md else ""))
        elif tag == "li":
            self.out.append("\n- ")
        elif tag == "pre":
            self.pre += 1
            self.out.append("\n\n```\n" if self.md else "\n\n")
        elif tag == "code" and self.md and not self.pre:
            self.out.append("`")
        elif tag == "a" and self.md:
            self.href = dict(attrs).get("href") or ""
            self.out.append("[" if self.href else "")
        elif tag in self.BLOCK:
            self.out.append("\n\n" if tag != "br" else "\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP:
            self.skip = max(0, self.skip - 1)
        elif tag == "pre":
            self.pre = max(0, self.pre - 1)
            self.out.append("\n```\n\n" if self.md else "\n\n")
        elif tag == "code" and self.md and not self.pre:
            self.out.append("`")
        elif tag == "a" and self.md and self.href:
            self.out.append(f"]({self.href})")
            self.href = ""
        elif re.fullmatch(r"h[1-6]", tag) or tag in self.BLOCK:
            self.out.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.out.append(data if self.pre else re.sub(r"\s+", " ", data))

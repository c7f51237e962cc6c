"""The SDK's read and write streams over a `ProcessChannel`: newline-delimited JSON-RPC, parsed and
serialised by the SDK's own message types, as `mcp.client.stdio` does over a host subprocess."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio
import mcp_types
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

from ..core import ProcessChannel

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # one JSON-RPC line; a server past it is cut off, not buffered forever


class MessageTooLarge(Exception):
    """A server sent a line longer than MAX_MESSAGE_BYTES: the channel is closed."""


def parse_line(line: bytes) -> SessionMessage | Exception:
    """One line of the server's stdout; what does not parse is handed on as a value (the session logs it
    and goes on, as the SDK's stdio transport does)."""
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


@asynccontextmanager
async def channel_streams(channel: ProcessChannel, *, limit: int = MAX_MESSAGE_BYTES,
                          ended: anyio.Event | None = None) -> AsyncIterator[TransportStreams]:
    """(read, write) streams for a ClientSession over `channel`; `ended` is set when its output ends. The
    channel is the caller's to close."""
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        try:
            await read_lines()
        finally:
            if ended is not None:
                ended.set()

    async def read_lines() -> None:
        async with read_writer:
            buffer = b""
            while chunk := await channel.read():
                lines = (buffer + chunk).split(b"\n")
                buffer = lines.pop()
                if len(buffer) > limit:
                    await read_writer.send(MessageTooLarge(f"the server sent a message over {limit} bytes"))
                    await channel.close()
                    return
                for line in lines:
                    if line.strip():
                        await read_writer.send(parse_line(line))

    async def writer() -> None:
        async with write_reader:
            async for message in write_reader:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await channel.write(data.encode() + b"\n")

    async def guarded(part) -> None:  # a closed stream or a dead process ends the part, not the session
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError, Exception):
            await part()
        await read_writer.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(guarded, reader)
        tg.start_soon(guarded, writer)
        try:
            yield read_stream, write_stream
        finally:
            tg.cancel_scope.cancel()
            for s in (read_stream, write_stream, read_writer, write_reader):
                s.close()

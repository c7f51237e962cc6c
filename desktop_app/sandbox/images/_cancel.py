"""Stopping an image build for real: the engine ends a build (and kills the step it runs) when its client hangs
up, so a cancel shuts the socket the build's stream comes on, from any thread, mid-step included."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ...core import SandboxError

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)


class BuildCancelled(SandboxError):
    """The person stopped the build: nothing was tagged."""


class BuildCancel:
    """A build's Cancel: `cancel()` from any thread ends the stream the build is read from (the engine then
    stops the build); the build's thread sees `cancelled` and raises BuildCancelled."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._hang_ups: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self) -> None:
        with self._lock:
            self._event.set()
            hang_ups, self._hang_ups = self._hang_ups, []
        for hang_up in hang_ups:
            with contextlib.suppress(Exception):
                hang_up()

    def on_cancel(self, hang_up: Callable[[], None]) -> None:
        """Call `hang_up` at the cancel (now, when it came already)."""
        with self._lock:
            if not self._event.is_set():
                self._hang_ups.append(hang_up)
                return
        hang_up()

    def check(self, what: str = "the build") -> None:
        if self._event.is_set():
            raise BuildCancelled(f"{what} was cancelled", hint="nothing was tagged: click Build to start again")


def _socket_of(response: Any) -> Any:
    """The socket (or SSH channel) a streamed engine response is read from."""
    raw = response.raw._fp.fp.raw
    return getattr(raw, "_sock", None) or getattr(raw, "sock", None) or getattr(raw, "channel", None) or raw


def _hang_up(response: Any) -> None:
    try:
        _socket_of(response).shutdown(socket.SHUT_RDWR)  # wakes the reading thread; the engine sees the hang-up
    except Exception as exc:  # already closed, or a transport without shutdown: close what can be closed
        log.debug("build stream hang-up: %s", exc)
    response.close()


@contextlib.contextmanager
def cancellable(client: docker.DockerClient, cancel: BuildCancel | None) -> Iterator[None]:
    """Within it, every stream `client.api` opens (a build's, a pull's) is hung up at `cancel`. The client is
    the build's own (connect() makes one per build): the hook lives on that instance only."""
    if cancel is None:
        yield
        return
    api = client.api
    own = api.__dict__.get("_stream_helper")
    stream = api._stream_helper

    def watched(response: Any, *args: Any, **kwargs: Any) -> Any:
        cancel.on_cancel(lambda: _hang_up(response))
        return stream(response, *args, **kwargs)

    api._stream_helper = watched
    try:
        cancel.check()
        yield
    except Exception:
        cancel.check()  # the stream broke because of the cancel: say so, not "connection reset"
        raise
    finally:
        if own is None:
            del api._stream_helper
        else:
            api._stream_helper = own
    cancel.check()

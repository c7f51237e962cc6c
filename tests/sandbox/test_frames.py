"""Docker's multiplexed stream cut into frames, however recv happens to split it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from desktop_app.sandbox._frames import FrameDecoder, read_frames

frames_st = st.lists(st.tuples(st.sampled_from([1, 2]), st.binary(max_size=300)), max_size=8)


def encode(frames: list[tuple[int, bytes]]) -> bytes:
    return b"".join(bytes([s, 0, 0, 0]) + len(p).to_bytes(4, "big") + p for s, p in frames)


@given(frames_st, st.lists(st.integers(min_value=1, max_value=64), max_size=20))
def test_any_split_gives_the_same_frames(frames: list[tuple[int, bytes]], cuts: list[int]) -> None:
    data, got, decoder, pos = encode(frames), [], FrameDecoder(), 0
    for cut in cuts:
        got += decoder.feed(data[pos : pos + cut])
        pos += cut
    got += decoder.feed(data[pos:])
    assert got == frames


def test_read_frames_until_eof() -> None:
    class Sock:
        def __init__(self, chunks: list[bytes]) -> None:
            self.chunks = chunks

        def recv(self, n: int) -> bytes:
            return self.chunks.pop(0) if self.chunks else b""

    data = encode([(1, b"out"), (2, b"err")])
    assert list(read_frames(Sock([data[:5], data[5:]]))) == [(1, b"out"), (2, b"err")]

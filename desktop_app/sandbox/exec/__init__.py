"""The exec transport, for images without python3: the helper's operations as one `docker exec` of a POSIX
shell script per call, with Rust-syntax search patterns translated to the container's grep -E."""

from ._transport import ExecTransport

__all__ = ["ExecTransport"]

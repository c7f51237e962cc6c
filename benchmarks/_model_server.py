"""The fake Anthropic server of tests/fakes in a process of its own, for benchmarks that measure the event
loop: in the benchmark's process its threads would take the GIL from the loop being measured, where a real
model API costs the desk nothing but sockets. `python -m benchmarks._model_server CALLS TURNS` serves a
one-call warm-up turn, then TURNS turns of CALLS `bash_run` steps; prints `url KEY` and serves until its
stdin closes."""

from __future__ import annotations

import sys


def turn(calls: int) -> list:
    from tests.fakes.anthropic_server import reply, text, tool_use

    return [*(reply(text(f"step {i}"), tool_use("bash_run", {"command": f"echo step {i}"})) for i in range(calls)),
            reply(text("all done"))]


def main(argv: list[str]) -> int:
    from tests.fakes.anthropic_server import AnthropicServer

    calls, turns = int(argv[0]), int(argv[1])
    with AnthropicServer([*turn(1), *turn(calls) * turns]) as server:
        print(server.url, server.api_key, flush=True)
        sys.stdin.read()  # until the benchmark closes it
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Child process for test_crash's burst: one agent session on a signed SQLite store runs the loopback model's
burst of tool calls, and waits, until it is killed. Each call's tool appends its number to the `ran` file as it runs.

It imports the desk and the model SDK once (seconds on a loaded machine), then forks one process per round
(a line on stdin: its arguments), says `pid N`, and once that process is gone, `exit CODE`."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from desktop_app.core import (
    AgentSession,
    AnthropicModelClient,
    EventBus,
    Executor,
    PermissionPolicy,
    ProjectInfo,
    ToolRegistry,
    tool,
)
from desktop_app.store import HeadSigner, SqlStore


async def main(db: str, url: str, api_key: str, seed_hex: str, ran: str) -> None:
    fd = os.open(ran, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    @tool(read_only=True, group="group:fs")
    async def mark(n: int) -> str:
        """Note that call `n` ran."""
        os.write(fd, f"{n}\n".encode())  # one write: in the page cache, which a SIGKILL does not lose
        return f"ran {n}"

    signer = HeadSigner(bytes.fromhex(seed_hex), witness_dir=Path(db).parent / "witness")
    store = await SqlStore.open(db, signer=signer)
    bus = await EventBus.open(store)
    executor = Executor(ToolRegistry([mark]), PermissionPolicy("auto"), bus=bus, store=store)
    client = AnthropicModelClient(api_key=api_key, base_url=url, model="claude-sonnet-4-6")
    project = ProjectInfo(id="prj_burst", name="burst", path=str(Path(db).parent))
    session = await AgentSession.open(store=store, bus=bus, executor=executor, tools=[mark], model_client=client,
                                      project=project, sandbox=None)
    await session.send("run the burst")
    # The test kills this process at a random call: one near the end may come after the burst has ended (the
    # test polls the `ran` file). The process waits for its kill then, as the desk's would sit idle.
    await asyncio.Event().wait()


def serve() -> None:
    import anthropic  # noqa: F401  (the SDK's import, once for every round: the client imports it lazily)

    print("ready", flush=True)
    for line in sys.stdin:
        pid = os.fork()  # no thread runs yet in this process: the fork is clean
        if pid == 0:
            try:
                asyncio.run(main(*line.split()))
            finally:
                os._exit(0)
        print(f"pid {pid}", flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"exit {os.waitstatus_to_exitcode(status)}", flush=True)


if __name__ == "__main__":
    serve()

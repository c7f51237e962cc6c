"""`agent-desk images`: the catalog's images and a project's own image, built on request."""

from __future__ import annotations

import argparse
import asyncio
import sys

from ..core import (
    AgentDeskError,
    ConfigError,
)
from ._common import EXIT_OK
from ._db import open_or_create_store


# images -----------------------------------------------------------------------------------------------
async def images_command(args: argparse.Namespace) -> int:
    from ..runtime import build_image, list_images, load_catalog

    if args.action == "list":
        try:
            statuses = await asyncio.to_thread(list_images)
        except AgentDeskError as e:
            print(f"(engine not reachable: {e})", file=sys.stderr)
            for spec in load_catalog().values():
                print(f"{spec.name:10} {spec.tag:32} ?      {spec.description}")
            return EXIT_OK
        for st in statuses:
            mark = "built" if st.present else "-"
            size = f"{st.size / 1e6:.0f} MB" if st.present else ""
            print(f"{st.spec.name:10} {st.spec.tag:32} {mark:6} {size:>7}  {st.spec.description}")
        return EXIT_OK
    if args.project is not None:
        return await _build_project_image(args)
    if not args.name:
        raise ConfigError("name a catalog image to build, or a project folder with --project",
                          hint="agent-desk images build minimal, or agent-desk images build --project .")
    status = await asyncio.to_thread(
        build_image, args.name, lambda line: print(f"  {line}", file=sys.stderr, flush=True),
        nocache=args.no_cache,
    )
    print(f"built {status.spec.tag} ({status.image_id[:19]})")
    return EXIT_OK


async def _build_project_image(args: argparse.Namespace) -> int:
    """The project's own image, built only on this explicit command, then stored as the project's image
    with the digest it was built from (a later change of the file is shown, never built by `run`)."""
    from ..runtime import build_project_image, project_dir, project_for_dir

    folder = project_dir(args.project)
    store = await open_or_create_store(args)
    try:
        project = await project_for_dir(store, folder)
        built = await asyncio.to_thread(
            build_project_image, folder, project_id=project.id, name=project.name, nocache=args.no_cache,
            on_progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True))
        project.image = built.tag
        project.settings["project_image"] = {"source": built.source.path, "digest": built.digest}
        await store.save_project(project)
    finally:
        await store.close()
    print(f"built {built.tag} ({built.image_id[:19]}) from {built.source.path}: the sandbox image of {folder}")
    return EXIT_OK

"""Ships the repository's sandbox_images/ (the image catalog, its Dockerfiles, the base-image script) inside
the package as desktop_app/sandbox_images, so an installed wheel finds it; the metadata is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CATALOG = "sandbox_images"


def _catalog_files(root: Path) -> list[Path]:
    # Only what is tracked as the catalog: no caches, no editor leftovers.
    return sorted(p for p in (root / CATALOG).rglob("*") if p.is_file() and "__pycache__" not in p.parts)


class BuildWithCatalog(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install finds sandbox_images/ next to the package
            return
        root = Path(__file__).resolve().parent
        dest = Path(self.build_lib) / "desktop_app" / CATALOG
        shutil.rmtree(dest, ignore_errors=True)
        for src in _catalog_files(root):
            out = dest / src.relative_to(root / CATALOG)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, out)  # keeps the scripts' executable bit


setup(cmdclass={"build_py": BuildWithCatalog})  # the sdist carries sandbox_images/ through MANIFEST.in

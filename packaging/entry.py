"""The frozen bundle's entry script: PyInstaller runs this file as __main__, so it must not be a module
of the package (desktop_app/cli/ uses relative imports and fails as a top-level script)."""

import sys

from desktop_app.cli import main

if __name__ == "__main__":
    sys.exit(main())

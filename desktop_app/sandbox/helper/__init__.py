"""The sandbox helper: file operations and process control, run inside the container as one zipapp
(see `docker/_helper_archive`) and imported in-process by LocalSandbox.

Stdlib only, and only what Debian's python3-minimal ships (no json, queue, shutil); its modules import
each other relatively, so they run the same as `desktop_app.sandbox.helper` and as the archive's `helper`.
"""

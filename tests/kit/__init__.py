"""The test kit: fixtures every test file may ask for (loaded as a plugin by tests/conftest.py) and the helpers
test files share, so that no test file imports another. tests/README.md says which double to use when."""

from tests.kit.agent_rig import FakeSandbox, Rig, assert_history_valid
from tests.kit.audit_file import fill_audit_file, raw_sql
from tests.kit.daemons import VARIANTS, WRITER, stops_changing
from tests.kit.desk import Desk, system_of
from tests.kit.env import isolate, isolated_environ
from tests.kit.images import BASE_IMAGE, no_python_image, require_image
from tests.kit.sandboxes import SpyChannel, SpySandbox, argument_too_long, write_many
from tests.kit.waiting import wait_until, wait_until_async

__all__ = [
    "BASE_IMAGE",
    "VARIANTS",
    "WRITER",
    "Desk",
    "FakeSandbox",
    "Rig",
    "SpyChannel",
    "SpySandbox",
    "argument_too_long",
    "assert_history_valid",
    "fill_audit_file",
    "isolate",
    "isolated_environ",
    "no_python_image",
    "raw_sql",
    "require_image",
    "stops_changing",
    "system_of",
    "wait_until",
    "wait_until_async",
    "write_many",
]

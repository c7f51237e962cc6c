"""The security tests use the sandbox tests' Docker fixtures (a real engine; they fail when CI=true
without one)."""

from tests.sandbox.conftest import (  # noqa: F401
    make_docker_sandbox,
    make_remote_sandbox,
    project_id,
    test_network,
    workspace,
)

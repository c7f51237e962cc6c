"""The security tests use the sandbox tests' Docker fixtures (a real engine; they fail when CI=true
without one)."""

from tests.sandbox.conftest import make_docker_sandbox, project_id, test_network, workspace  # noqa: F401

"""The helper's errors; each `kind` crosses the wire and the host reads it as an `ErrorCode`."""


class HelperError(Exception):
    kind = "SandboxError"


class OutsideWorkspace(HelperError):
    kind = "PathOutsideWorkspace"

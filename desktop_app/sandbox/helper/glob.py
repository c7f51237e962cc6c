"""Glob patterns as regexes: core's own, so permission rules and fs_glob agree. The archive puts core's
module text here instead of this re-export (the container has no desktop_app)."""

from ...core import glob_regex

__all__ = ["glob_regex"]

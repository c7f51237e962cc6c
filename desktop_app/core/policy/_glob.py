"""Glob patterns as regexes over '/'-separated paths: one dialect for permission rules and fs_glob.

Stdlib only: the in-container helper bundles this module as it is, so rules and the file tools agree.
"""

import re


def glob_regex(pattern):
    """Translate a glob (`*`, `?`, `[...]`, `**`, `{a,b}`) into a regex over '/'-separated paths."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "]") else i + 1)
            if j < 0:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1 : j].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body + "]")
                i = j + 1
        elif c == "{":
            j = pattern.find("}", i)
            if j < 0:
                out.append(re.escape(c))
                i += 1
            else:
                alts = [glob_regex(a).pattern[4:-3] for a in pattern[i + 1 : j].split(",")]
                out.append("(?:" + "|".join(alts) + ")")
                i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("(?s:" + "".join(out) + r")\Z")

"""Names a repository gives what it ships (project templates, skills, MCP servers): a closed rule, so that no
name can look like another. A shipped name is ASCII letters, digits, '.', '_' and '-' (starting with a letter
or digit, at most 64 characters); anything else (an invisible character, a letter of another script, a
fullwidth form, a combining mark, a space) is refused with what it is. A name whose skeleton (case folded, the
separators alike, the ASCII look-alikes 0/o, 1/l/i, rn/m, vv/w merged) equals that of a built-in or the
person's own name, without being that name, is refused too: `Explore`, `exp1ore` and `explore_` beside
`explore`."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

SHIPPED_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
NAME_RULE = "ASCII letters, digits, '.', '_' or '-' (starting with a letter or digit, at most 64)"
_LOOKALIKES = (("rn", "m"), ("vv", "w"), ("0", "o"), ("1", "l"), ("i", "l"), ("_", "-"), (".", "-"), (" ", "-"))


def name_skeleton(name: str) -> str:
    """What a name looks like: NFKC (fullwidth and compatibility forms folded), case folded, invisible and
    combining characters dropped, separators and ASCII look-alikes merged."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    kept = "".join(c for c in unicodedata.normalize("NFD", folded)
                   if (unicodedata.category(c) not in ("Mn", "Me", "Cf", "Cc") and not c.isspace()) or c == " ")
    out = kept.strip()
    for seen, same in _LOOKALIKES:
        out = out.replace(seen, same)
    return out


def _character(c: str) -> str:
    """One refused character, said plainly: its code point, its Unicode name, and why it is refused."""
    name = unicodedata.name(c, "unnamed")
    category = unicodedata.category(c)
    if category in ("Cf", "Cc", "Zl", "Zp") or (category == "Zs" and c != " "):
        why = "invisible"
    elif c == " ":
        why = "a space"
    elif category in ("Mn", "Me"):
        why = "a combining mark"
    elif unicodedata.normalize("NFKC", c) != c and unicodedata.normalize("NFKC", c).isascii():
        why = f"looks like {unicodedata.normalize('NFKC', c)!r}"
    elif c.isalpha():
        why = f"a letter of the {name.split()[0].title()} script"
    else:
        why = "not in the rule"
    return f"U+{ord(c):04X} {name} ({why})"


def name_refusal(name: str, others: Iterable[str] = (), *, what: str = "name") -> str | None:
    """Why a shipped `name` is refused, or None: outside the closed rule, or looking like one of `others`
    (the built-in and the person's own names) without being it."""
    if not SHIPPED_NAME.fullmatch(name):
        bad = list(dict.fromkeys(c for c in name if not re.fullmatch(r"[A-Za-z0-9._-]", c)))
        said = "; ".join(_character(c) for c in bad[:4]) if bad else (
            "too long" if len(name) > 64 else "it must start with a letter or digit")
        return f"the {what} {name!r} is refused: {said}. A shipped {what} is {NAME_RULE}"
    skeleton = name_skeleton(name)
    for other in others:
        if other != name and name_skeleton(other) == skeleton:
            return (f"the {what} {name!r} is refused: it looks like {other!r} (they differ only by case, "
                    f"separators or look-alike characters); give it a name of its own")
    return None

"""Effects the risk of a command is judged by beyond writes and deletes: sending a local file or a secret
to the network, discarding uncommitted work, deleting files by pattern, reading a secret file."""

from __future__ import annotations

import posixpath

from ._shell_model import ShellAnalysis, SimpleCommand

NETWORK = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh", "lwp-request", "GET", "POST", "nc",
                     "ncat", "netcat", "socat", "telnet", "ftp", "tftp", "scp", "sftp", "rsync", "ssh", "rclone",
                     "s3cmd", "aws", "gsutil", "openssl", "sendmail", "mail", "mutt", "httpie"})
_SECRET_NAMES = frozenset({".env", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", ".netrc", "_netrc", ".pgpass",
                           "credentials", ".git-credentials", ".npmrc", ".pypirc", ".htpasswd", "shadow", "gshadow",
                           "master.key", "secrets.yml", "secrets.yaml", "secrets.json", ".vault-token",
                           "kubeconfig", "known_hosts", "authorized_keys"})
_SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".gpg", ".asc", ".kdbx", ".ovpn")
_NOT_SECRET = (".env.example", ".env.sample", ".env.template", ".env.dist")
_SECRET_FOLDERS = ("/.ssh/", "/.gnupg/", "/.aws/", "/.kube/", "/.docker/", "/.config/gh/", "/.password-store/")
_UPLOAD_OPTIONS = ("-d@", "--data@", "--data-binary@", "--data-urlencode@", "-T", "--upload-file", "-F", "--form",
                   "--post-file", "--body-file", "--data-ascii@")


def secret_path(word: str) -> bool:
    """A path that names a secret: .env files, SSH and GPG keys, .netrc, cloud credentials, key files. The
    word may carry it after `=` or `@` (`--data=@.env`, `key=@id_rsa`)."""
    w = word.rsplit("@", 1)[-1].rsplit("=", 1)[-1].lstrip("<")
    base = posixpath.basename(w.rstrip("/"))
    if base.startswith(_NOT_SECRET) or base.endswith(".pub"):
        return False
    if base in _SECRET_NAMES or base.startswith(".env.") or base.endswith(_SECRET_SUFFIXES):
        return True
    return any(f in "/" + w + "/" for f in _SECRET_FOLDERS)


def reads_secret(c: SimpleCommand) -> str | None:
    """The secret file a command names as an operand or an input redirection, or None."""
    for word in c.argv[1:]:
        if secret_path(word):
            return word
    return next((r.target for r in c.redirects if r.op in ("<", "<>") and secret_path(r.target)), None)


def uploads(c: SimpleCommand) -> str | None:
    """How a network program sends a local file: `curl -d @f`, `-T f`, `-F x=@f`, `wget --post-file`,
    `scp`/`rsync` with a local source, `nc host < f`."""
    if c.program not in NETWORK:
        return None
    args = c.argv[1:]
    for i, x in enumerate(args):
        glued = x.replace("=", "").replace(" ", "")
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if x in ("-d", "--data", "--data-binary", "--data-urlencode", "--data-ascii") and nxt.startswith("@"):
            return f"{c.program} {x} {nxt}"
        if glued.startswith(_UPLOAD_OPTIONS) and ("@" in x or x.startswith(("-T", "--upload-file", "--post-file",
                                                                           "--body-file"))):
            return f"{c.program} {x}"
        if (x in ("-F", "--form") and "@" in nxt) or x in ("-T", "--upload-file", "--post-file", "--body-file"):
            return f"{c.program} {x} {nxt}"
    if c.program in ("scp", "rsync", "sftp", "rclone") and any(":" in x for x in args) and len(
            [x for x in args if not x.startswith("-")]) >= 2:
        return f"{c.program} copies files to another machine"
    if any(r.op in ("<", "<>") and r.target for r in c.redirects):
        return f"{c.program} reads a file into the network"
    return None


def piped_into_network(a: ShellAnalysis) -> tuple[SimpleCommand, SimpleCommand] | None:
    """A command that reads files piped into a network program (`cat f | curl -d @- …`)."""
    for net in a.commands:
        if net.program not in NETWORK:
            continue
        for src in a.commands:
            if src is net or not src.argv:
                continue
            if any(p1 == p2 and s1 < s2 for p1, s1 in src.pipe for p2, s2 in net.pipe):
                return src, net
    return None


def exfiltration(a: ShellAnalysis) -> tuple[bool, str] | None:
    """(secret?, why) when the command sends local data to the network; a secret makes it high."""
    secret = next((s for c in a.commands if (s := reads_secret(c)) is not None), None)
    net = next((c for c in a.commands if c.program in NETWORK), None)
    if net is None:
        return None
    if secret is not None:
        return True, f"sends a secret ({secret}) to the network ({net.program})"
    piped = piped_into_network(a)
    if piped is not None:
        return False, f"sends local data ({piped[0].program}) to the network ({piped[1].program})"
    up = next((u for c in a.commands if (u := uploads(c)) is not None), None)
    return (False, f"sends a local file to the network ({up})") if up is not None else None


def discards_work(sub: str, rest: tuple[str, ...]) -> str | None:
    """git subcommands that throw away uncommitted changes or stashed work."""
    if sub == "checkout" and ("--" in rest or "." in rest or any(x in ("-f", "--force", "-p", "--patch")
                                                                 for x in rest)):
        return "discards uncommitted changes (git checkout -- paths)"
    if sub == "restore" and not (set(rest) & {"--staged", "-S"} and not set(rest) & {"--worktree", "-W"}):
        return "discards uncommitted changes (git restore)"
    if sub == "stash" and rest[:1] in (("drop",), ("clear",)):
        return f"throws away stashed work (git stash {rest[0]})"
    if sub == "switch" and any(x in ("-f", "--force", "--discard-changes") for x in rest):
        return "discards uncommitted changes (git switch --discard-changes)"
    if sub == "reset" and any(x in ("--hard", "--merge", "--keep") for x in rest):
        return "discards uncommitted changes (git reset --hard)"
    return None


def deletes_by_pattern(c: SimpleCommand) -> str | None:
    """rm with a pattern or with arguments only known when it runs (find -exec, xargs); find -delete with
    a name pattern."""
    if not c.deletes:
        return None
    if c.program == "find":
        pat = next((x for i, x in enumerate(c.argv) if i > 0 and c.argv[i - 1] in ("-name", "-iname", "-path",
                                                                                   "-regex", "-iregex")), None)
        return f"deletes files by pattern (find -delete{f' {pat}' if pat else ''})"
    if c.open_args:
        return f"deletes files found when it runs ({c.program} with arguments from find or xargs)"
    glob = next((x for x, k in zip(c.argv[1:], c.kinds[1:], strict=True) if k == "glob"), None)
    if glob is not None:
        return f"deletes files by pattern ({c.program} {glob})"
    return None

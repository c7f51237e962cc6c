"""The POSIX shell scripts of the exec transport (images without python3): one per operation, run by
`docker exec` with only sh, coreutils, grep, awk and /proc. Each is the prelude below plus its body."""

from __future__ import annotations

import shlex

from ...core import WORKSPACE
from ..helper.proctree import RUN_ENV
from ..helper.search import RG_COMMON, WALK_MAX_ENTRIES

OUTSIDE = "__AGENT_DESK_OUTSIDE__"
ERROR = "__AGENT_DESK_ERROR__"
STAT_FMT = "%F|%s|%.6Y|%a"
BG_DIR = "/tmp/.agent-desk-bg"
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_ENTRY = "%y\\t%s\\t%T@\\t%m\\t"  # find -printf: type, size, mtime, mode; the name follows
KILL_ROUNDS = 60  # SIGKILL rounds before giving up on a fork loop (as the helper's proctree)

# Which process belongs to which run, read from /proc (the helper's proctree, in sh and awk):
# - a process whose own initial environment carries the cookie of a live run of this transport (the prefix)
#   belongs to that run; an orphan with the cookie of a run that is over (or a forged one) is a stray; any
#   other process is judged by its parent (env -i, or a forged cookie, only hides a process once orphaned).
#   A run's processes are not orphans while it runs (its script, a `docker exec`, is their ancestor), so a
#   run started after the list of live runs was taken is never judged a stray;
# - a process whose parent is outside the container's PID namespace (ppid 0) is a `docker exec`: one of
#   this transport's scripts, or someone else's shell; it and what it starts without a cookie are left alone;
# - an orphan (reparented to the init) without such a cookie belongs to the run that leads its session or
#   group (a session id cannot be forged), else it is a stray: killed at every run's end and at the sweep;
# - the init, the container's own command (the init's earliest child) and the scanning script's own
#   ancestors are never touched.
# The cookie is exported by the script before the command starts, so each of its processes has it at birth.
_PROCS_AWK = r"""
$1 == "S" { pp[$2] = $3; pg[$2] = $4; sd[$2] = $5; st[$2] = $6; next }
$1 == "C" { if (!($2 in ck)) ck[$2] = $3; next }
function own(c) { return index(c, prefix) == 1 }
function alive_run(c) { return live == "*" || c == target || index(live, " " c " ") > 0 }
function owner(p,   q, o) {
  if (p in memo) return memo[p]
  if (p in prot || !(p in pp)) return memo[p] = "P"
  if ((p in ck) && own(ck[p])) {
    if (alive_run(ck[p])) return memo[p] = ck[p]
    if (pp[p] == 1) return memo[p] = "S"
  }
  q = pp[p]
  if (q == 0) return memo[p] = "P"
  if (q == 1) return memo[p] = orphan(p)
  return memo[p] = owner(q)
}
function orphan(p,   o) {
  if (sd[p] != p && (sd[p] in pp)) { o = owner(sd[p]); if (o != "P") return o }
  if (pg[p] != p && (pg[p] in pp)) { o = owner(pg[p]); if (o != "P") return o }
  return "S"
}
END {
  prot[1] = 1
  if (init) {
    best = ""
    for (p in pp) if (pp[p] == 1 && (best == "" || st[p] < st[best])) best = p
    if (best != "") prot[best] = 1
  }
  for (p = self; (p in pp) && p != 0; p = pp[p]) prot[p] = 1
  for (p in pp) {
    o = owner(p)
    if ((mode == "all" && o != "P") || (mode == "run" && (o == target || o == "S"))) print p, o
  }
}
"""

PRELUDE = f"""set -f
PATH={SAFE_PATH}; export PATH
unset CDPATH ENV BASH_ENV
ws={WORKSPACE}; BG_DIR={BG_DIR}
resolve() {{
  case "$1" in /*) _q="$1";; *) _q="$ws/$1";; esac
  _r=$(realpath -m -- "$_q") || exit 2
  case "$_r" in "$ws"|"$ws"/*) printf '%s' "$_r";; *) echo "{OUTSIDE} $1" >&2; exit 3;; esac
}}
"""

# Process trees: `targets MODE TARGET LIVE` prints "pid owner" of what to kill: MODE run (the run TARGET's
# processes and the strays; LIVE is " c1 c2 " or "*" for every cookie of this transport), or all (the
# session's end: everything but what is protected). `kill_tree` TERMs, waits GRACE, then KILLs in rounds until
# nothing is left (a fork loop keeps making more); `describe` names what it found.
PROCS = f"""
_awk=$(cat <<'AWK'
{_PROCS_AWK}
AWK
)
_scan() {{  # always in a pipeline's subshell: the glob is on here only
  set +f
  for _d in /proc/[0-9]*; do
    {{ read -r _s < "$_d/stat"; }} 2>/dev/null || continue
    set -- ${{_s##*) }}
    case "$1" in Z|X) continue;; esac
    echo "S ${{_d#/proc/}} $2 $3 $4 ${{20}}"
  done
  # A cookie holding a newline could forge a line: newlines become '?' before the NULs become newlines.
  grep -z -H "^{RUN_ENV}=" /proc/[0-9]*/environ 2>/dev/null | tr '\\n\\0' '?\\n' \\
    | sed -n 's|^/proc/\\([0-9]*\\)/environ:{RUN_ENV}=|C \\1 |p'
}}
_init=0; case "$(tr '\\0' ' ' < /proc/1/cmdline 2>/dev/null)" in *init*) _init=1;; esac
targets() {{
  _scan | awk -v mode="$1" -v target="$2" -v live="$3" -v prefix="$PREFIX" -v self=$$ -v init=$_init "$_awk"
}}
pids_of() {{ targets "$@" | while read -r _p _o; do printf '%s ' "$_p"; done; }}
describe() {{  # TAG LINES("pid owner"): one line each, TAG pid owner cmdline
  printf '%s\\n' "$2" | while read -r _p _o; do
    [ -n "$_p" ] || continue
    _c=$(head -c 4000 "/proc/$_p/cmdline" 2>/dev/null | tr '\\0\\n\\t' '   ')
    printf '%s\\t%s\\t%s\\t%s\\n' "$1" "$_p" "$_o" "$_c"
  done
}}
kill_tree() {{  # MODE TARGET LIVE GRACE_MS; sets _hard=1 when SIGKILL was needed
  _hard=0; _t=$(pids_of "$1" "$2" "$3")
  if [ -n "$_t" ] && [ "$4" -gt 0 ]; then
    kill -TERM $_t 2>/dev/null; _n=$(( $4 / 50 ))
    while [ -n "$_t" ] && [ $_n -gt 0 ]; do sleep 0.05; _t=$(pids_of "$1" "$2" "$3"); _n=$((_n - 1)); done
  fi
  _i=0
  while [ -n "$_t" ] && [ $_i -lt {KILL_ROUNDS} ]; do
    _hard=1; kill -KILL $_t 2>/dev/null; _t=$(pids_of "$1" "$2" "$3"); _i=$((_i + 1))
  done
}}
"""

# fs_write without following a link: resolved once (realpath, which must stay inside the workspace), then
# walked from /workspace one component at a time: a component that is a symlink is refused ([ -L ]), and
# after each `cd -P` the physical cwd must be exactly the expected folder, so a component swapped for a link
# between the test and the cd is caught too. From then on every name is relative to the cwd, which is that
# folder's inode, not its path: a parent renamed or swapped afterwards cannot redirect anything, and the
# inode cannot leave the workspace (rename(2) across a mount point fails with EXDEV; the control folders
# are read-only mounts). The temp file is made with O_EXCL (dd conv=excl: never through a link), and `mv -T`
# renames it over the name in the same folder (rename(2) replaces a link at the name, never follows it). The
# chmod of the temp is by name; a link swapped in there leads only to a file the sandbox's user owns. The
# data's size is $3 and exactly that much is read: no end of input is needed (a TLS stream cannot half-close).
WRITE = f"""p=$(resolve "$1") || {{ head -c "$3" >/dev/null; exit 3; }}
fail() {{ head -c "$3" >/dev/null; echo "{ERROR} $*" >&2; exit 4; }}
[ "$p" = "$ws" ] && fail "$ws: is a directory"
rel=${{p#"$ws"/}}; name=${{rel##*/}}; dir=${{rel%"$name"}}
cd -P "$ws" || fail "$ws: cannot enter the workspace"
here=$ws; swapped="not a folder, or it became a symlink while the path was used; nothing was done"
IFS=/
for c in $dir; do
  [ -n "$c" ] || continue
  case "$c" in .|..) fail "$here/$c: '..' in a resolved path";; esac
  if [ ! -e "./$c" ] && [ ! -L "./$c" ] && [ "$2" = 1 ]; then mkdir -- "./$c" 2>/dev/null; fi
  [ -L "./$c" ] && fail "$here/$c: a symlink in the path; nothing was done"
  cd -P "./$c" 2>/dev/null || fail "$here/$c: not a folder, or no such folder"
  here=$here/$c
  [ "$(pwd -P)" = "$here" ] || fail "$here: $swapped"
done
unset IFS
[ -d "./$name" ] && [ ! -L "./$name" ] && fail "$p: is a directory"
mode=644; if [ -f "./$name" ] && [ ! -L "./$name" ]; then mode=$(stat -c %a -- "./$name"); fi
short=$(printf '%.100s' "$name"); n=0
while :; do
  t=$(mktemp -u ".$short.agent-desk-XXXXXXXXXX.tmp") || fail "$p: mktemp failed"
  if err=$(dd of="./$t" conv=excl bs=1M iflag=fullblock,count_bytes count="$3" status=none 2>&1); then break; fi
  n=$((n + 1)); case "$err" in *exists*) [ $n -lt 5 ] && continue;; esac
  rm -f -- "./$t" 2>/dev/null; fail "$p: ${{err#dd: }}"
done
chmod "$mode" -- "./$t" 2>/dev/null
mv -T -- "./$t" "./$name" || {{ rm -f -- "./$t"; echo "{ERROR} $p: could not replace the file" >&2; exit 4; }}
stat -c '{STAT_FMT}' -- "./$name"
"""

# A foreground command: its own session (setsid), the run's cookie in its environment, killed whole at the
# end (what it left: setsid'd, double-forked, env-scrubbed daemons), then its exit code. The docker exec's
# stream ends only when the last holder of its stdout and stderr is gone, so every byte the command wrote is
# in the stream before the exit is read.
EXEC = f"""p=$(resolve "$1") || exit 3
[ -d "$p" ] || {{ echo "{ERROR} $1: not a directory" >&2; exit 3; }}
cd "$p" || exit 3
cookie=$2; t=$3; g=$4; shift 4
{RUN_ENV}=$cookie; export {RUN_ENV}
setsid timeout -s TERM -k "$g" "$t" env "$@" &
wait $!; code=$?
unset {RUN_ENV}
kill_tree run "$cookie" "*" 0 >/dev/null 2>&1
exit $code
"""

BG_START = f"""p=$(resolve "$1") || exit 3
cd "$p" || exit 3
id=$2; {RUN_ENV}=$3; export {RUN_ENV}; shift 3
mkdir -p "$BG_DIR" || exit 4
setsid sh -c 'echo $$ > "$0.pid"; "$@" > "$0.log" 2>&1; echo $? > "$0.exit"' "$BG_DIR/$id" env "$@" \\
  </dev/null >/dev/null 2>&1 &
i=0; while [ ! -s "$BG_DIR/$id.pid" ] && [ $i -lt 200 ]; do sleep 0.01; i=$((i+1)); done
cat "$BG_DIR/$id.pid"
"""

BG_LOGS = f"""f="$BG_DIR/$1"
pid=$(cat "$f.pid" 2>/dev/null) || {{ echo "{ERROR} no background process $1" >&2; exit 4; }}
if kill -0 "$pid" 2>/dev/null; then r=1; else r=0; fi
echo "$r|$(cat "$f.exit" 2>/dev/null)|$(stat -c %s "$f.log" 2>/dev/null || echo 0)" >&2
tail -c 1048576 "$f.log" 2>/dev/null
"""

BG_KILL = f"""f="$BG_DIR/$1"
[ -s "$f.pid" ] || {{ echo "{ERROR} no background process $1" >&2; exit 4; }}
kill_tree run "$2" "$3" "$4"
code=143; [ "$_hard" = 1 ] && code=137
[ -s "$f.exit" ] || echo $code > "$f.exit"
"""

CANCEL = """kill_tree run "$1" "$2" "$3"
"""

# The session's end: everything but the protected, described before and after.
SWEEP = """describe K "$(targets all "" "*")"
kill_tree all "" "*" "$1"
describe A "$(targets all "" "*")"
"""

READ = f"""p=$(resolve "$1") || exit 3
if [ ! -f "$p" ]; then
  if [ -d "$p" ]; then echo "{ERROR} $1: is a directory" >&2
  elif [ -e "$p" ]; then echo "{ERROR} $1: not a regular file" >&2
  else echo "{ERROR} $1: no such file or directory" >&2; fi
  exit 4
fi
stat -c %s -- "$p" >&2
tail -c +$(( $2 + 1 )) -- "$p" | head -c "$3"
"""

STAT = f"""p=$(resolve "$1") || exit 3
if [ -e "$p" ] || [ -L "$p" ]; then stat -c '{STAT_FMT}' -- "$p"; else echo NONE; fi
"""

LIST = f"""p=$(resolve "$1") || exit 3
[ -d "$p" ] || {{ echo "{ERROR} $1: not a directory" >&2; exit 4; }}
printf '%s\\n' "$p" >&2
find "$p" -mindepth 1 -maxdepth 1 -printf '{_ENTRY}%P\\0'
"""

# fs_glob's walk: bounded in entries and in time (a tree too big to list in time is an error, not a hang).
# With ripgrep, what the helper lists: the files `rg --files` lists (the ignore files read as the helper's rg
# reads them; $3 is rg's ignore flag) and the folders above them, each stat'd by find: no symlink, no empty
# folder. Without ripgrep, every entry but .git: .gitignore is not read (the tools say so). Full paths.
WALK = f"""p=$(resolve "$1") || exit 3
[ -d "$p" ] || {{ echo "{ERROR} $1: not a directory" >&2; exit 4; }}
printf '%s\\n' "$p" >&2
if command -v rg >/dev/null 2>&1; then
  listed=$(cat <<'SH'
rg --files --null {shlex.join(RG_COMMON)} "$2" -- "$1" \\
  | B="$1" awk -v RS='\\0' -v ORS='\\0' '{{ print; d = $0; n = length(ENVIRON["B"])
      while (sub(/\\/[^\\/]*$/, "", d) && length(d) > n && !(d in seen)) {{ seen[d] = 1; print d }} }}' \\
  | head -z -n {WALK_MAX_ENTRIES} \\
  | xargs -0 -r sh -c 'exec find "$@" -maxdepth 0 -printf "{_ENTRY}%p\\0" 2>/dev/null' find
SH
)
  {{ timeout -s KILL "$2" sh -c "$listed" rg "$p" "$3"; echo "find $?" >&2; }} | head -z -n {WALK_MAX_ENTRIES}
else
  {{ timeout -s KILL "$2" find "$p" -mindepth 1 -name .git -prune -o -printf '{_ENTRY}%p\\0'
    echo "find $?" >&2; }} | head -z -n {WALK_MAX_ENTRIES}
fi
"""

# fs_grep: ripgrep when the image has it (Rust regex, linear time), else GNU grep -E (POSIX extended, run by
# a DFA: linear, no backtracking; the pattern is translated from Rust syntax and backreferences, the one
# ERE feature that backtracks, are refused before it gets here). Either runs under `timeout`, killed at the
# deadline. The first line on stderr names the engine that ran. $6 is rg's ignore flag, as the helper's;
# grep -r reads no ignore file.
GREP = f"""p=$(resolve "$1") || exit 3
[ -e "$p" ] || {{ echo "{ERROR} $1: no such file or directory" >&2; exit 4; }}
t=$2; rx=$3; ere=$4; ic=$5; ig=$6
if command -v rg >/dev/null 2>&1; then
  echo "engine rg" >&2
  exec timeout -s KILL "$t" rg --null --line-number --with-filename --no-heading --no-config --hidden \\
    --glob '!.git' --no-messages --color never --sort path --max-filesize {{max_file}} \\
    --max-columns 4096 --max-columns-preview $ic "$ig" --regexp "$rx" -- "$p"
fi
echo "engine grep" >&2
[ -n "$ere" ] || {{ echo "{ERROR} NO_ERE" >&2; exit 4; }}
exec timeout -s KILL "$t" grep -rnIHZ -E --exclude-dir=.git $ic -e "$ere" -- "$p"
"""

# Each a template for the body with the workspace-checked helpers; the process scripts get PROCS too.
BODIES = {
    "read": READ,
    "real_path": 'resolve "$1" || exit 3\n',
    "stat": STAT,
    "list": LIST,
    "walk": WALK,
    "grep": GREP,
    "exec": EXEC,
    "write": WRITE,
    "bg_start": BG_START,
    "bg_logs": BG_LOGS,
    "bg_kill": BG_KILL,
    "cancel": CANCEL,
    "sweep": SWEEP,
}
NEEDS_PROCS = frozenset({"exec", "bg_kill", "cancel", "sweep"})


def script(op: str, prefix: str, *, max_file: int = 0) -> str:
    """The whole script of `op`: the prelude, the process helpers where it needs them, and its body."""
    body = BODIES[op].replace("{max_file}", str(max_file))
    procs = PROCS if op in NEEDS_PROCS else ""
    return f"PREFIX='{prefix}'\n{PRELUDE}{procs}\n{body}"

#!/usr/bin/env python3
"""DEV ONLY (not part of the library): run terminal task folders the way the terminal
environment will, and check that the reference solution scores 1 and an untouched workspace 0.

Needs root (mount namespaces, overlayfs). Each run happens in a fresh mount + pid + network
namespace (no network, like the sandbox) whose root is an overlay of the host's / with a tmpfs
upper layer, entered with chroot: /app, /tests, /logs and everything else the run writes live
in that tmpfs and vanish with the namespace; the host is not modified. Inside:

  1. environment/ (less Dockerfile, compose files, .practicum-setup.sh) is copied to WORKDIR;
     .practicum-setup.sh runs there once; unless the setup made a git repository, git init +
     commit of everything;
  2. reference mode only: solution/ is copied to /solution and `bash /solution/solve.sh` runs in
     WORKDIR within [agent] timeout_sec;
  3. /tests and /logs/verifier are emptied, tests/ copied to /tests, `bash /tests/test.sh` runs in
     WORKDIR within [verifier] timeout_sec; the reward is read with read_reward.

HOME is an empty folder and system git config is off, so a task that relies on the host's git
identity fails here as it would in a sandbox. ``--uid 65534`` runs setup, solution and tests as
an unprivileged user that owns the workspace (the tests' files stay root's, read-only to it).

    sudo .venv/bin/python tools/run_task_locally.py tasks/terminal            # every task, both modes
    .venv/bin/python tools/run_task_locally.py tasks/terminal/fix-paginate -v  # one task, with logs
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from practicum.domains.terminal.tasks import NOT_SEEDED, TerminalTask, check_task, load_task, load_tasks, read_reward
from practicum.errors import VerifierFailure

OUTER = r"""
set -eu
R="$1"
mount -t tmpfs -o size=2g tmpfs "$R/mnt"
mkdir "$R/mnt/up" "$R/mnt/work" "$R/mnt/root"
mount -t overlay overlay -o lowerdir=/,upperdir="$R/mnt/up",workdir="$R/mnt/work" "$R/mnt/root"
mount -t proc proc "$R/mnt/root/proc"
mount --rbind /dev "$R/mnt/root/dev"
mkdir -p "$R/mnt/root/.results"
mount --bind "$R/out" "$R/mnt/root/.results"
exec chroot "$R/mnt/root" /bin/bash -c "$INNER"
"""

INNER = r"""
set -u
export HOME=/tmp/home GIT_CONFIG_NOSYSTEM=1
rm -rf "$WORKDIR" /tests /logs /solution
mkdir -p "$WORKDIR" "$HOME"
AS=""
if [ -n "$RUN_UID" ]; then
  # the whole run as an unprivileged user, as a sandbox may do (only this overlay's /root opens)
  chmod o+rx /root
  chown "$RUN_UID:$RUN_UID" "$WORKDIR" "$HOME"
  AS="setpriv --reuid=$RUN_UID --regid=$RUN_UID --clear-groups --"
fi
$AS cp -r "$TASK/environment/." "$WORKDIR/" 2>/dev/null || true
for f in $NOT_SEEDED; do rm -f "$WORKDIR/$f"; done
cd "$WORKDIR"
if [ -f "$TASK/environment/.practicum-setup.sh" ]; then
  if ! $AS timeout 120 bash "$TASK/environment/.practicum-setup.sh" > /.results/setup.log 2>&1; then
    echo "setup failed" > /.results/status; exit 0
  fi
fi
if [ ! -d "$WORKDIR/.git" ]; then
  $AS git init -q && $AS git add -A && \
  $AS git -c user.name=practicum -c user.email=practicum@localhost commit -q --allow-empty -m "task seed"
fi
if [ "$MODE" = reference ]; then
  cp -a "$TASK/solution" /solution
  (cd "$WORKDIR" && $AS env $SOLUTION_ENV timeout "$AGENT_TIMEOUT" bash /solution/solve.sh) > /.results/solve.log 2>&1
  echo "$?" > /.results/solve.rc
  rm -rf /solution
fi
rm -rf /tests /logs/verifier
mkdir -p /tests /logs/verifier /logs/agent
cp -a "$TASK/tests/." /tests/
[ -n "$RUN_UID" ] && chown "$RUN_UID:$RUN_UID" /logs/verifier
cd "$WORKDIR"
$AS env $VERIFIER_ENV timeout "$VERIFIER_TIMEOUT" bash /tests/test.sh > /.results/test.log 2>&1
echo "$?" > /.results/test.rc
cp -a /logs/verifier /.results/verifier
echo done > /.results/status
"""


def run(task: TerminalTask, mode: str, verbose: bool, uid: int | None = None) -> tuple[str, float]:
    """One run; returns the reward (or why there is none) and the seconds it took."""
    python_bin = str(Path(os.path.realpath(shutil.which("python3") or sys.executable)).parent)
    env = {
        "PATH": f"{python_bin}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "LANG": "C.UTF-8", "INNER": INNER, "TASK": str(task.path), "WORKDIR": task.workdir, "MODE": mode,
        "NOT_SEEDED": " ".join(sorted(NOT_SEEDED)), "RUN_UID": "" if uid is None else str(uid),
        "AGENT_TIMEOUT": str(task.agent_timeout_s), "VERIFIER_TIMEOUT": str(task.verifier_timeout_s),
        "SOLUTION_ENV": " ".join(f"{k}={v}" for k, v in task.spec.solution.env.items()),
        "VERIFIER_ENV": " ".join(f"{k}={v}" for k, v in task.spec.verifier.env.items()),
    }
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="practicum-task-") as tmp:
        r = Path(tmp)
        (r / "mnt").mkdir()
        (r / "out").mkdir()
        proc = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "--pid", "--net", "--fork",
             "bash", "-c", OUTER, "outer", str(r)],
            env=env, capture_output=True, text=True, timeout=task.agent_timeout_s + task.verifier_timeout_s + 180,
        )
        out = r / "out"
        status = (out / "status").read_text().strip() if (out / "status").exists() else f"runner failed: {proc.stderr[-300:]}"
        if verbose:
            for name in ("setup.log", "solve.log", "test.log"):
                if (out / name).exists():
                    print(f"--- {task.name} [{mode}] {name}\n{(out / name).read_text()[-3000:]}")
        if status != "done":
            result = status
        else:
            try:
                result = f"{read_reward(out / 'verifier').value:g}"
            except VerifierFailure as e:
                result = f"no reward ({e})"
    return result, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", type=Path, help="task folders or folders of task folders")
    ap.add_argument("--mode", choices=["both", "reference", "untouched"], default="both")
    ap.add_argument("-v", "--verbose", action="store_true", help="print setup, solve and test logs")
    ap.add_argument("--uid", type=int, default=None, help="run setup, solution and tests as this unprivileged uid")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (mount namespaces)", file=sys.stderr)
        return 2

    tasks: list[TerminalTask] = []
    for p in args.paths:
        for d in ([p] if (p / "task.toml").exists() else sorted(x for x in p.iterdir() if (x / "task.toml").exists())):
            problems = check_task(d)
            for pr in problems:
                print(f"problem: {pr}")
        tasks += [load_task(p)] if (p / "task.toml").exists() else load_tasks(p)

    modes = ["reference", "untouched"] if args.mode == "both" else [args.mode]
    failures = 0
    print(f"{'task':32} {'category':14} " + " ".join(f"{m:>10}" for m in modes) + "   seconds")
    for task in tasks:
        cells, secs = [], 0.0
        for m in modes:
            result, s = run(task, m, args.verbose, args.uid)
            secs += s
            cells.append(result)
            want = "1" if m == "reference" else "0"
            failures += result != want
        shown = " ".join(f"{c:>10}" if len(c) <= 10 else c for c in cells)
        print(f"{task.name:32} {task.category or '-':14} {shown}   {secs:6.1f}", flush=True)
    print(f"{len(tasks)} task(s), {failures} unexpected result(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Assembles a container session's root filesystem, then execs nsjail. Runs on the host.

Started (by :mod:`practicum.sandbox.container`) as real root inside a fresh private mount
namespace (``unshare --mount --propagation private``), so every mount made here vanishes with
the session. Standard library only; it is run with ``python -I -S`` for a quick start.

    python -I -S container_stage.py CONFIG_JSON -- nsjail ARGS...

The root it builds at ``STAGE/root`` (``STAGE`` from the config: ``/run/practicum``, under the
tmpfs this script mounts over ``/run`` in its private namespace):

* ``/`` is an overlay: the session's writable layer over the image's layers over a skeleton
  (top-level folders and the machine's ``/bin -> usr/bin``-style links);
* each of the machine's system folders (``/usr``, ``/etc``, ``/var``) is an overlay of the
  session's writable layer over the image's layers over an *idmapped*, read-only view of the
  machine's folder, in which host uid/gid ``k`` appears as ``base + k``: root-owned system files
  are owned by the sandbox's root (host uid ``base``), so a program that is root in the sandbox's
  user namespace can change them, copy-on-write, without any right over the host's files;
* the writable layer is a size- and inode-capped tmpfs (a run), or a host folder (an image
  build, whose writes become the image's next layer).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

CLONE_NEWUSER = 0x10000000
OPEN_TREE_CLONE = 1
OPEN_TREE_CLOEXEC = 0o2000000
AT_RECURSIVE = 0x8000
AT_EMPTY_PATH = 0x1000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_IDMAP = 0x100000
SYS_open_tree, SYS_move_mount, SYS_mount_setattr = 428, 429, 442  # x86_64 and aarch64 share these
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC = 0x1, 0x20, 0x1000, 0x4000

libc = ctypes.CDLL(None, use_errno=True)


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def mount(src: str, target: str, fstype: str, flags: int = 0, data: str = "") -> None:
    _check(libc.mount(src.encode(), target.encode(), fstype.encode(), ctypes.c_ulong(flags),
                      data.encode() if data else None), f"mount {fstype} on {target}")


def userns_fd(base: int, count: int) -> int:
    """A descriptor of a new user namespace that maps 0..count-1 to base..base+count-1."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        if libc.unshare(CLONE_NEWUSER) != 0:
            os._exit(1)
        os.read(r, 1)  # wait until the parent has taken the namespace
        os._exit(0)
    os.close(r)
    try:
        for _ in range(2000):  # until the child is in its own user namespace
            if os.readlink(f"/proc/{pid}/ns/user") != os.readlink("/proc/self/ns/user"):
                break
            os.sched_yield()
        with open(f"/proc/{pid}/uid_map", "w") as f:
            f.write(f"0 {base} {count}\n")
        with open(f"/proc/{pid}/setgroups", "w") as f:
            f.write("deny")
        with open(f"/proc/{pid}/gid_map", "w") as f:
            f.write(f"0 {base} {count}\n")
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.write(w, b"x")
        os.close(w)
        os.waitpid(pid, 0)


def idmapped_view(source: str, target: str, ns_fd: int) -> None:
    """Mount a read-only, idmapped clone of ``source`` (and the mounts under it) at ``target``."""
    fd = _check(libc.syscall(SYS_open_tree, -100, source.encode(),
                             OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE), f"open_tree {source}")
    attr = MountAttr(MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY, 0, 0, ns_fd)
    _check(libc.syscall(SYS_mount_setattr, fd, b"", AT_EMPTY_PATH | AT_RECURSIVE, ctypes.byref(attr),
                        ctypes.c_size_t(ctypes.sizeof(attr))), f"idmap {source}")
    _check(libc.syscall(SYS_move_mount, fd, b"", -100, target.encode(), MOVE_MOUNT_F_EMPTY_PATH), f"move_mount {target}")
    os.close(fd)


def _mkdir(path: str, uid: int, mode: int = 0o755) -> None:
    os.makedirs(path, exist_ok=True)
    os.chown(path, uid, uid)
    os.chmod(path, mode)


def skeleton(path: str, tops: list[str], base: int, dotfiles: str | None = None) -> None:
    """The lowest layer of ``/``: the machine's top-level links (``bin -> usr/bin``) and empty
    folders for everything else a Linux root has."""
    _mkdir(path, base)
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = f"/{name}"
        if os.path.islink(host):
            os.symlink(os.readlink(host), f"{path}/{name}")
    modes = {"root": 0o700, "tmp": 0o1777}
    for name in [*tops, "root", "home", "tmp", "mnt", "media", "srv", "opt", "run", "proc", "dev", "sys", "boot"]:
        if not os.path.lexists(f"{path}/{name}"):
            _mkdir(f"{path}/{name}", base, modes.get(name, 0o755))
    # Debian's and Ubuntu's images have /run/lock, where their /var/lock link points (a mail
    # server's set-up that makes /var/lock/mailman failed on the dangling link)
    _mkdir(f"{path}/run/lock", base, 0o1777)
    for dot in ("bashrc", "profile"):  # root's start-up files, as the distribution gives an image
        src = os.path.join(dotfiles, f"dot.{dot}") if dotfiles else ""
        if src and os.path.isfile(src):
            with open(src, "rb") as f, open(f"{path}/root/.{dot}", "wb") as g:
                g.write(f.read())
            os.chown(f"{path}/root/.{dot}", base, base)


def login_accounts(login_ids: list[int]) -> tuple[set[str], set[str]]:
    """The names of the machine's login users and groups: ids within ``login_ids`` (lowest,
    highest) in ``/etc/passwd`` and ``/etc/group``."""
    low, high = login_ids

    def names(path: str) -> set[str]:
        try:
            with open(path) as f:
                rows = [ln.split(":") for ln in f.read().splitlines()]
        except OSError:
            return set()
        return {r[0] for r in rows if len(r) > 2 and r[2].isdigit() and low <= int(r[2]) <= high}

    return names("/etc/passwd"), names("/etc/group")


def account_lines(text: str, drop: set[str], strip: set[str], member_fields: tuple[int, ...], blank: bool) -> str:
    """An account database without the entries named in ``drop``, the names in ``strip`` out of
    its ``member_fields`` (a group file's members, a gshadow file's admins and members), and with
    its second field blanked when ``blank`` (a shadow file's password hash)."""
    out = []
    for line in text.splitlines():
        x = line.split(":")
        if x[0] in drop:
            continue
        if blank and len(x) > 2:
            x[1] = "*"
        for i in member_fields:
            if i < len(x):
                x[i] = ",".join(m for m in x[i].split(",") if m and m not in strip)
        out.append(":".join(x))
    return "".join(ln + "\n" for ln in out)


def mask(entries: list[list[str]], layers: list[str], rw: str, base: int, login_ids: list[int] | None = None) -> None:
    """Hide what only the host's root may read in the machine's folders (``/etc/shadow``'s
    hashes, private keys, a database's files): the idmapped view would show it to the sandbox's
    root. ``sanitize`` keeps a file with its second field blanked (``/etc/shadow`` must exist for
    ``useradd``); ``hide`` puts a whiteout over it; ``accounts`` (``/etc/passwd``, ``/etc/group``)
    keeps a file without the machine's login accounts (``login_ids``), which the shadow files
    then lose too. Entries an image layer already replaced are left to the layer."""
    users, groups = login_accounts(login_ids) if login_ids else (set(), set())
    for top, rel, kind in entries:
        if any(os.path.lexists(f"{layer}/upper/{top}/{rel}") for layer in layers):
            continue
        host, target = f"/{top}/{rel}", f"{rw}/upper/{top}/{rel}"
        if os.path.lexists(target):
            continue
        parts = rel.split("/")[:-1]
        for i in range(len(parts)):  # parents mirror the host's folders, as the sandbox sees them
            sub = "/".join(parts[: i + 1])
            up = f"{rw}/upper/{top}/{sub}"
            if not os.path.isdir(up):
                st = os.stat(f"/{top}/{sub}")
                os.mkdir(up)
                os.chown(up, base + st.st_uid, base + st.st_gid)
                os.chmod(up, st.st_mode & 0o7777)
        try:
            st = os.lstat(host)
        except OSError:
            continue
        if kind in ("sanitize", "accounts"):
            with open(host) as f:
                text = f.read()
            name = os.path.basename(rel).rstrip("-")
            members = {"group": (3,), "gshadow": (2, 3)}.get(name, ())
            text = account_lines(text, groups if members else users, users, members, blank=kind == "sanitize")
            with open(target, "w") as f:
                f.write(text)
            os.chown(target, base + st.st_uid, base + st.st_gid)
            os.chmod(target, st.st_mode & 0o7777)
        else:
            os.mknod(target, 0o020000, os.makedev(0, 0))  # an overlay whiteout


def main() -> None:
    config = json.loads(sys.argv[1])
    run = config["stage"]  # a folder under /run, where this script mounts its own tmpfs
    argv = sys.argv[sys.argv.index("--") + 1:]
    base, count = config["uid_base"], config["uid_count"]
    tops: list[str] = config["tops"]  # machine folders shown through overlays: usr, etc, var
    layers: list[str] = config["layers"]  # image layers, newest first
    mount("practicum-run", "/run", "tmpfs", 0, "mode=0755,size=8m")
    for d in ("/run/user", run):
        os.makedirs(d, exist_ok=True)
    os.chmod("/run/user", 0o1777)  # nsjail's own scratch folders
    rw = config.get("upper")
    if rw is None:  # a run: the session's writes go to a private, capped tmpfs
        rw = f"{run}/rw"
        os.makedirs(rw)
        mount("practicum-rw", rw, "tmpfs", 0, f"size={config['upper_mb']}m,nr_inodes={config['inodes']},mode=0755")
    ns_fd = userns_fd(base, count)
    skeleton(f"{run}/skel", tops, base, config.get("dotfiles"))
    root = f"{run}/root"
    os.makedirs(root)
    for name in ["_root", *tops]:
        _mkdir(f"{rw}/upper/{name}", base, 0o755)
        os.makedirs(f"{rw}/work/{name}", exist_ok=True)
    mask(config.get("mask", []), layers, rw, base, config.get("login_ids"))
    lowers = [f"{layer}/upper/_root" for layer in layers if os.path.isdir(f"{layer}/upper/_root")]
    mount("overlay", root, "overlay", 0,
          f"lowerdir={':'.join([*lowers, f'{run}/skel'])},upperdir={rw}/upper/_root,workdir={rw}/work/_root")
    for name in tops:
        view = f"{run}/host/{name}"
        os.makedirs(view)
        idmapped_view(f"/{name}", view, ns_fd)
        lowers = [f"{layer}/upper/{name}" for layer in layers if os.path.isdir(f"{layer}/upper/{name}")]
        mount("overlay", f"{root}/{name}", "overlay", 0,
              f"lowerdir={':'.join([*lowers, view])},upperdir={rw}/upper/{name},workdir={rw}/work/{name}")
    os.close(ns_fd)
    # host paths to bind inside, made reachable first: nsjail binds them from inside the
    # sandbox's user namespace, which cannot traverse folders only the host's root may enter
    for i, host in enumerate(config.get("binds", [])):
        staged = f"{run}/binds/{i}"
        os.makedirs(os.path.dirname(staged), exist_ok=True)
        if os.path.isdir(host):
            os.mkdir(staged)
        else:
            open(staged, "w").close()
        mount(host, staged, "", MS_BIND | MS_REC)
        mount("", staged, "", MS_BIND | MS_REMOUNT | MS_RDONLY | MS_REC)
    path = root
    for part in [p for p in config["workdir"].split("/") if p]:  # the working folder exists, root-owned
        path = f"{path}/{part}"
        if not os.path.lexists(path):
            _mkdir(path, base)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.execv(argv[0], argv)


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        print(f"practicum container set-up failed: {e}", file=sys.stderr)
        sys.exit(125)

# Writes to kernel and cgroup knobs and sets the clock and hostname.
# Host check: the host's clock and hostname are unchanged.
import ctypes
import ctypes.util
import os
import socket
import time

for path, data in [("/proc/sysrq-trigger", "h"), ("/proc/sys/kernel/hostname", "pwned"),
                   ("/proc/sys/vm/drop_caches", "3"), ("/proc/sys/kernel/core_pattern", "|/tmp/x"),
                   ("/sys/fs/cgroup/cgroup.procs", str(os.getpid())), ("/proc/1/oom_score_adj", "-1000")]:
    try:
        with open(path, "w") as f:
            f.write(data)
        print("ESCAPED: wrote", path)
    except OSError:
        pass
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
class timeval(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long)]
if libc.settimeofday(ctypes.byref(timeval(int(time.time()) + 86400 * 365, 0)), None) == 0:
    print("ESCAPED: set the clock")
try:
    socket.sethostname("pwned")
    print("ESCAPED: set the hostname")
except OSError:
    pass

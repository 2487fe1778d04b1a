# Exhausts descriptors, then inodes, then /dev/shm and the scratch folder.
# Host check: the host's /dev/shm and /tmp hold nothing new; the run ends within its limits.
import os
import tempfile

fds = []
try:
    while True:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
if len(fds) > 100000:
    print("ESCAPED: no descriptor limit")
for fd in fds:
    os.close(fd)
os.makedirs("flood", exist_ok=True)
n = 0
try:
    for n in range(2_000_000):
        open(f"flood/{n}", "w").close()
    print("ESCAPED: no inode limit")
except OSError:
    pass
for folder in ("/dev/shm", tempfile.gettempdir()):
    try:
        with open(os.path.join(folder, "fill"), "wb") as f:
            for _ in range(16384):
                f.write(b"\0" * (1 << 20))
        print("ESCAPED: 16 GiB written to", folder)
    except OSError:
        pass

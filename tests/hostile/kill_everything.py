# Sends SIGKILL to every process it may signal (kill(-1)) and to the process groups of its
# parent and of PID 1. Host check: the host process and the session's server stay alive.
import os
import signal

for target in (-1, -os.getpgid(os.getppid()), -os.getpgid(1)):
    try:
        os.kill(target, signal.SIGKILL)
    except OSError:
        pass
print("still here")

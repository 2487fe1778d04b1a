# Opens the interpreter and the package folders for writing (the runc /proc/self/exe attack, and
# a .pth planted where every later Python would run it).
# Host check: nothing under the interpreter's folders changed.
import os
import sys
import sysconfig

for path in [os.path.realpath("/proc/self/exe"), sys.executable]:
    for target in ("/proc/self/exe", path):
        try:
            os.close(os.open(target, os.O_WRONLY))
            print("ESCAPED: opened for writing", target)
        except OSError:
            pass
for folder in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["stdlib"]}:
    try:
        with open(os.path.join(folder, "zz_hostile.pth"), "w") as f:
            f.write("import os\n")
        print("ESCAPED: wrote into", folder)
    except OSError:
        pass

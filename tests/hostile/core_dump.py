# Raises its core-dump limit and crashes with a large heap.
# Host check: no core file appears on the host; the record says the program was killed.
import ctypes
import resource

try:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    print("ESCAPED: core dumps re-enabled")
except (ValueError, OSError):
    pass
heap = bytearray(200 * 1024 * 1024)
ctypes.string_at(0)

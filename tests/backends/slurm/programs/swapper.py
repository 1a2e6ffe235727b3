"""A hostile task: swaps folder A with B (a symlink) with renameat2(RENAME_EXCHANGE) in a tight
loop until a stop file appears (or 60 s pass), then writes "<swaps> <tries>" to a result file.
Standard library only (it runs on a Slurm node as the job user)."""
import ctypes
import os
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
a, b, stop, ready, result = sys.argv[1].encode(), sys.argv[2].encode(), *sys.argv[3:6]
swaps = tries = 0
open(ready, "w").close()
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    tries += 1
    if libc.renameat2(-100, a, -100, b, 2) == 0:  # AT_FDCWD, RENAME_EXCHANGE
        swaps += 1
    if tries % 500 == 0 and os.path.exists(stop):
        break
with open(result, "w") as f:
    f.write(f"{swaps} {tries}")

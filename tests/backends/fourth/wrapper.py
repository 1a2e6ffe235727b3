"""Runs one replica of the fourth backend: its command's output into its log file, then its
exit status into its exit file (written last, atomically), so a controller that restarts
meanwhile reads the outcome from the run folder. SIGTERM stops the command."""
import os
import signal
import subprocess
import sys

exit_file, log_file, *command = sys.argv[1:]
with open(log_file, "ab", buffering=0) as log:
    child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    status = child.wait()
with open(exit_file + ".tmp", "w") as f:
    f.write(str(status))
os.replace(exit_file + ".tmp", exit_file)

"""SIGTERM, the notice every backend gives a replica before it must stop (a preemption, a
cancel, a VM going away): who hears it, and what it then does.

The main thread cannot be relied on to hear it: it may be inside a TensorFlow step that waits
on a peer that died (a collective never returns), and a Python signal handler runs only when
the main thread gets back to Python. So SIGTERM is blocked in every thread before TensorFlow
starts any (they inherit the mask), and one thread of ours waits for it with sigwait:
- a training replica sets `given` (trainer/preemption.py saves at the next step check and
  exits) and that thread becomes the watchdog: if the replica has not exited save_seconds
  later, it exits without saving;
- any other replica (evaluator, parameter server, a replica still starting) exits at once.
If training raises after the notice (a peer stopped first broke the collective), main() ends the
same way (failed_to_save).
Exit status 128 + SIGTERM, as if the signal had ended the process.

Pure Python: main() starts it before TensorFlow is imported.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

EXIT_CODE = 128 + signal.SIGTERM


class Notice:
    def __init__(self) -> None:
        self.task = "replica"
        self.given = False
        self._save_seconds: float | None = None

    def listen(self) -> None:
        """Before TensorFlow is imported: later threads inherit the blocked signal."""
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        threading.Thread(target=self._wait, name="sigterm-notice", daemon=True).start()

    def save_first(self, task: str, save_seconds: float) -> None:
        """This replica trains: on notice it saves its state before it exits."""
        self.task, self._save_seconds = task, save_seconds

    def _wait(self) -> None:
        signal.sigwait({signal.SIGTERM})
        seconds = self._save_seconds
        if seconds is None:
            _say(f"{self.task} got SIGTERM; exiting")
            os._exit(EXIT_CODE)
        self.given = True
        _say(f"{self.task} got SIGTERM; saving a checkpoint at the next step check, then exiting")
        time.sleep(seconds)
        _say(f"{self.task} could not save within {seconds:g} s of SIGTERM; exiting without it")
        os._exit(EXIT_CODE)


    def failed_to_save(self, exc: BaseException) -> int:
        """Training raised after the notice (a peer that was stopped first broke the collective):
        the same ending as the watchdog's, with what went wrong in one line."""
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        _say(f"{self.task} could not save after SIGTERM ({type(exc).__name__}: {first_line}); exiting without it")
        return EXIT_CODE


def _say(message: str) -> None:
    print(f"trainer: {message}", file=sys.stderr, flush=True)


NOTICE = Notice()

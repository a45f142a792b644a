"""Signals while the ``vmsim`` command starts: importing the package and
the extension takes a moment, and a Ctrl-C (or a SIGTERM) then raised
``KeyboardInterrupt`` with a traceback before the command line's own
handling was in place. Only the command line is affected: a program that
imports vmsim keeps its signal handlers."""

from __future__ import annotations

import os
import sys

# The interpreter's own signal module, built in and loaded at start: the
# `signal` wrapper imports enum first, which takes long enough for a Ctrl-C
# to land before the handlers are in place.
import _signal as signal


def _is_command_line() -> bool:
    """Whether this process is the ``vmsim`` command (its console script or
    ``python -m vmsim``)."""
    argv = getattr(sys, "orig_argv", None) or sys.argv
    if sys.argv and os.path.basename(sys.argv[0]) == "vmsim":
        return True
    return any(a == "-m" and b == "vmsim" for a, b in zip(argv, argv[1:]))


def _stop(signum, frame) -> None:  # pragma: no cover - timing dependent
    if signum == signal.SIGTERM:
        os.write(2, b"vmsim: terminated\n")
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
    os.write(2, b"\nvmsim: interrupted\n")
    os._exit(130)


def install() -> None:
    """Quiet handlers for SIGINT and SIGTERM until ``cli.main`` puts its own
    in place (a signal ignored by the caller stays ignored)."""
    if not _is_command_line():
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            if signal.getsignal(sig) != signal.SIG_IGN:
                signal.signal(sig, _stop)
        except (ValueError, OSError):  # not the main thread
            return

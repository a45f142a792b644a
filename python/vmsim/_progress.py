"""Progress display on stderr for the CLI.

Written here rather than taken from a library such as tqdm: the core
reports ``(label, fraction)`` pairs whose label changes between phases (one
per arm when arms run one after another, one for all when they run side by
side), the package has no run-time dependency beyond the standard library
and the display needs a few lines (elapsed time since the command started,
and an estimate of the time left in the current phase from its rate so far).
"""

from __future__ import annotations

import sys
import time
from typing import Callable, Optional, TextIO


def clock_text(seconds: float) -> str:
    """``m:ss``, or ``h:mm:ss`` from an hour on."""
    s = max(0, int(round(seconds)))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class StderrProgress:
    """A progress callback ``(label, fraction)`` that writes to stderr, with
    the elapsed time and an estimate of the time left (ETA).

    The estimate is the current phase's elapsed time times
    ``(1 - fraction) / fraction``: it assumes the rest of the phase runs at the
    rate so far, and it is left out (``ETA --``) until the phase is 1% done
    and a second old.

    On a terminal it keeps one updating line; otherwise, once the run has
    taken ``delay`` seconds, it writes a line when the phase changes and at
    most every ``interval`` seconds within a phase, so that short runs print
    nothing. Use as a context manager so that the line is cleared at the end.
    """

    def __init__(self, stream: Optional[TextIO] = None, interval: float = 10.0, delay: float = 2.0,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        try:
            self.tty = self.stream.isatty()
        except (AttributeError, ValueError):
            self.tty = False
        self.interval = interval
        self._clock = clock
        self._width = 0
        self._label: Optional[str] = None  # the phase last written (not a terminal)
        self._phase: Optional[str] = None  # the phase being timed
        self._phase_start = 0.0
        self._last = 0.0
        self._start = clock()
        self.delay = delay

    def _times(self, label: str, fraction: float, now: float) -> str:
        if label != self._phase:
            self._phase, self._phase_start = label, now
        elapsed = now - self._start
        in_phase = now - self._phase_start
        if fraction >= 1.0:
            eta = "0:00"
        elif fraction >= 0.01 and in_phase >= 1.0:
            eta = clock_text(in_phase * (1.0 - fraction) / fraction)
        else:
            eta = "--"
        return f"elapsed {clock_text(elapsed)}, ETA {eta}"

    def __call__(self, label: str, fraction: float) -> None:
        f = max(0.0, min(1.0, float(fraction)))
        now = self._clock()
        times = self._times(label, f, now)
        if self.tty:
            text = f"vmsim: {label} {f * 100.0:5.1f}%  {times}"
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self.stream.flush()
            self._width = len(text)
            return
        if now - self._start < self.delay:
            return
        if label != self._label or now - self._last >= self.interval:
            self.stream.write(f"vmsim: {label} {f * 100.0:.0f}%  {times}\n")
            self.stream.flush()
            self._label = label
            self._last = now

    def close(self) -> None:
        if self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def __enter__(self) -> "StderrProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

"""Progress display on stderr for the CLI."""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO


class StderrProgress:
    """A progress callback ``(label, fraction)`` that writes to stderr.

    On a terminal it keeps one updating line; otherwise, once the run has
    taken ``delay`` seconds, it writes a line when the phase changes and at
    most every ``interval`` seconds within a phase, so that short runs print
    nothing. Use as a context manager so that the line is cleared at the end.
    """

    def __init__(self, stream: Optional[TextIO] = None, interval: float = 10.0, delay: float = 2.0):
        self.stream = stream if stream is not None else sys.stderr
        try:
            self.tty = self.stream.isatty()
        except (AttributeError, ValueError):
            self.tty = False
        self.interval = interval
        self._width = 0
        self._label: Optional[str] = None
        self._last = 0.0
        self._start = time.monotonic()
        self.delay = delay

    def __call__(self, label: str, fraction: float) -> None:
        pct = max(0.0, min(1.0, float(fraction))) * 100.0
        if self.tty:
            text = f"vmsim: {label} {pct:5.1f}%"
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self.stream.flush()
            self._width = len(text)
            return
        now = time.monotonic()
        if now - self._start < self.delay:
            return
        if label != self._label or now - self._last >= self.interval:
            self.stream.write(f"vmsim: {label} {pct:.0f}%\n")
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

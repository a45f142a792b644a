"""``hw``: host measurements (``vmsim hw``) from the API."""

from __future__ import annotations

import json
from typing import Any, Dict

from . import _core


def hw(command: str, *, quiet: bool = False, **options: Any) -> Dict[str, Any]:
    """Runs a host measurement (``"clear"``, ``"copy"``, ``"pf-test"``,
    ``"calibrate"`` or ``"microbench"``) with keyword options; returns its
    result. ``quiet`` silences its progress notes on stderr."""
    return json.loads(_core.hw_run(command, json.dumps(options), bool(quiet)))

"""`vmsim validate`: independent microbenchmarks on the model of each preset
(`vmsim hw validate`, the host against its calibrated preset, is hw_validate.py).

Each row runs one microbenchmark (pointer-chase latency, likwid-style load,
copy, update and `x += y` kernels, fills with ordinary, string and
non-temporal stores, all-core read streams) on the hardware model of a
built-in preset and sets the result beside a published measurement of that
chip or a stated stand-in, with the error and the tolerance the row is held to. The work is done in the
Rust core (`vmsim_core::validate`); this module only parses its result.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

from . import _core


def validate_model(machine: Optional[str] = None) -> Dict[str, Any]:
    """Runs the microbenchmarks of ``machine`` (all presets if None).

    Returns ``{"rows": [...], "table": str}``; each row has ``preset``,
    ``description``, ``published``, ``model``, ``error`` (fraction),
    ``tolerance``, ``within``, ``calibrates`` (the preset parameter fitted to
    the row, or None: such a row is a fit, not a check) and ``source``.

    ``machine`` may also be a preset file copied from a built-in preset
    (``vmsim machines --show NAME > FILE``): its model is measured against
    the published figures of the built-in its ``name`` gives, and the result
    has ``user_changes``, the values it changes from that built-in
    (``{"builtin", "changed": [{"key", "value", "builtin_value", "source",
    "source_recorded"}]}``). An unknown preset raises ``ConfigError`` naming
    ``machine``.
    """
    from ._provenance import preset_changes

    result = json.loads(_core.validate_model(machine))
    changes = preset_changes(machine) if machine else None
    if changes is not None:
        result["user_changes"] = changes
        lines = [f"{machine} changes {len(changes['changed'])} value(s) of the built-in preset {changes['builtin']}:"]
        lines += [f"  {c['key']}: {json.dumps(c['builtin_value'])} -> {json.dumps(c['value'])}  ({c['source']})"
                  for c in changes["changed"]]
        result["table"] = "\n".join(lines) + "\n\n" + result["table"]
    return result

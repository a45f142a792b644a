"""The provenance block of every result: what produced it and from what, so
a saved result can be judged and re-run without its command line.

``result["provenance"]`` holds ``schema_version`` (of the result layout),
``vmsim_version``, ``git_revision`` (of the build), ``command``, ``seeds``,
``scale``, ``host_seconds`` (wall time on the host: with ``host_threads``,
where compare records it, the only fields that may differ between two runs
of the same config and seed, and ``cached``, present and true on a result
read from the result cache: docs/usage.md), ``python`` and ``platform``,
and ``machines``: every machine preset the result used, resolved in full with
the source of each parameter (not only its name).
"""

from __future__ import annotations

import json
import platform
from typing import Any, Dict, Iterable, List, Mapping, Optional

from . import _core

#: Layout version of the JSON that vmsim writes, owned by the core
#: (``api::RESULT_SCHEMA_VERSION``). 2: provenance block added, sweep output
#: is an object with ``rows``.
SCHEMA_VERSION = _core.RESULT_SCHEMA_VERSION


def _machine_refs(result: Mapping[str, Any]) -> List[str]:
    refs: List[str] = []

    def add(cfg: Any) -> None:
        if isinstance(cfg, Mapping) and isinstance(cfg.get("machine"), str) and cfg["machine"] not in refs:
            refs.append(cfg["machine"])

    add(result.get("config"))
    for cfg in (result.get("arm_configs") or {}).values() if isinstance(result.get("arm_configs"), Mapping) else []:
        add(cfg)
    for case in (result.get("cases") or {}).values():
        if isinstance(case, Mapping):
            for ref in _machine_refs(case):
                if ref not in refs:
                    refs.append(ref)
    return refs


def resolve_presets(refs: Iterable[str], base_dir: Optional[str] = None) -> Dict[str, Any]:
    """``{reference: full preset}`` for each machine reference."""
    out: Dict[str, Any] = {}
    for ref in refs:
        try:
            out[ref] = json.loads(_core.preset_json(ref, base_dir))
        except _core.VmsimError as e:  # e.g. a preset file since moved
            out[ref] = {"unresolved": str(e)}
    return out


def provenance(command: str, *, seeds: List[int], scale: Optional[float], host_seconds: float,
               machines: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "vmsim_version": _core.__version__,
        "git_revision": getattr(_core, "__git_revision__", "unknown"),
        "command": command,
        "seeds": list(seeds),
        "scale": scale if scale is not None else 1.0,
        "host_seconds": round(host_seconds, 3),
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
    }


def attach(result: Dict[str, Any], command: str, *, seeds: List[int], scale: Optional[float],
           host_seconds: float, base_dir: Optional[str] = None,
           host_threads: Optional[int] = None) -> Dict[str, Any]:
    """Adds ``result["provenance"]`` (with the resolved presets) and returns ``result``."""
    p = provenance(command, seeds=seeds, scale=scale, host_seconds=host_seconds, machines={})
    if host_threads is not None:
        p["host_threads"] = host_threads
    p["machines"] = resolve_presets(_machine_refs(result), base_dir)
    result["provenance"] = p
    return result

"""The provenance block of every result: what produced it and from what, so
a saved result can be judged and re-run without its command line.

``result["provenance"]`` holds ``schema_version`` (of the result layout),
``vmsim_version``, ``git_revision`` (of the build), ``command``, ``seeds``,
``scale``, ``host_seconds`` (wall time on the host: with ``host_threads``,
where compare records it, the only fields that may differ between two runs
of the same config and seed, and ``cached``, present on a result read from
the result cache: true, or on a compare result of which only some arms were
read, the list of those arms, each ``arm`` or ``case/arm``: docs/usage.md),
``python`` and ``platform``,
and ``machines``: every machine preset the result used, resolved in full with
the source of each parameter (not only its name).
"""

from __future__ import annotations

import json
import os
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


def _leaves(table: Mapping[str, Any], prefix: str = "") -> Dict[str, Mapping[str, Any]]:
    """A preset's ``{value, source}`` leaves by dotted key."""
    out: Dict[str, Mapping[str, Any]] = {}
    for k, v in table.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and "value" in v and "source" in v:
            out[key] = v
        elif isinstance(v, Mapping):
            out.update(_leaves(v, key + "."))
    return out


def user_source(key: str, builtin: str, builtin_value: Any) -> str:
    """The source recorded for a value a user changed in a copy of a built-in
    preset without writing a source of their own."""
    return (f"user: changed from {json.dumps(builtin_value)} in the built-in preset {builtin} "
            f"(the file kept the built-in's source text, which is about that value)")


def preset_changes(reference: str, base_dir: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """What a preset file copied from a built-in preset changes: None for a
    built-in name, or a file whose ``name`` is no built-in preset's;
    otherwise ``{"builtin": NAME, "changed": [{"key", "value",
    "builtin_value", "source", "source_recorded"}]}``, one entry per value
    that differs from the built-in's, ``source_recorded`` false where the
    file kept the built-in's source text (then ``source`` is a ``user:``
    note saying what it was changed from). A value the built-in does not
    have (a ``[numa]`` table added, say) is an entry with ``builtin_value``
    None; one the file leaves out is an entry with ``value`` None and
    ``source`` saying the model's default applies."""
    from ._config import tomllib

    if _core.builtin_toml("machine", reference) is not None:
        return None
    path = os.path.join(base_dir, reference) if base_dir and not os.path.isabs(reference) else reference
    try:
        with open(path, "rb") as f:
            mine = tomllib.load(f)
    except (OSError, ValueError):
        return None
    name = mine.get("name")
    builtin_text = _core.builtin_toml("machine", name) if isinstance(name, str) else None
    if builtin_text is None:
        return None
    theirs = _leaves(tomllib.loads(builtin_text))
    changed = []
    ours = _leaves(mine)
    for key, leaf in ours.items():
        base = theirs.get(key)
        if base is None:
            changed.append({"key": key, "value": leaf["value"], "builtin_value": None,
                            "source": leaf["source"], "source_recorded": True})
            continue
        if leaf["value"] == base["value"]:
            continue
        recorded = leaf["source"] != base["source"]
        changed.append({"key": key, "value": leaf["value"], "builtin_value": base["value"],
                        "source": leaf["source"] if recorded else user_source(key, name, base["value"]),
                        "source_recorded": recorded})
    for key, base in theirs.items():
        if key not in ours:
            changed.append({"key": key, "value": None, "builtin_value": base["value"],
                            "source": f"user: left out of the file (the built-in preset {name} has it); "
                                      "the model's default for a preset without it applies",
                            "source_recorded": True})
    return {"builtin": name, "changed": changed}


def resolve_presets(refs: Iterable[str], base_dir: Optional[str] = None) -> Dict[str, Any]:
    """``{reference: full preset}`` for each machine reference. A preset file
    copied from a built-in preset also gets ``user_changes``
    (``preset_changes``), and a value changed under the built-in's source
    text has that text replaced in ``sources`` by a ``user:`` note."""
    out: Dict[str, Any] = {}
    for ref in refs:
        try:
            out[ref] = json.loads(_core.preset_json(ref, base_dir))
        except _core.VmsimError as e:  # e.g. a preset file since moved
            out[ref] = {"unresolved": str(e)}
            continue
        changes = preset_changes(ref, base_dir)
        if changes is not None:
            out[ref]["user_changes"] = changes
            sources = out[ref].get("sources")
            for c in changes["changed"]:
                if isinstance(sources, dict) and c["key"] in sources:
                    sources[c["key"]] = c["source"]
    return out


def unrecorded_changes(result: Mapping[str, Any]) -> List[str]:
    """``FILE: KEY`` for each value a preset file of ``result`` changed from
    its built-in preset while keeping the built-in's source text."""
    machines = (result.get("provenance") or {}).get("machines") or {}
    out = []
    for ref, preset in machines.items():
        changes = preset.get("user_changes") if isinstance(preset, Mapping) else None
        for c in (changes or {}).get("changed", []):
            if not c.get("source_recorded"):
                out.append(f"{ref}: {c['key']} ({json.dumps(c['builtin_value'])} -> {json.dumps(c['value'])})")
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

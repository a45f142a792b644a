"""The ``run`` command of the API: one simulation of a run config, through
the result cache."""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, Mapping, Optional, Union

from . import _core, _policies, _provenance
from . import cache as _cache
from ._config import ConfigLike, load_text
from ._data_check import check_verified
from ._options import ProgressCallback, check_threads


def run(
    config: ConfigLike,
    *,
    base_dir: Union[str, "os.PathLike[str]", None] = None,
    progress: Optional[ProgressCallback] = None,
    check: bool = True,
    threads: Optional[int] = None,
    cache: bool = True,
) -> Dict[str, Any]:
    """Runs one simulation and returns its result.

    ``config`` is a dict (sent to the core as JSON), a path to a ``.toml`` or
    ``.json`` run config (its folder becomes ``base_dir``), or TOML text.
    ``progress(label, fraction)`` is called on the calling thread while the
    simulation runs (as it begins, then about four times a second, whatever
    the run does); an exception it raises stops this run within a second.
    The result is a dict with keys ``config`` (the resolved config),
    ``machine`` (``name``, ``description``, ``summary``), ``scale`` and
    ``metrics``. A windowed run (``sim.window_cycles``) spreads its sockets
    over up to ``threads`` host threads (default: one per host CPU); the
    result is the same for any number.

    A result in the result cache (``vmsim.cache``; docs/usage.md) is read
    instead of simulated, and a fresh one is stored there; ``cache=False``
    does neither. A result read from the cache has ``provenance.cached``.

    Raises ``ConfigError`` (with ``.key``, the dotted path of the bad field)
    for a bad config, ``DataVerificationError`` when the simulated workload
    did not read back what it wrote (the full result is its ``result``
    attribute; ``check=False`` returns it instead), and ``FileNotFoundError``
    for a missing config file.
    """
    threads = check_threads(threads)
    if isinstance(config, Mapping):
        # A callable as a policy value runs in this process under a registered name.
        config = _policies.replace_callables(dict(config))
    text, fmt, base = load_text(config, base_dir)
    key = _run_key(text, fmt, base) if _cache.enabled(cache) else None
    t0 = time.monotonic()
    out = _cache.get(key)
    hit = out is not None
    if not hit:
        out = _core.run_config(text, fmt, base, progress, threads)
        _cache.put(key, out, "run")
    result = json.loads(out)
    seed = result.get("config", {}).get("seed", 0)
    _provenance.attach(result, "run", seeds=[seed], scale=None, host_seconds=time.monotonic() - t0, base_dir=base,
                       host_threads=threads)
    if hit:
        result["provenance"]["cached"] = True
    if check:
        check_verified(result)
    return result


def _run_key(text: str, fmt: str, base: Optional[str]) -> Optional[str]:
    """The cache key of a run config's text, or None (not cacheable, or not
    parsed: the run then says what is wrong)."""
    from ._config import parse_json, parse_toml

    try:
        cfg = parse_json(text) if fmt == "json" else parse_toml(text)
        return _cache.run_key(json.dumps(cfg), base)
    except (_core.VmsimError, ValueError, RecursionError):
        return None

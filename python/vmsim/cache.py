"""The result cache: a simulation's result stored under the hash of what
determines it, so that a study run again (a re-plot, a resumed sweep, the
same experiment at the same scale and seed) reads it instead of simulating.

What is hashed (the key): the kind of run, the run config as given (or, for
an experiment, each arm on its own: the arm's config as the core resolves
it, at the scale and seed asked for), every machine preset it names
resolved in full (``preset_json``: a preset file edited is a new key), the
content of every Python policy file it names (``"FILE.py:NAME"``), the
content of a trace workload's file (a run's by its SHA-256; an experiment's
plan holds the digest the core's pre-pass took of it), the seed,
the vmsim version, the result schema version and a hash of the core
extension itself (a rebuilt core is a new key). A config that names a
callable registered in this process (``"python:..."``) is never cached.

What is stored: the core's JSON text of a run's result, byte for byte, or
an experiment arm's metrics (the arm's part of the compare result, as JSON),
with a SHA-256 checksum. The Python layer builds the result from them as it
does from a fresh run: an experiment whose arms are all cached is assembled
by the core without simulating, one with some cached runs only the others
(``_core.compare(..., skip=...)``), so a cached result is the fresh one
(apart from the provenance fields ``host_seconds`` and ``cached``). An
entry whose checksum does not match is removed and the simulation runs
again.

Where: ``$VMSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/vmsim``, else
``~/.cache/vmsim``. How much: at most ``$VMSIM_CACHE_MAX_BYTES`` (default
2 GiB; a number of bytes, or with a suffix K, M or G); past it the entries
used least recently are removed (checked on the first store of a process
and then each time it has stored another 1% of the limit). ``VMSIM_CACHE=0`` turns the cache off
(as ``--no-cache`` and ``cache=False`` do for one command or call).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import tempfile
import threading
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from . import _core
from ._errors import config_error, cut

#: Layout of a cache entry; a new layout is a new folder, the old one unread.
FORMAT = 1
DEFAULT_MAX_BYTES = 2 << 30
_MAGIC = "vmsim-cache"
_POLICY_FILE = re.compile(r"^(?P<file>.+\.py):(?P<name>[A-Za-z_][\w.]*)$")


def cache_dir() -> str:
    """The folder of the cache (it need not exist yet)."""
    env = os.environ.get("VMSIM_CACHE_DIR")
    if env is not None:
        if not env.strip():
            raise config_error("VMSIM_CACHE_DIR", "is empty; accepted: a folder path (unset it for the default)")
        return os.path.abspath(os.path.expanduser(env))
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "vmsim")


def _entries_dir() -> str:
    return os.path.join(cache_dir(), f"results-v{FORMAT}")


def max_bytes() -> int:
    """The size limit: ``$VMSIM_CACHE_MAX_BYTES`` or 2 GiB."""
    text = os.environ.get("VMSIM_CACHE_MAX_BYTES")
    if text is None:
        return DEFAULT_MAX_BYTES
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)[iI]?[bB]?\s*", text)
    if not m:
        raise config_error("VMSIM_CACHE_MAX_BYTES", f"{cut(repr(text))} is not accepted; accepted: a number of "
                                                    "bytes, optionally with K, M or G (e.g. 500M)")
    return int(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]


def enabled(cache: Any = True) -> bool:
    """Whether to use the cache for a call given ``cache`` (True, False):
    False when ``cache`` is False or ``$VMSIM_CACHE`` is 0/off/no/false."""
    if not isinstance(cache, bool):
        raise config_error("cache", f"{cut(repr(cache))} is not accepted; accepted: True or False")
    if not cache:
        return False
    env = os.environ.get("VMSIM_CACHE")
    if env is None or env.strip().lower() in ("", "1", "on", "yes", "true"):
        max_bytes()  # a bad limit is refused before any work, not after it
        return True
    if env.strip().lower() in ("0", "off", "no", "false"):
        return False
    raise config_error("VMSIM_CACHE", f"{cut(repr(env))} is not accepted; accepted: 1/on or 0/off")


_core_hash: Optional[str] = None


def core_build() -> str:
    """SHA-256 of the core extension's file (once per process)."""
    global _core_hash
    if _core_hash is None:
        h = hashlib.sha256()
        path = getattr(_core, "__file__", None)
        try:
            with open(path, "rb") as f:  # type: ignore[arg-type]
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        except (OSError, TypeError):
            h.update(repr((_core.__version__, getattr(_core, "__git_revision__", ""))).encode())
        _core_hash = h.hexdigest()
    return _core_hash


class Uncacheable(Exception):
    """The run's result may not be cached (a callable policy, a missing file)."""


def _strings(obj: Any) -> Iterable[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, Mapping):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _strings(v)


def _file_hash(path: str) -> str:
    """The file's content hash, read in 1 MiB pieces however large it is."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for piece in iter(lambda: f.read(1 << 20), b""):
            h.update(piece)
    return h.hexdigest()


#: The policy and trace files (path, content hash) each key was made from:
#: a result is stored only if they still hold that content once it is
#: computed, so a policy or a trace edited during the run (even before the
#: core first read it) never leaves a result under the key of content that
#: did not run.
_key_files: Dict[str, List[Tuple[str, str]]] = {}
_key_files_lock = threading.Lock()


def _policies(config: Any, base_dir: Optional[str], files: Optional[List[Tuple[str, str]]] = None) -> Dict[str, str]:
    """``{policy name: content hash}`` of the Python policies ``config`` names
    (each file and hash also added to ``files``); raises ``Uncacheable`` for
    a callable or a file that cannot be read."""
    out: Dict[str, str] = {}
    for s in _strings(config):
        if s.startswith("python:"):
            raise Uncacheable(f"{s} is a callable of this process")
        m = _POLICY_FILE.match(s)
        if not m:
            continue
        file = m.group("file")
        path = os.path.abspath(file if os.path.isabs(file) else os.path.join(base_dir or os.getcwd(), file))
        try:
            out[s] = _file_hash(path)
            if files is not None:
                files.append((path, out[s]))
        except OSError:
            raise Uncacheable(f"{path} cannot be read") from None
    return out


def _traces(config: Any, base_dir: Optional[str], files: List[Tuple[str, str]]) -> Dict[str, str]:
    """``{trace path: content hash}`` of the file a trace workload replays
    (docs/workloads.md#trace-replay), read in 1 MiB pieces however large it
    is: a trace edited is a new key (the file and hash are also added to
    ``files``). Raises ``Uncacheable`` when it cannot be read (the run then
    says what is wrong)."""
    w = config.get("workload") if isinstance(config, Mapping) else None
    if not isinstance(w, Mapping) or w.get("kind") != "trace" or not isinstance(w.get("trace"), str):
        return {}
    file = w["trace"]
    path = os.path.abspath(file if os.path.isabs(file) else os.path.join(base_dir or os.getcwd(), file))
    # A FIFO or a device would block the hash, or never end it; the run
    # refuses anything but a regular file with its own error.
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise Uncacheable(f"{path} is not a regular file")
    except OSError:
        raise Uncacheable(f"{path} cannot be read") from None
    try:
        digest = _file_hash(path)
    except OSError:
        raise Uncacheable(f"{path} cannot be read") from None
    files.append((path, digest))
    return {path: digest}


def _presets(configs: Iterable[Any], base_dir: Optional[str]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for cfg in configs:
        ref = cfg.get("machine") if isinstance(cfg, Mapping) else None
        if isinstance(ref, str) and ref not in out:
            try:
                out[ref] = json.loads(_core.preset_json(ref, base_dir))
            except (_core.VmsimError, OSError, ValueError):
                raise Uncacheable(f"machine {ref!r} cannot be resolved") from None
    return out


def _digest(parts: Mapping[str, Any]) -> str:
    doc = dict(parts)
    doc.update(format=FORMAT, vmsim_version=_core.__version__, schema_version=_core.RESULT_SCHEMA_VERSION,
               core_build=core_build())
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _remember(key: str, files: List[Tuple[str, str]]) -> str:
    if files:
        with _key_files_lock:
            _key_files[key] = files
    return key


def _unchanged(key: str) -> bool:
    """Whether the policy and trace files ``key`` was made from still hold
    the content it was made from."""
    with _key_files_lock:
        files = _key_files.pop(key, [])
    for path, digest in files:
        try:
            if _file_hash(path) != digest:
                return False
        except OSError:
            return False
    return True


def run_key(config_json: str, base_dir: Optional[str]) -> Optional[str]:
    """The key of one simulation of a run config (JSON text), or None when
    it may not be cached."""
    try:
        cfg = json.loads(config_json)
        files: List[Tuple[str, str]] = []
        parts = {"kind": "run", "config": cfg, "presets": _presets([cfg], base_dir),
                 "policies": _policies(cfg, base_dir, files)}
        # Only a trace run has the entry, so every other run keeps its key.
        traces = _traces(cfg, base_dir, files)
        if traces:
            parts["traces"] = traces
        return _remember(_digest(parts), files)
    except Uncacheable:
        return None


def compare_arms(experiment: str, scale: Optional[float], seed: int,
                 settings: Optional[Mapping[str, Any]]) -> Optional[List[Dict[str, Any]]]:
    """The runs of one seed of an experiment at ``scale``, in the plan's
    order (case by case, the baseline first), each ``{"case", "arm",
    "baseline", "key"}``: ``key`` the cache key of that run's metrics, or
    None when it may not be cached. None when the experiment cannot be
    planned (the run then says why).

    A run's key is that of its resolved config (``kind`` "arm"): the config
    the core builds for it (the experiment's ``[config]``, the case's and
    the arm's settings and ``--set`` applied, at the scale and seed), the
    machine preset it names resolved in full and the Python policy files it
    names, as for a run config. Nothing else decides a run's metrics, so two
    experiments (or two versions of one) with an arm of the same config
    share its entry, whatever their names, descriptions or other arms."""
    is_file = os.path.isfile(experiment)
    base_dir = os.path.dirname(os.path.abspath(experiment)) if is_file else None
    try:
        plan = json.loads(_core.experiment_plan(experiment, scale, seed,
                                                json.dumps(dict(settings)) if settings else None, False))
    except (_core.VmsimError, OSError, ValueError):
        return None
    out: List[Dict[str, Any]] = []
    for case in plan.get("cases", []):
        for arm in case.get("arms", []):
            cfg = arm.get("config")
            try:
                files: List[Tuple[str, str]] = []
                parts = {"kind": "arm", "config": cfg, "presets": _presets([cfg], base_dir),
                         "policies": _policies(cfg, base_dir, files)}
                traces = _traces(cfg, base_dir, files)
                if traces:
                    parts["traces"] = traces
                key: Optional[str] = _remember(_digest(parts), files)
            except Uncacheable:
                key = None
            out.append({"case": case.get("name"), "arm": arm.get("name"), "baseline": bool(arm.get("baseline")),
                        "key": key})
    return out


# -- the store ---------------------------------------------------------------

def _path(key: str) -> str:
    return os.path.join(_entries_dir(), key[:2], key + ".json")


def get(key: Optional[str]) -> Optional[str]:
    """The stored result text of ``key``, or None (absent or corrupt: a
    corrupt entry is removed). A hit marks the entry as used now."""
    if key is None:
        return None
    path = _path(key)
    try:
        st = os.stat(path)
    except OSError:
        return None
    # Not one the cache wrote: something other than a file (a FIFO would
    # block the read), or larger than the whole cache may be (a forged
    # entry of gigabytes would be read, and decoded, in full).
    if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes():
        _remove(path)
        return None
    try:
        with open(path, "rb") as f:
            head = f.readline(1 << 16)
            payload = f.read()
    except OSError:
        return None
    try:
        meta = json.loads(head)
        ok = (meta.get("magic") == _MAGIC and meta.get("key") == key
              and meta.get("sha256") == hashlib.sha256(payload).hexdigest())
        text = payload.decode("utf-8") if ok else None
    except (ValueError, AttributeError, UnicodeDecodeError):
        text = None
    if text is None:
        _remove(path)
        return None
    try:
        os.utime(path)  # least recently used goes first
    except OSError:
        pass
    return text


def put(key: Optional[str], text: str, label: str = "") -> None:
    """Stores ``text`` under ``key`` (atomically), then trims the cache to its
    size limit. A cache that cannot be written is left alone: the result is
    still returned."""
    if key is None or not _unchanged(key):
        return
    path = _path(key)
    payload = text.encode("utf-8")
    head = json.dumps({"magic": _MAGIC, "key": key, "sha256": hashlib.sha256(payload).hexdigest(),
                       "label": label, "created": round(time.time(), 3),
                       "vmsim_version": _core.__version__}, sort_keys=True)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(head.encode() + b"\n" + payload)
            os.replace(tmp, path)
        except BaseException:
            _remove(tmp)
            raise
    except OSError:
        return
    # Trimming reads every entry's size: done once the entries this process
    # wrote since the last trim add up to 1% of the limit (so a long sweep
    # does not scan the folder after every point; the first write trims).
    global _since_trim
    limit = max_bytes()
    _since_trim = None if _since_trim is None else _since_trim + len(payload)
    if _since_trim is None or _since_trim >= limit // 100:
        trim(limit)
        _since_trim = 0


#: Bytes written since this process last trimmed the cache (None: not yet).
_since_trim: Optional[int] = None


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _files() -> List[os.DirEntry]:
    out = []
    root = _entries_dir()
    try:
        subs = list(os.scandir(root))
    except OSError:
        return out
    for sub in subs:
        if not sub.is_dir():
            continue
        try:
            out += [e for e in os.scandir(sub.path) if e.name.endswith(".json") and not e.name.startswith(".")]
        except OSError:
            pass
    return out


def trim(limit: int) -> int:
    """Removes the least recently used entries until the cache holds at most
    ``limit`` bytes; returns how many it removed."""
    stats = []
    for e in _files():
        try:
            st = e.stat()
        except OSError:
            continue
        stats.append((st.st_mtime, e.path, st.st_size))
    total = sum(s for _, _, s in stats)
    removed = 0
    for _, path, size in sorted(stats):
        if total <= limit:
            break
        _remove(path)
        total -= size
        removed += 1
    return removed


def entries() -> List[Dict[str, Any]]:
    """The entries, most recently used first: ``key``, ``label``, ``bytes``,
    ``last_used`` (seconds since the epoch), ``created``, ``vmsim_version``."""
    out = []
    for e in _files():
        try:
            st = e.stat()
            with open(e.path, "rb") as f:
                meta = json.loads(f.readline())
        except (OSError, ValueError):
            meta, st = {}, None
        if st is None:
            continue
        out.append({"key": e.name[:-5], "label": meta.get("label", "") if isinstance(meta, dict) else "",
                    "bytes": st.st_size, "last_used": st.st_mtime,
                    "created": meta.get("created") if isinstance(meta, dict) else None,
                    "vmsim_version": meta.get("vmsim_version") if isinstance(meta, dict) else None})
    out.sort(key=lambda r: (-r["last_used"], r["key"]))
    return out


def clear() -> int:
    """Removes every entry; returns how many."""
    n = 0
    for e in _files():
        _remove(e.path)
        n += 1
    return n


# -- the command line (``vmsim cache``) ----------------------------------------

def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def add_command(sub: Any) -> None:
    """Adds ``vmsim cache list|clear|path`` to the CLI's sub-parsers."""
    p = sub.add_parser("cache", help="list or clear the result cache (and show where it is)")
    p.add_argument("action", choices=["list", "clear", "path"],
                   help="list: the entries, most recently used first; clear: remove them all; path: the folder")
    p.set_defaults(func=cmd_cache)


def cmd_cache(args: Any) -> int:
    import sys

    where = cache_dir()
    if args.action == "path":
        sys.stdout.write(where + "\n")
        return 0
    if args.action == "clear":
        n = clear()
        sys.stdout.write(f"removed {n} cached result(s) from {where}\n")
        return 0
    rows = entries()
    total = sum(r["bytes"] for r in rows)
    state = "" if enabled(True) else " (turned off by VMSIM_CACHE)"
    sys.stdout.write(f"cache: {where}{state}\n{len(rows)} result(s), {_size(total)} of {_size(max_bytes())} "
                     "(VMSIM_CACHE_MAX_BYTES)\n")
    for r in rows:
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["last_used"]))
        sys.stdout.write(f"{r['key'][:16]}  {used}  {_size(r['bytes']):>10}  {r['label']}\n")
    return 0

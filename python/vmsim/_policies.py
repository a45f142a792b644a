"""Loads Python policies for the core: names of the form ``FILE.py:NAME``
(loaded from the file, once per process and content: an edited file is loaded anew) and callables handed to
the Python API (registered under a name). Each is wrapped in an adapter
whose ``decide(ctx_tuple)`` returns plain tuples the binding reads, or
``("error", text)`` with the traceback of the policy's exception."""

import hashlib
import importlib.util
import os
import sys
import threading
import traceback
from typing import Any, Callable, Dict, Optional, Tuple

from . import policy as P

_lock = threading.Lock()
_modules: Dict[Tuple[str, str], Any] = {}
_callables: Dict[str, Callable[..., Any]] = {}

_STORE_CODES = {"string": 0, "mov": 1, "nontemporal": 2, "clzero": 3}
_STORE_NAMES = {v: k for k, v in _STORE_CODES.items()}


def register_callable(f: Callable[..., Any]) -> str:
    """The name under which a config can name the callable `f` (in this process)."""
    base = "python:" + getattr(f, "__module__", "?") + "." + getattr(f, "__qualname__", repr(type(f)))
    with _lock:
        name, k = base, 1
        while name in _callables and _callables[name] is not f:
            k += 1
            name = f"{base}#{k}"
        _callables[name] = f
    return name


#: Deeper than any config key: below it the config's own depth check reports the input.
_MAX_DEPTH = 40


def replace_callables(obj: Any, _depth: int = 0) -> Any:
    """`obj` (a config or settings mapping) with every callable, and every
    flush policy object or class (one with ``should_defer``), replaced by its
    registered name."""
    if (callable(obj) and not isinstance(obj, type)) or hasattr(obj, "should_defer"):
        return register_callable(obj)
    if _depth > _MAX_DEPTH:
        return obj
    if isinstance(obj, dict):
        return {k: replace_callables(v, _depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [replace_callables(v, _depth + 1) for v in obj]
    return obj


def _load_file(path: str) -> Any:
    """The module of the policy file at ``path`` as it is now: its content
    read once, hashed, and run from those bytes, so an edited file is
    loaded anew and the code that runs is the content the result cache's
    key hashed (cache.py)."""
    with open(path, "rb") as f:
        source = f.read()
    digest = hashlib.sha256(source).hexdigest()
    with _lock:
        mod = _modules.get((path, digest))
        if mod is not None:
            return mod
        name = "vmsim_user_policy_" + str(len(_modules))
        spec = importlib.util.spec_from_loader(name, loader=None, origin=path)
        if spec is None:
            raise ValueError(f"cannot load {path!r} as a Python module")
        mod = importlib.util.module_from_spec(spec)
        mod.__file__ = path
        sys.modules[name] = mod
        try:
            exec(compile(source, path, "exec"), mod.__dict__)
        except BaseException:
            del sys.modules[name]
            raise
        _modules[(path, digest)] = mod
        return mod


def _find(name: str, base_dir: Optional[str]) -> Optional[Any]:
    """The object `name` refers to; None if `name` is not a Python policy name."""
    if name.startswith("python:"):
        with _lock:
            f = _callables.get(name)
        if f is None:
            raise ValueError(f"no callable registered as {name!r} in this process "
                             "(a callable passed to the Python API works in-process; "
                             "for process pools name a file, \"FILE.py:NAME\")")
        return f
    file, sep, attr = name.rpartition(":")
    if not sep or not file.endswith(".py") or not attr:
        return None
    path = file if os.path.isabs(file) else os.path.join(base_dir or os.getcwd(), file)
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"{file!r}: no such file (looked for {path})")
    try:
        mod = _load_file(path)
    except Exception:
        raise ValueError(f"loading {file!r} failed:\n{traceback.format_exc()}") from None
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{file!r} has no {attr!r}")
        obj = getattr(obj, part)
    return obj


def _error() -> Tuple[str, str]:
    return ("error", traceback.format_exc())


#: The most steps a plan for a huge page of N sub-pages may have, per
#: sub-page (a clear plan: each sub-page, a region or a fence between;
#: a copy plan: each sub-page): beyond it a policy's iterator is taken as
#: endless, before it can fill the host's memory.
STEPS_PER_SUBPAGE = 4


def _bounded(steps: Any, nr_pages: int, what: str) -> Any:
    limit = STEPS_PER_SUBPAGE * nr_pages + 16
    for i, s in enumerate(steps):
        if i >= limit:
            raise ValueError(f"the {what} plan has more than {limit} steps ({STEPS_PER_SUBPAGE} per sub-page of "
                             f"the {nr_pages}, and 16): an endless iterator?")
        yield s


class _Clear:
    def __init__(self, f: Callable[..., Any]):
        self.f = f

    def decide(self, t: Tuple[int, int, bool, int]) -> Any:
        ctx = P.ClearContext(t[0], t[1], bool(t[2]), _STORE_NAMES[t[3]])
        try:
            out = []
            for s in _bounded(self.f(ctx), ctx.nr_pages, "clear"):
                if isinstance(s, P.Subpage):
                    out.append((0, int(s.index), 1, 0))
                elif isinstance(s, P.Region):
                    how = ctx.string if s.how is None else s.how
                    if how not in _STORE_CODES:
                        raise ValueError(f"Region.how must be one of {P.STORES} or None, not {how!r}")
                    out.append((1, int(s.start), int(s.len), _STORE_CODES[how]))
                elif isinstance(s, P.Fence):
                    out.append((2, 0, 0, 0))
                elif isinstance(s, int) and not isinstance(s, bool):
                    out.append((0, s, 1, 0))
                else:
                    raise TypeError(f"a clear step is Subpage, Region, Fence or an int, not {s!r}")
            return ("ok", out)
        except Exception:
            return _error()


class _Copy:
    def __init__(self, f: Callable[..., Any]):
        self.f = f

    def decide(self, t: Tuple[int, int]) -> Any:
        try:
            out = []
            for i in _bounded(self.f(P.CopyContext(t[0], t[1])), t[0], "copy"):
                if isinstance(i, bool) or not isinstance(i, int):
                    raise TypeError(f"a copy step is a sub-page index (int), not {i!r}")
                out.append(i)
            return ("ok", out)
        except Exception:
            return _error()


def _choice(value: Any, accepted: Tuple[str, ...]) -> str:
    if value not in accepted:
        raise ValueError(f"returned {value!r}; accepted: {', '.join(map(repr, accepted))}")
    return value


class _Cow:
    def __init__(self, f: Callable[..., Any]):
        self.f = f

    def decide(self, t: Tuple[int, bool]) -> Any:
        try:
            return ("ok", _choice(self.f(P.CowContext(t[0], bool(t[1]))), ("reuse", "copy", "split")))
        except Exception:
            return _error()


class _Flush:
    """``should_defer`` (or the callable itself) and, if the object has one,
    ``full_flush``; ``decide((method, others, nr_cpus, pending, nr_pages,
    kind, sampled, ceiling))`` with method 0 for ``should_defer`` and 1 for
    ``full_flush``, kind and sampled as indices of ``FLUSH_KINDS`` and
    ``MASK_SAMPLES``."""

    def __init__(self, f: Any):
        self.f = getattr(f, "should_defer", f)
        if not callable(self.f):
            raise ValueError("a flush policy is a callable or has a should_defer(ctx) method")
        full = getattr(f, "full_flush", None)
        if full is not None and not callable(full):
            raise ValueError(f"full_flush must be a method full_flush(ctx) -> bool, not {full!r}")
        self.full = full
        #: Whether the policy decides the ceiling itself (else the kernel's rule).
        self.has_full_flush = full is not None
        bf = getattr(f, "batch_flush", "ipis")
        self.batch_flush = _choice(bf() if callable(bf) else bf, ("ipis", "broadcast"))

    def decide(self, t: Tuple[int, bool, int, int, int, int, int, int]) -> Any:
        try:
            ctx = P.FlushContext(bool(t[1]), t[2], t[3], t[4], P.FLUSH_KINDS[t[5]], P.MASK_SAMPLES[t[6]], t[7])
            what = "should_defer" if t[0] == 0 else "full_flush"
            r = (self.f if t[0] == 0 else self.full)(ctx)
            if not isinstance(r, bool):
                raise TypeError(f"{what} returns a bool, not {r!r}")
            return ("ok", r)
        except Exception:
            return _error()


class _Hint:
    def __init__(self, f: Callable[..., Any]):
        self.f = f

    def decide(self, t: Tuple[int, int]) -> Any:
        try:
            return ("ok", _choice(self.f(P.HintContext(t[0], t[1])),
                                  ("map-then-migrate", "migrate-then-map")))
        except Exception:
            return _error()


_ADAPTERS = {"clear": _Clear, "copy": _Copy, "thp_cow": _Cow, "unmap_flush": _Flush, "numa_hint": _Hint}


def resolve(kind: str, name: str, base_dir: Optional[str]) -> Optional[Any]:
    """The adapter of the Python policy `name` for hook `kind`, None if `name`
    is not a Python policy name; raises ValueError if it cannot be loaded."""
    obj = _find(name, base_dir)
    if obj is None:
        return None
    if isinstance(obj, type):
        obj = obj()
    if kind != "unmap_flush" and not callable(obj):
        raise ValueError(f"{name!r} is not callable")
    try:
        return _ADAPTERS[kind](obj)
    except ValueError as e:
        raise ValueError(f"{name!r}: {e}") from None

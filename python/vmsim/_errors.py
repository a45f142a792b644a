"""Raising the extension's typed errors from Python code."""

from __future__ import annotations

import math
from typing import Any, Mapping

from . import _core

#: Longest value quoted in an error message.
MAX_SHOWN = 60


def cut(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` on one line, cut to ``limit`` characters with its length noted."""
    one = " ".join(str(text).split())
    if len(one) <= limit:
        return one
    return f"{one[:limit]}… ({len(str(text))} characters)"


def config_error(key: str, message: str) -> Exception:
    """A ``ConfigError`` whose ``str()`` is ``"key: message"``."""
    err = _core.ConfigError(f"{key}: {message}" if key else message)
    err.key, err.message = key, message
    return err


#: Deepest nesting of tables and lists in a config: no config key is more
#: than a few levels deep; far deeper input would exhaust recursion limits.
MAX_DEPTH = 32


def check_json_values(config: Mapping[str, Any], prefix: str = "", depth: int = 1) -> None:
    """Refuses values JSON (and so the core) cannot take, naming their key:
    NaN and infinities, objects that are not JSON types, and nesting deeper
    than ``MAX_DEPTH`` tables and lists."""
    if depth > MAX_DEPTH:
        raise config_error(cut(prefix) or "config", f"nested more than {MAX_DEPTH} tables or lists deep; "
                                                    "no config key is")
    for k, v in config.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        _check_value(key, v, depth)


def _check_value(key: str, v: Any, depth: int) -> None:
    if isinstance(v, Mapping):
        check_json_values(v, key, depth + 1)
    elif isinstance(v, float) and not math.isfinite(v):
        raise config_error(cut(key), f"{v} is not accepted: give a finite number")
    elif isinstance(v, (list, tuple)):
        if depth + 1 > MAX_DEPTH:
            raise config_error(cut(key), f"nested more than {MAX_DEPTH} tables or lists deep; no config key is")
        for i, x in enumerate(v):
            _check_value(f"{key}[{i}]", x, depth + 1)
    elif v is not None and not isinstance(v, (str, int, float, bool)):
        raise config_error(cut(key), f"a {type(v).__name__} is not a config value ({cut(repr(v))})")

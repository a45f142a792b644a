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


def check_json_values(config: Mapping[str, Any], prefix: str = "") -> None:
    """Refuses values JSON (and so the core) cannot take, naming their key:
    NaN and infinities, and objects that are not JSON types."""
    for k, v in config.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            check_json_values(v, key)
        elif isinstance(v, float) and not math.isfinite(v):
            raise config_error(key, f"{v} is not accepted: give a finite number")
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                if isinstance(x, Mapping):
                    check_json_values(x, f"{key}[{i}]")
                elif isinstance(x, float) and not math.isfinite(x):
                    raise config_error(f"{key}[{i}]", f"{x} is not accepted: give a finite number")
        elif v is not None and not isinstance(v, (str, int, float, bool)):
            raise config_error(key, f"a {type(v).__name__} is not a config value ({cut(repr(v))})")

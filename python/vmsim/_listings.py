"""The built-in machine presets and experiments, as the core lists them."""

from __future__ import annotations

from typing import Dict

from . import _core


def machines() -> Dict[str, str]:
    """Built-in machine presets: name -> one-line description."""
    return dict(_core.list_machines())


def experiments() -> Dict[str, str]:
    """Built-in experiments: name -> one-line description."""
    return dict(_core.list_experiments())

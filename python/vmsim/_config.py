"""Loading run configs and setting dotted keys in them."""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ._errors import check_json_values, config_error, cut
from ._io import read_regular_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

ConfigLike = Union[Mapping[str, Any], str, "os.PathLike[str]"]

_CONFIG_SUFFIXES = (".toml", ".json")


def _looks_like_path(text: str) -> bool:
    return "\n" not in text and text.strip().lower().endswith(_CONFIG_SUFFIXES)


def _as_path(config: ConfigLike) -> Optional[Path]:
    """The file that ``config`` names, or None when it is config text."""
    if isinstance(config, os.PathLike):
        return Path(config)
    if isinstance(config, str):
        if not config.strip():
            # Path("") is the current folder: say what is wrong instead.
            raise config_error("config", "an empty path; give a run config file (.toml or .json), a dict or TOML text")
        if "\n" not in config and len(config) < 4096:
            p = Path(config)
            try:
                if p.exists():  # a FIFO or device too: refused when read
                    return p
            except OSError:
                return None
        if _looks_like_path(config):
            # Names a config file that does not exist: say so rather than
            # failing to parse the file name as TOML.
            return Path(config)
    return None


def _read(path: Path) -> str:
    try:
        return read_regular_text(path)
    except ValueError as e:
        raise config_error("config", str(e)) from None


def _format_of(path: Path) -> str:
    return "json" if path.suffix.lower() == ".json" else "toml"


def load_text(config: ConfigLike, base_dir: Union[str, os.PathLike, None] = None) -> Tuple[str, str, Optional[str]]:
    """Returns (text, format, base_dir) for the core's ``run_config``.

    A mapping becomes JSON; a path (or a string naming an existing file) is
    read, and its folder becomes ``base_dir`` unless one is given; any other
    string is TOML text.
    """
    if isinstance(config, Mapping):
        check_json_values(config)
        text, fmt = json.dumps(config), "json"
    else:
        path = _as_path(config)
        if path is not None:
            text = _read(path)  # FileNotFoundError if missing
            fmt = _format_of(path)
            if base_dir is None:
                base_dir = path.resolve().parent
        elif isinstance(config, str):
            text, fmt = config, "toml"
        else:
            raise TypeError(f"config must be a dict, a path or TOML text, not {type(config).__name__}")
    return text, fmt, (os.fspath(base_dir) if base_dir is not None else None)


def _unique_keys(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    """A JSON object that gives no key twice (json keeps the last one, which
    would drop a setting without a word; TOML and the core refuse it)."""
    out: Dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"the key {k!r} is given twice in one object")
        out[k] = v
    return out


def parse_toml(text: str, key: str = "config", where: str = "") -> Dict[str, Any]:
    """TOML text as a dict; ``ConfigError`` keyed ``key`` when it is not TOML
    (nesting too deep for the parser included)."""
    try:
        return tomllib.loads(text)
    except ValueError as e:
        raise config_error(key, f"{where}not valid TOML: {cut(str(e), 200)}") from None
    except RecursionError:
        raise config_error(key, f"{where}not valid TOML: nested too deep (no config key is more "
                                "than a few tables deep)") from None


def parse_json(text: str, key: str = "config", where: str = "") -> Any:
    """JSON text (no object giving a key twice); ``ConfigError`` keyed ``key``
    when it is not JSON (nesting too deep for the parser included)."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except ValueError as e:
        raise config_error(key, f"{where}not valid JSON: {cut(str(e), 200)}") from None
    except RecursionError:
        raise config_error(key, f"{where}not valid JSON: nested too deep (no config key is more "
                                "than a few tables deep)") from None


def load_dict(config: ConfigLike) -> Tuple[Dict[str, Any], Optional[str]]:
    """Returns (config as a new dict, base_dir) for editing, e.g. in sweeps."""
    if isinstance(config, Mapping):
        check_json_values(config)  # before deepcopy, which recursion would stop
        return copy.deepcopy(dict(config)), None
    path = _as_path(config)
    if path is not None:
        text = _read(path)
        where = f"{path}: "
        data = parse_json(text, where=where) if _format_of(path) == "json" else parse_toml(text, where=where)
        if not isinstance(data, dict):
            raise config_error("config", f"{path}: expected a JSON object of config keys, not a {type(data).__name__}")
        check_json_values(data)
        return data, os.fspath(path.resolve().parent)
    if isinstance(config, str):
        data = parse_toml(config)
        check_json_values(data)
        return data, None
    raise TypeError(f"config must be a dict, a path or TOML text, not {type(config).__name__}")


def set_dotted(config: Dict[str, Any], key: str, value: Any) -> None:
    """Sets ``config["a"]["b"] = value`` for ``key == "a.b"``, making tables as needed."""
    parts = key.split(".")
    if not all(parts):
        raise config_error(cut(key), "not a dotted key (names separated by single dots, e.g. workload.nr_task)")
    node = config
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise config_error(cut(key), f"{cut('.'.join(parts[: i + 1]))} is not a table, so it has no keys to set")
        node = child
    node[parts[-1]] = value

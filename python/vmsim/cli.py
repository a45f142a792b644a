"""The ``vmsim`` command line."""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import stat
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, NoReturn, Optional, Sequence

from . import _api, _core, _provenance, runtables
from . import cache as _cache
from . import dask_backend as _dask
from ._config import load_dict, set_dotted
from ._progress import StderrProgress
from ._errors import cut
from ._io import STREAM, atomic_path, atomic_write_text, is_stream, output_target
from ._results import load_result
from .tables import (forced_scale_line, format_compare, format_mmtests_lru_file, format_rows, format_run, format_tree,
                     metric_names, same_figures_notes)

PROG = "vmsim"
EXIT_USAGE = 2
#: A run completed but its data check failed (the JSON is still written).
EXIT_DATA_LOST = 1


#: Most seeds of one ``compare --runs``: every run's result is kept in memory.
MAX_RUNS = _api.MAX_RUNS


class CliError(Exception):
    """A user error reported as one line, exit code 2."""


def _check_count(value: Optional[int], option: str, most: int) -> None:
    if value is not None and not 1 <= value <= most:
        raise CliError(f"{option} must be in 1..{most}, not {cut(str(value))}")


def _dump_json(obj: Any) -> str:
    """Deterministic JSON text: sorted keys, two-space indent."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _is_stdout(out: str) -> bool:
    """Whether ``out`` is '-' or names what stdout is (``/dev/stdout``, the
    terminal it prints to): then the JSON is all that is printed."""
    if out == "-":
        return True
    try:
        st, own = os.stat(out), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return not stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino, st.st_rdev) == (own.st_dev, own.st_ino, own.st_rdev)


def _write_json(obj: Any, out: str) -> None:
    text = _dump_json(obj)
    if _is_stdout(out):
        sys.stdout.write(text)
    else:
        atomic_write_text(out, text)


def _check_out(value: Optional[str], option: str = "--json", stdout: bool = True) -> None:
    """Refuses an output path that cannot be written, before any work is done;
    ``stdout``: whether '-' (stdout) is accepted."""
    if value is None or (value == "-" and stdout):
        return
    if not value.strip():
        raise CliError(f"{option}: an empty path; give a file name" + (" or '-' for stdout" if stdout else ""))
    if value == "-":
        raise CliError(f"{option}: '-' (stdout) is not accepted here; give a file name")
    p = Path(value)
    if p.is_dir():
        raise CliError(f"{option} {value}: is a folder; give a file name")
    try:
        kind, real = output_target(value)
    except _core.ConfigError as e:
        raise CliError(f"{option} {e}") from None
    if kind == STREAM:
        return
    parent = Path(real).parent
    if not parent.is_dir():
        raise CliError(f"{option} {value}: no such folder {parent}")


def _progress(args) -> Optional[StderrProgress]:
    return None if args.quiet else StderrProgress()


def _run_with_progress(args, fn, *a, **kw):
    progress = _progress(args)
    if progress is None:
        return fn(*a, progress=None, **kw)
    with progress:
        return fn(*a, progress=progress, **kw)


def _emit(result: Any, text: str, json_out: Optional[str]) -> None:
    if json_out:
        _write_json(result, json_out)
    if not (json_out and _is_stdout(json_out)):
        sys.stdout.write(text)
    # Lost data fails the command, after the JSON that shows it is written.
    if isinstance(result, dict):
        _api.check_verified(result)


def _warn_unrecorded(result: Any) -> None:
    """A warning for values a user's copy of a built-in preset changed while
    keeping the built-in's source text (the result records them as the
    user's, provenance.machines[FILE].user_changes)."""
    from ._provenance import unrecorded_changes

    found = unrecorded_changes(result) if isinstance(result, dict) else []
    if found:
        sys.stderr.write(f"{PROG}: warning: changed from the built-in preset without a source of their own "
                         f"(recorded as 'user: changed from ...'; write source = \"user: why\" to say why): "
                         f"{'; '.join(found)}\n")


def _note(note: Optional[str]) -> None:
    if note:
        sys.stderr.write(f"{PROG}: note: {note}\n")


def _print_listing(items: Dict[str, str]) -> None:
    width = max((len(n) for n in items), default=0)
    for name, description in items.items():
        print(f"{name.ljust(width)}  {description}".rstrip())


def _show_builtin(kind: str, name: str, listing: Dict[str, str]) -> int:
    text = _core.builtin_toml(kind, name)
    if text is None:
        raise CliError(f"--show: {cut(repr(name))} is not a built-in {kind}; built-in: {', '.join(listing)}")
    if kind == "machine":
        # Said where a user copies the preset: how a change stays theirs.
        sys.stdout.write(f"# The built-in preset {name}, to copy and change. A value you change: write\n"
                         f"# source = \"user: ...\" and class = \"user\" with it (no range, or one of your\n"
                         f"# own with range_reason). One changed under the built-in's source text is\n"
                         f"# recorded as \"user: changed from ...\" in results (provenance.machines), with a warning.\n"
                         f"# Keep `name` to compare with its published figures: vmsim validate --machine FILE.\n")
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def cmd_machines(args) -> int:
    if args.show is not None:
        return _show_builtin("machine", args.show, _api.machines())
    _print_listing(_api.machines())
    return 0


def cmd_experiments(args) -> int:
    if args.show is not None:
        return _show_builtin("experiment", args.show, _api.experiments())
    _print_listing(_api.experiments())
    return 0


def cmd_policies(args) -> int:
    for key, names in _core.policy_names():
        print(f"{key}: {', '.join(names)}, or a Python policy \"FILE.py:NAME\"")
    print("(docs/your-own-policy.md: writing one; docs/config.md: what each built-in is)")
    return 0


def _config_path(value: str) -> Path:
    if not value.strip():
        raise CliError("an empty config path; give a run config file (.toml or .json)")
    path = Path(value)
    if not path.exists():
        raise CliError(f"{value}: no such config file")
    if not path.is_file():
        raise CliError(f"{value}: not a regular file; a config must be one")
    return path


def cmd_run(args) -> int:
    path = _config_path(args.config)
    _check_out(args.json)
    _check_count(args.threads, "--threads", _api.MAX_THREADS)
    result = _run_with_progress(args, _api.run, path, check=False, threads=args.threads, cache=not args.no_cache)
    _warn_unrecorded(result)
    _emit(result, format_run(result, args.names, full=args.full), args.json)
    for line in _api.policy_notes(result) + _api.timed_data_notes(result):
        _note(line)
    return 0


def _compare_settings(args) -> Optional[Dict[str, Any]]:
    """``compare --set KEY=VALUE`` options as a dict (values as JSON where they parse)."""
    settings: Dict[str, Any] = {}
    for text in getattr(args, "set", None) or []:
        key, sep, _ = text.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--set expects KEY=VALUE, not {cut(repr(text))}")
        key, value = _parse_opt(text)
        _no_key_twice([*settings, key])
        settings[key] = value
    return settings or None


def _by_case(arms: List[Any]) -> List[List[Any]]:
    """Arms of an experiment with cases, grouped per case (``case/arm`` names)."""
    groups: Dict[str, List[Any]] = {}
    for name, runs in arms:
        case = name.split("/", 1)[0] if "/" in name else ""
        groups.setdefault(case, []).append((name, runs))
    return list(groups.values())


def _metric_list(args) -> Optional[List[str]]:
    return [m for m in (args.metrics or "").split(",") if m] or None


def _runs_text(groups: List[List[Any]], args, configs: Optional[Dict[str, Any]] = None) -> str:
    metrics = _metric_list(args)
    # One layout unless asked for both: LKP's, or (--full) both.
    layout = args.format or ("both" if args.full else "lkp")
    parts = []
    for arms in groups:
        if layout in ("lkp", "both"):
            parts.append(runtables.format_lkp(arms, metrics, args.min_change, names=args.names))
        if layout in ("mmtests", "both"):
            parts.append(runtables.format_mmtests(arms, metrics, args.min_change, names=args.names))
        # Arms with the same figures in every metric, whatever rows are shown.
        parts += [f"  {n}\n" for n in same_figures_notes(arms, configs)]
    return "\n".join(parts)


def _arm_metric_names(groups: List[List[Any]]) -> List[str]:
    return metric_names(*(m for arms in groups for _, runs in arms for m in runs))


def _mmtests_blocks(doc: Dict[str, Any]) -> str:
    """mmtests' lru-file-mmap-read rows of a saved compare result, per case."""
    cases = doc.get("cases")
    if isinstance(cases, dict):
        parts = [(c, cases[c]) for c in (doc.get("case_order") or sorted(cases)) if isinstance(cases.get(c), dict)]
    else:
        parts = [(None, doc)]
    out = ""
    for case, result in parts:
        block = format_mmtests_lru_file(result)
        if block:
            out += "\n" + (f"case: {case}\n" if case else "") + block
    return out


def _compare_saved(args, files: List[str]) -> int:
    results = []
    for f in files:
        p = Path(f)
        if not p.exists():
            raise CliError(f"{f}: no such result file")
        doc = load_result(p)
        if doc.get("kind") == "sweep":
            raise CliError(f"{f}: a sweep result has no arms to compare; vmsim plot shows it")
        results.append((p.stem, doc))
    warning = runtables.mismatch_warning(results)
    if warning:
        sys.stderr.write(f"{PROG}: warning: {warning}\n")
    if args.base is not None:
        if len(results) > 1:
            raise CliError("--base applies to one result's arms; with several files the first file is the base")
        results = [(label, _rebase(doc, args.base)) for label, doc in results]
    try:
        groups = runtables.saved_arms(results)
    except ValueError as e:
        raise CliError(str(e)) from None
    metrics = _metric_list(args)
    if metrics:
        _api.check_metric_names(metrics, _arm_metric_names(groups), "--metrics")
    text = "\n".join(_runs_text(_by_case(arms) if len(results) == 1 else [arms], args) for arms in groups)
    if len(results) == 1:
        text += _mmtests_blocks(results[0][1])
    sys.stdout.write(f"compared: {', '.join(files)} (base: {files[0]})\n\n" + text)
    return 0


def _rebase(result: Dict[str, Any], base: str) -> Dict[str, Any]:
    from .tables import rebase

    try:
        return rebase(result, base)
    except ValueError as e:
        raise CliError(f"--base: {e}") from None


def _check_base(experiment: str, settings: Any, scale: Any, base: Optional[str]) -> None:
    """Refuses a --base that names no arm of the experiment, before anything runs."""
    if base is None:
        return
    try:
        plan = _api.experiment_plan(experiment, scale, 0, settings)
    except (_core.VmsimError, OSError, ValueError):
        return  # the run says what is wrong
    names: List[str] = []
    for case in plan["cases"]:
        names += [a["name"] for a in case["arms"] if a["name"] not in names]
    if base not in names:
        raise CliError(f"--base: {cut(repr(base))} is not an arm of {experiment}; accepted: {', '.join(names)}")


def cmd_compare(args) -> int:
    items = args.experiment
    if not (math.isfinite(args.min_change) and args.min_change >= 0):
        raise CliError(f"--min-change must be a finite number of at least 0 (percent), not {args.min_change}")
    if len(items) > 1 or items[0].endswith(".json"):
        if not all(i.endswith(".json") for i in items):
            raise CliError("compare takes one experiment (name or .toml), or one or more saved .json results")
        given = [opt for opt, on in (("--runs", args.runs != 1), ("-j/--jobs", args.jobs is not None),
                                     ("--full", args.full),
                                     ("--threads", args.threads is not None), ("--scale", args.scale is not None),
                                     ("--seed", args.seed is not None), ("--set", bool(args.set)),
                                     ("--force-scale", args.force_scale),
                                     ("--json", args.json is not None), ("--scheduler", args.scheduler is not None),
                                     ("--workers", args.workers is not None), ("--no-cache", args.no_cache)) if on]
        if given:
            raise CliError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to running an experiment, "
                           "not to saved results")
        return _compare_saved(args, items)
    experiment = items[0]
    looks_like_file = experiment.endswith((".toml", ".json")) or os.sep in experiment
    if looks_like_file and not Path(experiment).exists():
        raise CliError(f"{experiment}: no such experiment file")
    if looks_like_file and not Path(experiment).is_file():
        raise CliError(f"{experiment}: not a regular file; an experiment must be one")
    _check_count(args.runs, "--runs", MAX_RUNS)
    _check_count(args.jobs, "-j/--jobs", _api.MAX_THREADS)
    _check_count(args.threads, "--threads", _api.MAX_THREADS)
    _check_out(args.json)
    seed = _api.check_seed(0 if args.seed is None else args.seed)
    settings = _api.check_set(experiment, _compare_settings(args))
    # Below the experiment's smallest valid scale: refused before anything
    # runs, or (--force-scale) run and marked.
    forced = _api.check_min_scale(experiment, args.scale, settings, args.force_scale)
    _check_base(experiment, settings, args.scale, args.base)
    metrics = _metric_list(args)
    # Checked before anything runs where the arms' configs tell the names;
    # otherwise against the result, before it is shown.
    known = _api.experiment_metric_names(experiment, settings, args.scale) if metrics else None
    if known is not None:
        _api.check_metric_names(metrics, known, "--metrics")
    # A valid scale below the quick scale: said under the answer it qualifies.
    note = None if forced else _api.quick_scale_note(experiment, args.scale)
    _dask.check_engine(args.scheduler, args.workers, args.jobs)
    if args.runs == 1:
        with _dask.engine(args) as executor:
            result = _run_with_progress(args, _api.compare, experiment, scale=args.scale, seed=seed, check=False,
                                        set=settings, threads=args.threads, force_scale=args.force_scale,
                                        executor=executor, cache=not args.no_cache)
        shown = _rebase(result, args.base) if args.base is not None else result
        groups = _by_case(runtables.arms_of(shown))
        if metrics and known is None:
            _api.check_metric_names(metrics, _arm_metric_names(groups), "--metrics")
        _warn_unrecorded(result)
        tailored = args.min_change or metrics or args.format
        text = format_compare(shown, args.names, full=args.full)
        if tailored:
            text = ((forced_scale_line(result) + "\n\n" if forced else "")
                    + _runs_text(groups, args, runtables.arm_configs(shown)))
        _emit(result, text, args.json)
        _note(note)
        from .ledger import regime_notes

        for line in regime_notes(result) + _api.policy_notes(result) + _api.timed_data_notes(result):
            _note(line)
        return 0
    with _dask.engine(args) as executor:
        doc = _run_with_progress(args, _api.compare, experiment, scale=args.scale, seed=seed, check=False,
                                 set=settings, threads=args.threads, force_scale=args.force_scale, runs=args.runs,
                                 jobs=args.jobs, executor=executor, cache=not args.no_cache)
    _warn_unrecorded(doc)
    seeds = doc["seeds"]
    head = f"experiment: {doc['experiment']} — {doc['description']}\nseeds: {seeds[0]}..{seeds[-1]} ({len(seeds)} runs per arm)\n\n"
    if forced:
        head = forced_scale_line(doc) + "\n" + head
    shown = _rebase(doc, args.base) if args.base is not None else doc
    groups = _by_case(runtables.arms_of(shown))
    if metrics and known is None:
        _api.check_metric_names(metrics, _arm_metric_names(groups), "--metrics")
    if args.full or args.format or metrics or args.min_change:
        body = _runs_text(groups, args, runtables.arm_configs(shown))
    else:
        configs = runtables.arm_configs(shown)
        body = "\n".join(runtables.format_compact(arms, args.names, configs) for arms in groups)
    _emit(doc, head + body, args.json)
    _note(note)
    said: List[str] = []
    for r in doc["runs"]:
        # Each seed's notes, each said once (the seeds usually agree).
        for line in _api.policy_notes(r) + _api.timed_data_notes(r):
            if line not in said:
                said.append(line)
                _note(line)
    for r in doc["runs"]:
        _api.check_verified(r)
    return 0


def cmd_reproduce(args) -> int:
    from .reproduce import reproduce

    _check_count(args.threads, "--threads", _api.MAX_THREADS)
    _dask.check_engine(args.scheduler, args.workers)
    with _dask.engine(args) as executor:
        results = _run_with_progress(args, reproduce, args.out, only=args.only, scale=args.scale, seed=args.seed,
                                     threads=args.threads, force_scale=args.force_scale, executor=executor,
                                     cache=not args.no_cache)
    sys.stdout.write(f"wrote {len(results)} experiment(s) to {args.out}: README.md and, per experiment, .json, .txt, .png\n")
    return 0


def _parse_opt(text: str) -> tuple:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise CliError(f"--opt expects KEY=VALUE, not {cut(repr(text))}")
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    except RecursionError:
        raise CliError(f"{cut(key.strip())}: {cut(value)} is nested too deep; no config value is") from None
    return key.strip(), parsed


def cmd_hw(args) -> int:
    opts: Dict[str, Any] = {}
    for text in args.opt or []:
        key, value = _parse_opt(text)
        set_dotted(opts, key, value)
    if args.command == "validate":
        from .hw_validate import validate

        _check_out(args.json)
        result = validate(quiet=bool(args.quiet), **opts)
        _emit(result, result["table"], args.json)
        return 0
    _check_out(args.json)
    raw = _core.hw_run(args.command, json.dumps(opts), bool(args.quiet))
    result = json.loads(raw)
    _emit(result, result["table"] if "table" in result else format_tree(result), args.json)
    return 0


def cmd_validate(args) -> int:
    from .model_validate import validate_model

    _check_out(args.json)
    result = validate_model(args.machine)
    _emit(result, result["table"], args.json)
    return 0


def cmd_ledger(args) -> int:
    from . import ledger as _ledger

    _check_out(args.json)
    if args.from_dir:
        results = _ledger.load_results(args.from_dir)
    else:
        say = None if args.quiet else (lambda exp: sys.stderr.write(f"{PROG}: ledger: {exp}\n"))
        results = _ledger.run_experiments(threads=args.threads, progress=say)
    led = _ledger.ledger(results, _ledger.fingerprint())
    if args.write:
        _ledger.write_docs(led, measured=_ledger.results_date(args.from_dir) if args.from_dir else None)
    _emit(led, _ledger.format_markdown(led), args.json)
    return 0


def _parse_grid_item(text: str) -> tuple:
    key, sep, values = text.partition("=")
    if not sep or not key:
        raise CliError(f"--set expects KEY=V1,V2,..., not {cut(repr(text))}")
    values = values.strip()
    if values.startswith("["):
        try:
            parsed = json.loads(values)
        except ValueError:
            raise CliError(f"--set {cut(key)}: not a JSON list: {cut(values)}") from None
        except RecursionError:
            raise CliError(f"--set {cut(key)}: {cut(values)} is nested too deep; no config value is") from None
        if not isinstance(parsed, list):
            raise CliError(f"--set {cut(key)}: not a JSON list: {cut(values)}")
    else:
        parsed = [_parse_opt(f"{key}={v}")[1] for v in values.split(",")]
    if not parsed:
        raise CliError(f"--set {cut(key)}: no values")
    return key.strip(), parsed


def _no_key_twice(keys: Sequence[str], option: str = "--set") -> None:
    """Refuses a key given twice (or a key and a table holding it): the last
    would win without a word."""
    seen: List[str] = []
    for key in keys:
        for other in seen:
            if key == other or key.startswith(other + ".") or other.startswith(key + "."):
                same = "is given twice" if key == other else f"and {cut(other)} overlap (one is inside the other)"
                raise CliError(f"{option} {cut(key)}: {same}; give each key once")
        seen.append(key)


def _load_resume(out: Optional[str], grid: Dict[str, Any], path: Path) -> List[Dict[str, Any]]:
    if not out or out == "-" or is_stream(out):
        raise CliError("--resume needs --json FILE (a regular file): the sweep output to resume")
    p = Path(out)
    if not p.exists():
        return []  # nothing to resume yet: a fresh start
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except ValueError as e:
        raise CliError(f"--resume {out}: not a sweep result ({cut(str(e), 120)})") from None
    except RecursionError:
        raise CliError(f"--resume {out}: not a sweep result (nested too deep)") from None
    if not isinstance(doc, dict) or doc.get("kind") != "sweep":
        raise CliError(f"--resume {out}: not a sweep result")
    base, _ = load_dict(path)
    if doc.get("config") != base:
        raise CliError(f"--resume {out}: written by a sweep of another config or grid (its base config differs); "
                       "give a new --json file")
    why = _api.grid_extension_problem(doc.get("grid"), grid)
    if why:
        raise CliError(f"--resume {out}: written by a sweep of another config or grid ({why}); "
                       "a resumed sweep keeps the keys and may only add values; give a new --json file")
    return [r for r in doc.get("rows", []) if isinstance(r, dict)]


def _write_table(rows: List[Dict[str, Any]], keys: Sequence[str], out: str, fmt: str) -> None:
    try:
        import pandas as pd
    except ImportError:
        raise CliError(f"--{fmt} needs pandas: pip install 'vmsim[full]'") from None
    df = pd.DataFrame(rows, columns=_api.sweep_columns(rows, keys))
    with atomic_path(out) as tmp:
        if fmt == "csv":
            df.to_csv(tmp, index=False)
        else:
            try:
                df.to_parquet(tmp, index=False)
            except ImportError:
                raise CliError("--parquet needs pyarrow: pip install 'vmsim[full]'") from None


def cmd_sensitivity(args) -> int:
    from . import sensitivity as _sens

    experiment = args.experiment
    looks_like_file = experiment.endswith(".toml") or os.sep in experiment
    if looks_like_file and not Path(experiment).is_file():
        raise CliError(f"{experiment}: no such experiment file")
    _check_count(args.jobs, "-j/--jobs", _api.MAX_THREADS)
    _check_count(args.threads, "--threads", _api.MAX_THREADS)
    if args.top is not None and args.top < 1:
        raise CliError(f"--top must be at least 1, not {args.top}")
    _check_out(args.json)
    _check_out(args.plot, "--plot", stdout=False)
    params = [p.strip() for p in (args.params or "").split(",") if p.strip()] or None
    if args.write:
        given = [o for o, on in (("--metrics", args.metrics), ("--scale", args.scale),
                                 ("--seed", args.seed)) if on is not None]
        if given or experiment not in _api.experiments():
            raise CliError("--write stores a built-in experiment's screening at its quick scale, seed 0: "
                           + (f"not with {', '.join(given)}" if given else f"{experiment} is not built in"))
        if params and experiment not in _sens.load_screenings():
            raise CliError(f"--write with --params updates a stored screening, and {experiment} has none yet: "
                           "screen it in full first")
    _dask.check_engine(args.scheduler, args.workers, args.jobs)
    with _dask.engine(args) as executor:
        doc = _run_with_progress(args, _sens.screen, experiment, scale=args.scale, seed=args.seed or 0,
                                 params=params, metrics=_metric_list(args), jobs=args.jobs, threads=args.threads,
                                 executor=executor, cache=not args.no_cache)
    if args.plot:
        from .plot import plot_tornado

        plot_tornado(doc, args.plot, top=args.top or 10)
    if args.write:
        _sens.write_docs(_sens.merge(_sens.load_screenings()[experiment], doc) if params else doc)
    _emit(doc, _sens.format_table(doc, args.top or 10), args.json)
    return 0


def cmd_sweep(args) -> int:
    path = _config_path(args.config)
    _check_count(args.jobs, "-j/--jobs", _api.MAX_THREADS)
    _check_out(args.json)
    _check_out(args.csv, "--csv", stdout=False)
    _check_out(args.parquet, "--parquet", stdout=False)
    items = [_parse_grid_item(item) for item in args.set]
    _no_key_twice([k for k, _ in items])
    grid = dict(items)
    done = _load_resume(args.json, grid, path) if args.resume else []
    jobs = args.jobs or _api.default_threads()
    progress = _progress(args)
    t0 = time.monotonic()

    def document(rows: List[Dict[str, Any]], complete: bool) -> Dict[str, Any]:
        doc = _api.sweep_document(grid, path, rows, host_seconds=time.monotonic() - t0)
        doc["complete"] = complete
        return doc

    def write_partial(rows: List[Dict[str, Any]]) -> None:
        # Results are on disk as each point finishes: an interrupted sweep resumes from here.
        if args.json and not is_stream(args.json):
            _write_json(document(rows, False), args.json)

    # Every point, and the metrics asked for, are checked before any runs,
    # so a bad value stops nothing half-way.
    points = _api.sweep_points(grid, path)
    jobs = min(jobs, max(1, len(points)))  # a worker per point at most
    metrics = [m for m in (args.metrics or "").split(",") if m] or ["throughput_bytes_per_s", "elapsed_s"]
    _api.check_metric_names(metrics, _api.sweep_metric_names(grid, path), "--metrics")
    _dask.check_engine(args.scheduler, args.workers, args.jobs)
    with _dask.engine(args) as client:
        executor = client if client is not None else _api.process_pool(jobs)
        try:
            kw = dict(keep_going=True, done=done, on_row=write_partial, cache=not args.no_cache)
            if progress is None:
                rows = _api.sweep_rows(grid, path, executor, **kw)
            else:
                with progress:
                    rows = _api.sweep_rows(grid, path, executor, progress=progress, **kw)
        finally:
            if client is None:
                executor.shutdown(wait=True, cancel_futures=True)
    sweep_doc = document(rows, True)
    _warn_unrecorded(sweep_doc)
    shown = [{k: row.get(k) for k in list(grid) + metrics + (["error"] if row.get("status") == "failed" else [])} for row in rows]
    text = "\n".join(format_rows(shown, metrics, args.names)) + "\n"
    _emit(sweep_doc, text, args.json)
    if args.csv:
        _write_table(rows, list(grid), args.csv, "csv")
    if args.parquet:
        _write_table(rows, list(grid), args.parquet, "parquet")
    failed = [r for r in rows if r.get("status") == "failed"]
    if failed:
        _error(f"{len(failed)} of {len(rows)} sweep point(s) failed (see their 'error' above); the others ran")
        return 1
    return 0


def cmd_plot(args) -> int:
    from . import plot

    path = Path(args.result)
    if not path.exists():
        raise CliError(f"{args.result}: no such result file")
    out = Path(args.out)
    if not args.out.strip():
        raise CliError("--out: an empty path; give an image file or a folder")
    if out.is_dir():
        out = out / f"{path.stem}.png"
    _check_out(str(out), "--out", stdout=False)
    result = load_result(path)
    metrics = [m for m in (args.metrics or "").split(",") if m] or None
    try:
        written = plot.plot(result, out, metrics=metrics, x=args.x, style=args.style)
    except plot.PlotError as e:
        raise CliError(f"{args.result}: {e}") from None
    if not args.quiet:
        sys.stdout.write(f"wrote {', '.join(str(w) for w in written)}\n")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's error form: one line on stderr, exit 2 (the
    usage block would bury the message; ``--help`` still shows it)."""

    def error(self, message: str) -> NoReturn:
        sub = self.prog[len(PROG):].strip()
        where = f"{sub}: " if sub else ""
        sys.stderr.write(f"{PROG}: error: {where}{' '.join(message.split())} (see {self.prog} --help)\n")
        sys.exit(EXIT_USAGE)


def _scale_arg(text: str) -> float:
    """A scale as a number or a fraction (``0.0625``, ``1/16``): the docs
    write scales as fractions."""
    num, slash, den = text.partition("/")
    try:
        value = float(num) / float(den) if slash else float(text)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number or a fraction such as 1/16") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: a scale must be a positive finite number")
    return value


def plot_styles() -> Sequence[str]:
    """The figure styles of ``vmsim plot`` (the plot module's, without
    importing matplotlib)."""
    return ("screen", "paper")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Deterministic simulator of the Linux memory-management fast paths.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_core.__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true", help="show no progress on stderr")
    named = argparse.ArgumentParser(add_help=False)
    named.add_argument("--names", choices=["vmsim", "lkp"], default="vmsim",
                       help="metric names in the tables: vmsim's (default) or LKP's namespaced ones where LKP has "
                            "the same quantity (vm-scalability.throughput, perf-stat.*, proc-vmstat.*; docs/metrics.md); "
                            "the JSON keeps vmsim's")
    sub = parser.add_subparsers(dest="cmd", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("machines", help="list the built-in machine presets")
    p.add_argument("--show", metavar="NAME", help="print the preset as TOML (every parameter with its source), to copy and change")
    p.set_defaults(func=cmd_machines)
    p = sub.add_parser("experiments", help="list the built-in experiments")
    p.add_argument("--show", metavar="NAME", help="print the experiment as TOML, to copy and change")
    p.set_defaults(func=cmd_experiments)

    p = sub.add_parser("policies", help="list the kernel policy hooks and their built-in policies")
    p.set_defaults(func=cmd_policies)

    p = sub.add_parser("run", parents=[common, named], help="run one simulation from a run config")
    p.add_argument("config", metavar="CONFIG", help="run config (.toml or .json)")
    p.add_argument("--json", metavar="OUT", help="also write the full result as JSON to OUT ('-' for stdout only)")
    p.add_argument("--full", action="store_true",
                   help="every metric (default: the workload's headline metrics, the times and the key counters "
                        "that are not zero)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="host threads for a windowed run (sim.window_cycles), at most one per socket "
                        "(default: one per CPU); results do not depend on it")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor write the result cache (vmsim cache path shows where it is)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("compare", parents=[common, named], help="run an experiment: baseline and variants side by side")
    p.add_argument("experiment", metavar="NAME|FILE", nargs="+",
                   help="built-in experiment name or experiment TOML; or saved result JSON files (the first is the base)")
    p.add_argument("--runs", type=int, default=1, metavar="N",
                   help="run N seeds (SEED..SEED+N-1) per arm and show mean ±stddev with significance (default 1)")
    p.add_argument("-j", "--jobs", type=int, help="worker processes for --runs (default: one per CPU this process may use)")
    p.add_argument("--full", action="store_true",
                   help="every metric not zero in every run; with --runs, every metric that changes, in LKP's and "
                        "mmtests' layouts (default: a compact table of the workload's headline metrics, the times "
                        "and the key counters that are not zero, with --runs the significance result)")
    p.add_argument("--base", metavar="ARM",
                   help="the arm to compare the others with, and --runs' statistics to test against "
                        "(default: the experiment's baseline)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="host threads: arms simulated at once, and threads left over spread windowed runs' "
                        "sockets (default: one per CPU, shared among --runs workers); results do not depend on it")
    p.add_argument("--min-change", type=float, default=0.0, metavar="PCT",
                   help="show only metrics that change by at least PCT percent")
    p.add_argument("--metrics", metavar="M1,M2", help="metrics to show (default: every one that changes)")
    p.add_argument("--format", choices=["lkp", "mmtests", "both"],
                   help="LKP or mmtests tables, or both (default: LKP's, both with --runs N --full; a single run "
                        "given none of --format, --metrics and --min-change prints the plain compare table)")
    p.add_argument("--scale", type=_scale_arg, help="memory scale factor, a number or a fraction such as 1/16 (overrides the experiment's)")
    p.add_argument("--force-scale", action="store_true",
                   help="run even below the experiment's smallest valid scale (refused without it); "
                        "the result is marked scale_forced")
    p.add_argument("--seed", type=int, help="random seed (default 0)")
    p.add_argument("--json", metavar="OUT", help="also write the full result as JSON to OUT ('-' for stdout only)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="set a config key for every arm (repeatable), e.g. kernel.page_alloc_shuffle=true")
    _dask.add_options(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("reproduce", parents=[common], help="run every built-in experiment into a results folder")
    p.add_argument("--out", default="results", metavar="DIR", help="folder to write (default: results)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="just these experiments")
    p.add_argument("--scale", type=_scale_arg, help="memory scale factor for every experiment")
    p.add_argument("--force-scale", action="store_true",
                   help="run even below an experiment's smallest valid scale (refused without it); "
                        "its result is marked scale_forced")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="arms simulated at once, one host thread each (default: one per CPU)")
    _dask.add_options(p)
    p.set_defaults(func=cmd_reproduce)

    p = sub.add_parser("hw", parents=[common], help="measure the real clear/copy routines on this host")
    p.add_argument("command", choices=["clear", "copy", "pf-test", "calibrate", "microbench", "store-sweep", "validate"])
    p.add_argument("--opt", action="append", metavar="KEY=VALUE",
                   help="option for the measurement (VALUE parsed as JSON if it parses); repeatable")
    p.add_argument("--json", metavar="OUT", help="also write the full result as JSON to OUT ('-' for stdout only)")
    p.set_defaults(func=cmd_hw)

    p = sub.add_parser("validate", parents=[common],
                       help="microbenchmarks on each preset's model beside published measurements")
    p.add_argument("--machine", metavar="NAME|FILE.toml",
                   help="one preset (default: every preset with references), or a preset file copied from a "
                        "built-in preset, measured against that preset's published figures")
    p.add_argument("--json", metavar="OUT", help="also write the rows as JSON to OUT ('-' for stdout only)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("ledger", parents=[common],
                       help="each experiment's baseline in absolute terms beside the old kernel's, its change "
                            "in terms, and the regime of each run (docs/validation.md)")
    p.add_argument("--from", dest="from_dir", metavar="DIR",
                   help="take the experiments' results from DIR/<experiment>.json (vmsim compare --json) "
                        "instead of running them")
    p.add_argument("--threads", type=int, metavar="N", help="host threads for the compares (default: one per CPU)")
    p.add_argument("--write", action="store_true",
                   help="write docs/ledger.json, the ledger's section of docs/validation.md and README's "
                        "trust table (make ledger), dated by the results (with --from, the newest file's day)")
    p.add_argument("--json", metavar="OUT", help="also write the ledger as JSON to OUT ('-' for stdout only)")
    p.set_defaults(func=cmd_ledger)

    p = sub.add_parser("sensitivity", parents=[common],
                       help="how far an experiment's headline moves over its machines' unsettled values "
                            "(one at a time, each over its plausible range)")
    p.add_argument("experiment", metavar="NAME|FILE", help="built-in experiment name or experiment TOML")
    p.add_argument("--params", metavar="P1,P2",
                   help="only these values: KEY or MACHINE:KEY, shell wildcards allowed (e.g. 'l2.*', "
                        "'epyc-7j13-milan:llc.replacement'); default: every value of the experiment's machines "
                        "with a plausible range")
    p.add_argument("--metrics", metavar="M1,M2",
                   help="headline metrics, their change in every variant (default: the experiment's published "
                        "figures' case, arm and metric)")
    p.add_argument("--scale", type=_scale_arg,
                   help="memory scale factor (default: the experiment's quick scale, else its own)")
    p.add_argument("--seed", type=int, help="random seed (default 0)")
    p.add_argument("-j", "--jobs", type=int, help="worker processes (default: one per CPU this process may use)")
    p.add_argument("--threads", type=int, metavar="N", help="host threads per worker (default: its share of the CPUs)")
    p.add_argument("--top", type=int, metavar="N", help="rows per headline in the table and plot (default 10)")
    p.add_argument("--plot", metavar="FILE", help="also draw the tornado plot to FILE (.png, .pdf or .svg; needs matplotlib)")
    p.add_argument("--json", metavar="OUT", help="also write the screening as JSON to OUT ('-' for stdout only)")
    p.add_argument("--write", action="store_true",
                   help="for a built-in experiment at its quick scale and seed 0 (no --metrics, --scale or --seed): "
                        "store its screening as docs/sensitivity/NAME.json (with --params, those values' rows "
                        "replace theirs in the stored one) and remake docs/sensitivity.md and README's trust table")
    _dask.add_options(p)
    p.set_defaults(func=cmd_sensitivity)

    p = sub.add_parser("sweep", parents=[common, named], help="run a config over a grid of values (process pool)")
    p.add_argument("config", metavar="CONFIG", help="base run config (.toml or .json)")
    p.add_argument("--set", action="append", required=True, metavar="KEY=V1,V2,...",
                   help="dotted config key and its values (each parsed as JSON if it parses, "
                        "or a JSON list); repeatable, the grid is the product")
    p.add_argument("--metrics", metavar="M1,M2", help="metrics to show (default: throughput_bytes_per_s,elapsed_s)")
    p.add_argument("-j", "--jobs", type=int, help="worker processes (default: one per CPU this process may use)")
    p.add_argument("--json", metavar="OUT", help="also write all rows (every scalar metric) as JSON to OUT ('-' for stdout only); "
                                                 "rewritten as each point finishes")
    p.add_argument("--resume", action="store_true", help="run only the points that --json OUT does not already hold")
    p.add_argument("--csv", metavar="FILE", help="also write the rows as CSV (needs pandas)")
    p.add_argument("--parquet", metavar="FILE", help="also write the rows as Parquet (needs pandas and pyarrow: the full extra)")
    _dask.add_options(p)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("plot", parents=[common], help="plot a result JSON (needs matplotlib)")
    p.add_argument("result", metavar="RESULT.json")
    p.add_argument("--out", required=True, metavar="FILE.png|DIR",
                   help="image file to write (.png, .pdf or .svg), or a folder to write RESULT.png into")
    p.add_argument("--metrics", metavar="M1,M2", help="metrics to plot (default: the headline ones)")
    p.add_argument("--x", metavar="KEY", help="for a sweep: the swept key on the x axis (default: the first one other than seed)")
    p.add_argument("--style", choices=sorted(plot_styles()), default="screen",
                   help="screen (default) or paper: one column of a two-column paper, 3.5 in wide, 7-point text "
                        "(give --out FILE.pdf or .svg for vector output)")
    p.set_defaults(func=cmd_plot)
    _cache.add_command(sub)
    return parser


def _error(message: str) -> int:
    message = " ".join(str(message).split())  # one line
    sys.stderr.write(f"{PROG}: error: {message}\n")
    return EXIT_USAGE


def _on_sigterm(signum, frame) -> None:
    """SIGTERM (a job scheduler, ``timeout``, ``kill``) stops the command as
    Ctrl-C does: pool workers stopped, partial outputs left whole."""
    raise KeyboardInterrupt("SIGTERM")


def _signal_handlers(old: Dict[int, Any]) -> None:
    """Puts the command's SIGINT and SIGTERM handling in place (a signal the
    caller ignores stays ignored), recording in `old` each handler as it is
    replaced: a Ctrl-C right after SIGINT's is in place interrupts this, and
    the caller restores what was replaced so far."""
    for sig, handler in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, _on_sigterm)):
        try:
            current = signal.getsignal(sig)
            if current is not signal.SIG_IGN:
                old[sig] = current
                signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread: left as they are
            old.pop(sig, None)


def main(argv: Optional[Sequence[str]] = None) -> int:
    old_handlers: Dict[int, Any] = {}
    try:
        # Inside the try: SIGINT raises KeyboardInterrupt from the moment its
        # handler is in place, before SIGTERM's is.
        _signal_handlers(old_handlers)
        return _main(argv)
    except KeyboardInterrupt as e:
        return _interrupted(e)
    finally:
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def _interrupted(e: KeyboardInterrupt) -> int:
    if e.args and e.args[0] == "SIGTERM":
        # Stopped cleanly on SIGTERM: die of it, as the sender expects.
        sys.stderr.write(f"{PROG}: terminated\n")
        sys.stderr.flush()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return 143
    sys.stderr.write(f"\n{PROG}: interrupted\n")
    return 130


def _main(argv: Optional[Sequence[str]] = None) -> int:
    if sys.stdout is None or sys.stderr is None:
        # Started with a closed stdout or stderr (>&-): a file opened now
        # could take its descriptor, and output meant for it would land there.
        if sys.stderr is not None:
            sys.stderr.write(f"{PROG}: error: started with stdout closed; give it one (e.g. >/dev/null)\n")
        return EXIT_USAGE
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = int(args.func(args) or 0)
        # Output still buffered would meet a closed stdout at exit, past the
        # BrokenPipeError handler below.
        sys.stdout.flush()
        return code
    except CliError as e:
        return _error(str(e))
    except _core.HwUnsupportedError as e:
        return _error(f"not supported on this host: {e}")
    except _core.DataVerificationError as e:
        _error(f"data verification failed: {e}")
        return EXIT_DATA_LOST
    except _core.VmsimError as e:
        return _error(str(e))
    except BrokenPipeError:
        # stdout closed early (e.g. piped into head): no message. Python's
        # recipe: point stdout at devnull, or its flush at exit raises again.
        # What was left to do (later output files, the data check) did not
        # happen, so the status is that of a process killed by SIGPIPE.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except FileNotFoundError as e:
        return _error(f"{cut(str(e.filename or e), 300)}: no such file")
    except OSError as e:
        return _error(f"{cut(str(e.filename), 300)}: {e.strerror}" if e.filename and e.strerror else cut(str(e), 300))
    except ImportError as e:
        return _error(str(e))
    except ValueError as e:
        # Bad values that surface below the CLI's own checks.
        return _error(str(e))
    except KeyboardInterrupt as e:
        return _interrupted(e)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""``vmsim sensitivity``: how far an experiment's headline moves over the
plausible ranges of the preset values no source or measurement settles.

The screening is one-at-a-time: each screened value is set to each end of
its range (or to each alternative of a choice) with every other value at
the preset's, and the experiment's headline changes are read at each end.
It takes at most 1 + 2k compares for k numeric values (a Morris screening with r
trajectories takes r(k + 1), r at least 4 for its mean and spread to mean
anything), and gives directly what a tornado table shows: the headline at
each end of each range. It does not see interactions: the range it reports
for a prediction is the envelope of single-value moves, not a joint one.

A screened value is one whose class is judgement, copied or calibrated, or
a user's value given with a range. Only the cases run on a value's machine
are re-run for it (the experiment is restricted to them); every run goes
through the result cache, so a repeated screening, or one that shares runs
with a compare, simulates only what it has not.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import pathlib
import re
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from . import _api, _core
from ._config import parse_toml
from ._errors import config_error, cut

#: Classes whose values a screening varies (a user's value only with a range).
SCREENED = ("calibrated", "judgement", "copied", "user")

#: The least swing, in percentage points, that counts as moving a headline:
#: below it the tables, which show one decimal, would print 0.0.
MOVES = 0.05


def moves(row: Dict[str, Any]) -> bool:
    """Whether a tornado row moves its headline visibly (``MOVES``)."""
    return row["swing"] >= MOVES


@dataclass
class Param:
    """One screened preset value."""

    machine: str  # the preset's name
    ref: str  # the machine reference the experiment's configs give (a name, or a file)
    key: str  # the dotted preset key, e.g. l2.superqueue
    klass: str
    value: Any
    points: List[Any]
    reason: str
    source: str
    cases: List[Optional[str]] = field(default_factory=list)
    #: Per point, the values set with it (the preset's ``range_with``; {} for none).
    with_: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.ref}:{self.key}"


def _experiment_text(experiment: str) -> Tuple[str, Optional[str]]:
    """The experiment's TOML text and the folder its relative paths are from."""
    if os.path.isfile(experiment):
        with open(experiment, encoding="utf-8") as f:
            return f.read(), os.path.dirname(os.path.abspath(experiment))
    text = _core.builtin_toml("experiment", experiment)
    if text is None:
        raise config_error("experiment", f"{cut(repr(experiment))} is neither a built-in experiment nor an experiment "
                                         f"file; built-in: {', '.join(_api.experiments())}")
    return text, None


def _machines(plan: Dict[str, Any]) -> Dict[str, List[Optional[str]]]:
    """Machine reference -> the cases run on it, in the plan's order."""
    out: Dict[str, List[Optional[str]]] = {}
    for case in plan["cases"]:
        refs = {arm["config"]["machine"] for arm in case["arms"]}
        for ref in sorted(refs):
            out.setdefault(ref, []).append(case["name"])
    return out


def parameters(experiment: str, scale: Optional[float] = None,
               patterns: Optional[Sequence[str]] = None) -> List[Param]:
    """The values a screening of ``experiment`` varies: those of its
    machines that have a range, or, with ``patterns`` (``KEY``,
    ``MACHINE:KEY (MACHINE as the experiment names it: a preset name or file)``, shell wildcards allowed), those that match. A pattern
    matching none of them raises ``ConfigError`` keyed ``params``."""
    _, base_dir = _experiment_text(experiment)
    plan = _api.experiment_plan(experiment, scale)
    out: List[Param] = []
    known: List[str] = []
    for ref, cases in _machines(plan).items():
        preset = json.loads(_core.preset_json(ref, base_dir))
        for key, prov in sorted(preset["provenance"].items()):
            known.append(f"{ref}:{key}")
            rng = prov.get("range")
            if prov["class"] not in SCREENED or not rng:
                continue
            value = prov["value"]
            # As Provenance::screen_sets: an end equal to the value would
            # only repeat the run at the preset's values; a coupled value
            # (range_with) moves with each end.
            keep = [i for i, a in enumerate(rng) if a != value]
            coupled = prov.get("range_with") or {}
            out.append(Param(preset["name"], ref, key, prov["class"], value, [rng[i] for i in keep],
                             prov.get("range_reason", ""), preset["sources"].get(key, ""), list(cases),
                             [{k: v[i] for k, v in sorted(coupled.items())} for i in keep]))
    if patterns:
        chosen = []
        for pat in patterns:
            hit = [p for p in out if fnmatch.fnmatchcase(p.name, pat) or fnmatch.fnmatchcase(p.key, pat)]
            if not hit:
                fixed = [k for k in known if fnmatch.fnmatchcase(k, pat) or fnmatch.fnmatchcase(k.split(":", 1)[1], pat)]
                why = (f"{', '.join(fixed[:3])}{' …' if len(fixed) > 3 else ''} has no plausible range (sourced or "
                       "measured: a source settles it)" if fixed else
                       "no machine the experiment runs on has such a value (vmsim machines --show NAME lists them)")
                raise config_error("params", f"{cut(pat)} matches no screened value of {experiment}: {why}")
            chosen += [p for p in hit if p not in chosen]
        out = chosen
    return out


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("nan" if v != v else ("inf" if v > 0 else "-inf"))
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"{type(v).__name__} is not a TOML value")


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k, ensure_ascii=False)


def to_toml(doc: Dict[str, Any]) -> str:
    """``doc`` as TOML, each top-level key on one line (inline tables)."""
    return "".join(f"{_toml_key(k)} = {_toml_value(v)}\n" for k, v in doc.items())


def restricted(doc: Dict[str, Any], cases: Sequence[Optional[str]]) -> Dict[str, Any]:
    """The experiment ``doc`` with only ``cases`` (None: it has none): the
    variants limited to cases no longer there dropped, and the published
    figures of what is gone."""
    if not doc.get("cases") or None in cases:
        return doc
    d = dict(doc)
    d["cases"] = [c for c in doc["cases"] if c.get("name") in cases]
    variants = []
    for v in doc.get("variants", []):
        if "cases" in v:
            v = dict(v, cases=[c for c in v["cases"] if c in cases])
            if not v["cases"]:
                continue
        variants.append(v)
    d["variants"] = variants
    arms = {doc["baseline"]["name"]} | {v["name"] for v in variants}
    if "published" in doc:
        d["published"] = [p for p in doc["published"] if p.get("case") in cases and p.get("arm") in arms]
    return d


def headlines(result: Dict[str, Any], metrics: Optional[Sequence[str]] = None) -> Dict[Tuple, float]:
    """``(case, arm, metric) -> change in percent`` of a compare result: its
    published figures' (case, arm, metric), or, with ``metrics``, those
    metrics of every variant in every case."""
    out: Dict[Tuple, float] = {}
    cases = result.get("case_order") or [None]

    def one(case):
        return result["cases"][case] if case is not None else result

    def change(case, arm, metric):
        r = one(case)
        b, v = r["baseline"].get(metric), r["variants"].get(arm, {}).get(metric)
        if not isinstance(b, (int, float)) or not isinstance(v, (int, float)) or not b:
            return None
        return (v / b - 1) * 100

    if metrics:
        for case in cases:
            for arm in one(case).get("variant_order") or list(one(case)["variants"]):
                for m in metrics:
                    c = change(case, arm, m)
                    if c is not None:
                        out[(case, arm, m)] = c
        return out
    for p in result.get("published") or []:
        if p.get("case") in cases:
            c = change(p.get("case"), p["arm"], p["metric"])
            if c is not None:
                out[(p.get("case"), p["arm"], p["metric"])] = c
    return out


def screen(experiment: str, *, scale: Optional[float] = None, seed: int = 0,
           params: Optional[Sequence[str]] = None, metrics: Optional[Sequence[str]] = None,
           jobs: Optional[int] = None, threads: Optional[int] = None, executor: Any = None,
           progress: Optional[Callable[[str, float], None]] = None, cache: bool = True) -> Dict[str, Any]:
    """The one-at-a-time screening of ``experiment`` (a built-in name or an
    experiment file) at ``scale`` (default: its quick scale, else its own):
    ``{"kind": "sensitivity", "experiment", "scale", "seed", "method",
    "params": [...], "headlines": [...], "runs", "host_seconds"}``, each
    headline with its value at the preset's values, its range over the
    screened values and a row per value (the headline at each end), sorted
    by how far it moves the headline."""
    experiment = os.fspath(experiment)
    text, base_dir = _experiment_text(experiment)
    doc = parse_toml(text, "experiment")
    if scale is None:
        quick = _api.experiment_plan(experiment).get("quick_scale")
        scale = quick["scale"] if quick else None
    scale = _api.check_scale(scale)
    seed = _api.check_seed(seed)
    plist = parameters(experiment, scale, params)
    if not plist:
        raise config_error("params", f"{experiment} uses no preset value with a plausible range to screen")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vmsim-sensitivity-") as tmp:
        # Restricted copies of the experiment sit beside it (its relative
        # paths then resolve as from it), or in a temporary folder for a built-in.
        folder = base_dir or tmp
        written: Dict[Tuple, str] = {}
        files: List[str] = []
        specs = [{"experiment": experiment, "scale": scale, "seed": seed, "set": None, "forced": None}]
        where: List[Tuple[Param, Any]] = []
        try:
            for p in plist:
                cases = tuple(p.cases)
                if cases not in written:
                    sub = restricted(doc, p.cases)
                    if sub is doc:
                        written[cases] = experiment
                    else:
                        fd, path = tempfile.mkstemp(prefix=".vmsim-sensitivity-", suffix=".toml", dir=folder)
                        with os.fdopen(fd, "w", encoding="utf-8") as f:
                            f.write(to_toml(sub))
                        files.append(path)
                        written[cases] = path
                for end, coupled in zip(p.points, p.with_):
                    settings = {f"machine_set.{p.key}": end}
                    settings.update({f"machine_set.{k}": v for k, v in coupled.items()})
                    try:
                        _api.experiment_plan(written[cases], scale, seed, settings)
                    except _core.VmsimError as e:
                        raise config_error(f"range of {p.name}",
                                           f"{json.dumps(end)} is not a value its field accepts: "
                                           f"{getattr(e, 'message', str(e))}") from None
                    specs.append({"experiment": written[cases], "scale": scale, "seed": seed, "set": settings,
                                  "forced": None})
                    where.append((p, end))
            results = _api.compare_many(specs, executor, jobs=jobs, threads=threads, progress=progress,
                                        label=f"sensitivity {experiment}", cache=cache)
        finally:
            for path in files:
                try:
                    os.unlink(path)
                except OSError:
                    pass
    for r in results:
        _api.check_verified(r)
    nominal = headlines(results[0], metrics)
    if not nominal:
        raise config_error("metrics", f"{experiment} has no published figure to take as its headline; "
                                      "give --metrics (e.g. throughput_bytes_per_s)")
    at: Dict[Tuple[str, Any], Dict[Tuple, float]] = {}
    for (p, end), r in zip(where, results[1:]):
        at[(p.name, json.dumps(end))] = headlines(r, metrics)
    heads = []
    for h, base in nominal.items():
        rows = []
        for p in plist:
            if h[0] not in p.cases:
                continue
            ends = [dict({"value": end, "headline": at[(p.name, json.dumps(end))].get(h)},
                         **({"with": c} if c else {}))
                    for end, c in zip(p.points, p.with_)]
            got = [e["headline"] for e in ends if e["headline"] is not None]
            swing = (max(got + [base]) - min(got + [base])) if got else 0.0
            rows.append({"param": p.name, "class": p.klass, "value": p.value, "ends": ends, "swing": swing})
        rows.sort(key=lambda r: (-r["swing"], r["param"]))
        every = [e["headline"] for r in rows for e in r["ends"] if e["headline"] is not None] + [base]
        heads.append({"case": h[0], "arm": h[1], "metric": h[2], "nominal": base,
                      "low": min(every), "high": max(every), "rows": rows})
    return {
        "kind": "sensitivity", "experiment": experiment, "scale": scale, "seed": seed,
        "method": "one-at-a-time over each screened value's plausible range (ends, or alternatives)",
        "params": [dict({"param": p.name, "class": p.klass, "value": p.value, "points": p.points,
                         "range_reason": p.reason, "cases": p.cases}, **({"with": p.with_} if any(p.with_) else {}))
                   for p in plist],
        "headlines": heads, "runs": len(specs), "host_seconds": time.monotonic() - t0,
    }


def _pct(x: Optional[float]) -> str:
    return "--" if x is None else f"{x:+.1f}%"


def prediction_text(h: Dict[str, Any]) -> str:
    """``+26.4% (+21.0% to +29.0% over unsourced values)``."""
    return f"{_pct(h['nominal'])} ({_pct(h['low'])} to {_pct(h['high'])} over unsourced values, one at a time)"


def _end(e: Dict[str, Any]) -> str:
    """An end as the tables show it: ``2 (with llc.size_kib 23040)``."""
    w = e.get("with")
    extra = f" (with {', '.join(f'{k} {json.dumps(v)}' for k, v in w.items())})" if w else ""
    return json.dumps(e["value"]) + extra


def format_table(doc: Dict[str, Any], top: Optional[int] = 10) -> str:
    """The tornado tables: for each headline, its values moving it most."""
    out = [f"sensitivity of {doc['experiment']} (scale {doc['scale']}, seed {doc['seed']}): {doc['method']}; "
           f"{len(doc['params'])} values screened, {doc['runs']} compares", ""]
    for h in doc["headlines"]:
        label = "/".join(str(x) for x in (h["case"], h["arm"]) if x is not None)
        out.append(f"{label} {h['metric']}: {prediction_text(h)}")
        rows = [r for r in h["rows"] if moves(r)] or h["rows"][:1]
        shown = rows if top is None else rows[:top]
        width = max([len(r["param"]) for r in shown] + [9])
        out.append(f"  {'parameter':<{width}}  {'class':<10}  {'value':>10}  ends -> headline")
        for r in shown:
            ends = ", ".join(f"{_end(e)} -> {_pct(e['headline'])}" for e in r["ends"])
            out.append(f"  {r['param']:<{width}}  {r['class']:<10}  {json.dumps(r['value']):>10}  {ends}  "
                       f"(swing {r['swing']:.1f} points)")
        still = len(h["rows"]) - len([r for r in h["rows"] if moves(r)])
        if top is not None and len(rows) > top:
            out.append(f"  … {len(rows) - top} more that move it")
        if still:
            out.append(f"  {still} screened value(s) move it by less than {MOVES} points")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# ---------------------------------------------------------------------------
# The documents: each built-in experiment's screening as docs/sensitivity/
# NAME.json, and the page and README column made from them.

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "sensitivity"
MARKS = ("<!-- screenings -->", "<!-- /screenings -->")


def load_screenings(root: pathlib.Path = ROOT) -> Dict[str, Dict[str, Any]]:
    """The stored screenings, by experiment."""
    out = {}
    for p in sorted((root / "docs" / "sensitivity").glob("*.json")):
        doc = json.loads(p.read_text())
        out[doc["experiment"]] = doc
    return out


def current(doc: Dict[str, Any], fingerprint: Optional[Mapping[str, str]]) -> bool:
    """Whether a screening was made with the model of the ledger whose
    fingerprint is ``fingerprint`` (docs/ledger.json's, which a test keeps
    current), as far as the screened experiment goes: a built-in
    experiment's screening is current while its own fingerprint run
    (``ledger.FINGERPRINT_OF``) hashes as it did, any other while every run
    does. A screening records the fingerprint it was made at; one that
    records none was made before screenings did."""
    from .ledger import FINGERPRINT_OF

    if fingerprint is None or not doc.get("model"):
        return False
    own = FINGERPRINT_OF.get(doc.get("experiment", ""))
    keys = [own] if own else list(fingerprint)
    return all(own_key in doc["model"] and doc["model"][own_key] == fingerprint.get(own_key) for own_key in keys)


STALE = "screened with an earlier model"


def spread(screenings: Dict[str, Dict[str, Any]], exp: str, case: Optional[str], arm: str,
           metric: str, fingerprint: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """README's cell: how far the screened values move a prediction, in
    points below and above its value at the screening's scale; a
    screening made with another model than the ledger's gives no figure."""
    doc = screenings.get(exp)
    if doc is None:
        return None
    if not current(doc, fingerprint):
        return STALE
    for h in doc["headlines"]:
        if (h["case"], h["arm"], h["metric"]) == (case, arm, metric):
            movers = sum(1 for r in h["rows"] if moves(r))
            return (f"{h['low'] - h['nominal']:+.1f} / {h['high'] - h['nominal']:+.1f} points "
                    f"({movers} of {len(h['rows'])} values move it)")
    return None


def _scale_text(scale: Optional[float]) -> str:
    if scale is None:
        return "its own"
    inv = 1 / scale
    return f"1/{inv:g}" if abs(inv - round(inv)) < 1e-9 and scale < 1 else f"{scale:g}"


def format_markdown(screenings: Dict[str, Dict[str, Any]], top: int = 5,
                    fingerprint: Optional[Mapping[str, str]] = None) -> str:
    """docs/sensitivity.md's generated part: for each screened experiment,
    each headline with its envelope and the values that move it most; a
    screening made with another model than ``fingerprint``'s says so."""
    out: List[str] = []
    for exp, doc in screenings.items():
        out.append(f"### {exp}")
        out.append("")
        if not current(doc, fingerprint):
            out.append(f"*Made with an earlier model than the ledger's: the figures below are not today's "
                       f"model's, and README gives none. `vmsim sensitivity {exp} --write` remakes them.*")
            out.append("")
        out.append(f"Scale {_scale_text(doc['scale'])}, seed {doc['seed']}: {len(doc['params'])} values screened, "
                   f"{doc['runs']} compares in {doc['host_seconds'] / 60:.0f} min on the 2-CPU host.")
        out.append("")
        for h in doc["headlines"]:
            label = "/".join(str(x) for x in (h["case"], h["arm"]) if x is not None)
            out.append(f"**{label} {h['metric']}**: {prediction_text(h)}.")
            out.append("")
            out.append("| value | class | preset's | ends → headline | swing, points |")
            out.append("|---|---|---|---|---|")
            rows = [r for r in h["rows"] if moves(r)][:top]
            for r in rows:
                ends = ", ".join(f"{_end(e)} → {_pct(e['headline'])}" for e in r["ends"])
                out.append(f"| `{r['param']}` | {r['class']} | {json.dumps(r['value'])} | {ends} | "
                           f"{r['swing']:.1f} |")
            if not rows:
                out.append("| (none moves it) | | | | |")
            out.append("")
    return "\n".join(out).strip("\n") + "\n"


def write_page(fingerprint: Optional[Mapping[str, str]], root: pathlib.Path = ROOT) -> None:
    """docs/sensitivity.md's generated part, from the stored screenings
    beside the ledger's fingerprint."""
    from . import ledger

    page = root / "docs" / "sensitivity.md"
    page.write_text(ledger._between(page.read_text(), MARKS,
                                    format_markdown(load_screenings(root), fingerprint=fingerprint),
                                    "docs/sensitivity.md"))


def merge(stored: Dict[str, Any], new: Dict[str, Any]) -> Dict[str, Any]:
    """``stored`` (a full screening) with the values ``new`` screened (a
    screening of some of them, ``--params``, at the same scale and seed)
    in place of its own: their rows replaced, each headline's range and
    order remade, the runs and host time added. Refused (``ConfigError``,
    ``params``) when the two disagree on the headline at the preset's
    values: the model moved since, and only a full screening is whole."""
    if (stored["experiment"], stored["scale"], stored["seed"]) != (new["experiment"], new["scale"], new["seed"]):
        raise config_error("params", "the stored screening is of another scale or seed; screen in full")
    heads = {(h["case"], h["arm"], h["metric"]): h for h in new["headlines"]}
    names = {p["param"] for p in new["params"]}
    out = json.loads(json.dumps(stored))
    for h in out["headlines"]:
        got = heads.get((h["case"], h["arm"], h["metric"]))
        if got is None:
            continue
        if abs(got["nominal"] - h["nominal"]) > 1e-9:
            raise config_error("params", f"the headline at the preset's values is {got['nominal']:+.4f}% now and "
                                         f"{h['nominal']:+.4f}% in the stored screening: the model moved; "
                                         "screen in full")
        h["rows"] = [r for r in h["rows"] if r["param"] not in names] + got["rows"]
        h["rows"].sort(key=lambda r: (-r["swing"], r["param"]))
        every = [e["headline"] for r in h["rows"] for e in r["ends"] if e["headline"] is not None] + [h["nominal"]]
        h["low"], h["high"] = min(every), max(every)
    out["params"] = [p for p in out["params"] if p["param"] not in names] + new["params"]
    out["runs"] += new["runs"]
    out["host_seconds"] += new["host_seconds"]
    return out


def write_docs(doc: Dict[str, Any], root: pathlib.Path = ROOT) -> None:
    """Stores a built-in experiment's screening and remakes docs/sensitivity.md's
    generated part and README's trust table from the stored ones."""
    from . import ledger

    doc = dict(doc, model=ledger.fingerprint(root))
    (root / "docs" / "sensitivity").mkdir(exist_ok=True)
    (root / "docs" / "sensitivity" / f"{doc['experiment']}.json").write_text(
        json.dumps(doc, indent=1, sort_keys=True) + "\n")
    led = json.loads((root / "docs" / "ledger.json").read_text())
    write_page(led.get("fingerprint"), root)
    readme = root / "README.md"
    readme.write_text(ledger._between(readme.read_text(), ledger.MARKS["README.md"],
                                      ledger.documents(led)["README.md"], "README.md"))

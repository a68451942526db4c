"""Fidelity of the replay: per-store features of replayed programs against Ansor's own.

``DATASET/oracle/`` holds, for every record line, the 164 per-store features Ansor (TVM 0.16)
computed on its lowered program. Here the same record is replayed on today's TIR, featurized
with MetaSchedule's PerStoreFeature, and the two matrices are compared value by value.

Ansor writes one all-zero row for a program its own lowering rejected (on GPU mostly
VerifyGPUCode under the record's hardware limits): such records are not compared but counted,
and on GPU set against today's verify_gpu_code verdict on the replayed program.

Each program is featurized twice: as ``featurize`` stores it and in the Ansor
view (``per_store_features(..., ansor=True)``), which removes the differences docs/replay.md
attributes to our side; both agreements are reported.

Statements are matched by content, not by order: Ansor emits one row per written buffer in the
iteration order of a pointer-keyed hash map, so its row order carries no meaning, and the two
lowerings need not even produce the same number of rows. Rows are paired by a minimum-cost
assignment over the number of disagreeing values; unpaired rows are reported by count only.
"""

from __future__ import annotations

import json
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

import numpy as np
from scipy.optimize import linear_sum_assignment

from ..errors import BadInput
from ..features.per_store import per_store_features
from ..tenset.dataset import discover, load_task_index
from ..tenset.records import Record, read_records
from .api import replay_record
from .gpu import limit_violation
from ..targets import record_target

# Ansor's feature names (oracle/index.json) -> the group a value is reported under, in print order
_GROUP_PREFIXES = (
    ("compute", ("float_", "int_", "bool_op", "select_op")),
    ("vectorize", ("vec_",)),
    ("unroll", ("unroll_",)),
    ("parallel", ("parallel_",)),
    ("gpu_threads", ("is_gpu", "blockIdx", "threadIdx", "vthread")),
    *((f"B{i}", (f"B{i}.",)) for i in range(5)),
    ("arith_curve", ("arith_intensity_curve",)),
    ("alloc", ("alloc_",)),
    ("outer", ("outer_prod", "num_loops", "auto_unroll_max_step")),
)
GROUPS = tuple(name for name, _ in _GROUP_PREFIXES)


def group_of(feature_name: str) -> str:
    for name, prefixes in _GROUP_PREFIXES:
        if feature_name.startswith(prefixes):
            return name
    raise ValueError(f"feature {feature_name!r} belongs to no group")


class OracleMissing(FileNotFoundError):
    pass


@dataclass
class Oracle:
    """Ansor's features of one dataset, one npz per record file, loaded on first use."""

    root: Path
    feature_names: tuple[str, ...]
    _files: dict[Path, dict[str, np.ndarray]] = field(default_factory=dict)

    @classmethod
    def open(cls, dataset: Path) -> "Oracle":
        index = dataset / "oracle" / "index.json"
        if not index.is_file():
            raise OracleMissing(f"{index} not found (the oracle features of the dataset)")
        try:
            names = json.loads(index.read_text())["feature_names"]
        except (ValueError, UnicodeDecodeError, KeyError, TypeError) as exc:
            raise BadInput(f"{index}: not an oracle index with feature_names ({type(exc).__name__}: {exc})") from None
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise BadInput(f"{index}: feature_names is not a list of names")
        return cls(dataset / "oracle", tuple(names))

    def _load(self, npz: Path) -> dict[str, np.ndarray]:
        """One oracle file, checked: per record a count of stores and their rows of features."""
        try:
            with np.load(npz, allow_pickle=False) as z:
                data = {k: z[k] for k in ("n_stores", "offsets", "features")}
        except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            raise BadInput(f"{npz}: unreadable oracle file ({type(exc).__name__}: {exc})") from None
        n, offsets, feats = data["n_stores"], data["offsets"], data["features"]
        width = len(self.feature_names)
        if (n.ndim != 1 or offsets.shape != (len(n) + 1,) or offsets.dtype.kind not in "iu"
                or feats.dtype.kind != "f" or offsets[0] != 0 or (np.diff(offsets) != n * width).any()
                or feats.size != offsets[-1] or not np.isfinite(feats).all()):
            raise BadInput(f"{npz}: oracle arrays do not fit together or are not finite (n_stores {n.shape} "
                           f"{n.dtype}, offsets {offsets.shape} {offsets.dtype}, features {feats.shape} "
                           f"{feats.dtype}, {width} features a store)")
        return data

    def rows(self, dataset: Path, record_file: Path, line: int) -> Optional[np.ndarray]:
        """Ansor's [n_stores, 164] of the 1-based ``line`` of ``record_file``; None if not there."""
        if record_file not in self._files:
            npz = self.root / record_file.relative_to(dataset).with_suffix(".npz")
            self._files[record_file] = self._load(npz) if npz.is_file() else {}
        data = self._files[record_file]
        if not data or line > len(data["n_stores"]):
            return None
        lo, hi = data["offsets"][line - 1], data["offsets"][line]
        return data["features"][lo:hi].reshape(-1, len(self.feature_names))


def buffer_slots(feature_names: tuple[str, ...]) -> np.ndarray:
    """[5, 18] column indices of the buffer-access groups B0..B4."""
    return np.array([[k for k, n in enumerate(feature_names) if n.startswith(f"B{i}.")] for i in range(5)])


def align_buffer_slots(ours: np.ndarray, theirs: np.ndarray, slots: np.ndarray, tol: float) -> np.ndarray:
    """``ours`` with its B0..B4 groups permuted to agree best with ``theirs``. Both extractors
    sort a statement's accesses by cache lines, then by different tie-breaks (MetaSchedule:
    bytes, buffer name; Ansor: none, hash-map order), so equal-lines accesses land in either slot."""
    a, b = ours[slots], theirs[slots]  # [5, 18] each
    cost = (np.abs(a[:, None, :] - b[None, :, :]) > tol).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    out = ours.copy()
    out[slots[cols]] = a[rows]
    return out


def match_statements(ours: np.ndarray, theirs: np.ndarray, slots: np.ndarray,
                     tol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row pairs (i into ours, j into theirs) disagreeing on the fewest values, and our rows of
    the pairs with buffer slots aligned. The L1 distance only breaks ties, so one wildly
    different value does not outweigh many matching ones."""
    aligned = np.array([[align_buffer_slots(o, t, slots, tol) for t in theirs] for o in ours])
    diff = np.abs(aligned - theirs[None, :, :]) if len(ours) else np.zeros((0, len(theirs), theirs.shape[1]))
    cost = (diff > tol).sum(-1) + diff.sum(-1) / (1.0 + diff.sum(-1).max(initial=0.0))
    i, j = linear_sum_assignment(cost)
    return i, j, aligned[i, j]


@dataclass
class Agreement:
    """Paired-statement agreement of one feature view with Ansor's rows."""

    count_match: int = 0
    all_agree: int = 0  # programs whose every paired value agrees and counts match
    statements_ours: int = 0
    statements_ansor: int = 0
    statements_paired: int = 0
    agree: Optional[np.ndarray] = None  # per feature: paired values that agree
    total: Optional[np.ndarray] = None  # per feature: paired values

    def add(self, ours: np.ndarray, theirs: np.ndarray, names: tuple[str, ...], tol: float) -> None:
        if self.agree is None:
            self.agree = np.zeros(theirs.shape[1], np.int64)
            self.total = np.zeros(theirs.shape[1], np.int64)
        i, j, paired = match_statements(ours, theirs, buffer_slots(names), tol)
        ok = np.abs(paired - theirs[j]) <= tol
        self.agree += ok.sum(0)
        self.total += len(i)
        self.statements_ours += len(ours)
        self.statements_ansor += len(theirs)
        self.statements_paired += len(i)
        same_count = len(ours) == len(theirs)
        self.count_match += same_count
        self.all_agree += bool(same_count and ok.all())

    def group_agreement(self, names: tuple[str, ...]) -> dict[str, Optional[float]]:
        out: dict[str, Optional[float]] = {}
        groups = np.array([group_of(n) for n in names])
        for g in GROUPS:
            sel = groups == g
            total = int(self.total[sel].sum()) if self.total is not None else 0
            out[g] = round(float(self.agree[sel].sum()) / total, 4) if total else None
        return out

    def worst_features(self, names: tuple[str, ...], k: int) -> list[tuple[str, float]]:
        if self.total is None or not self.total.any():
            return []
        rate = self.agree / np.maximum(self.total, 1)
        order = np.argsort(rate, kind="stable")[:k]
        return [(names[i], round(float(rate[i]), 4)) for i in order if rate[i] < 1]

    def to_json(self, names: tuple[str, ...], worst: int) -> dict:
        return {
            "statement_count_match": self.count_match, "all_values_agree": self.all_agree,
            "statements": {"ours": self.statements_ours, "ansor": self.statements_ansor,
                           "paired": self.statements_paired},
            "group_agreement": self.group_agreement(names),
            "worst_features": self.worst_features(names, worst),
        }


@dataclass
class Tally(Agreement):
    """Counts for one target kind; its own agreement is that of the stored features (the scheduled
    TIR, as stored), ``ansor_view``'s that of features/ansor_view.py."""

    programs: int = 0
    replayed: int = 0
    no_oracle: int = 0
    ansor_rejected: int = 0  # Ansor extracted no features: its lowering refused the program
    gpu_verdicts: Counter = field(default_factory=Counter)  # (Ansor accepts, we accept) -> programs
    failures: Counter = field(default_factory=Counter)
    ansor_view: Agreement = field(default_factory=Agreement)


@dataclass
class FidelityReport:
    feature_names: tuple[str, ...]
    tol: float
    by_target: dict[str, Tally] = field(default_factory=dict)

    def to_json(self, worst: int = 10) -> dict:
        out: dict = {"tolerance": self.tol}
        for kind, t in sorted(self.by_target.items()):
            out[kind] = {
                "programs": t.programs, "replayed": t.replayed, "no_oracle": t.no_oracle,
                "ansor_rejected": t.ansor_rejected,
                "gpu_verdicts": {f"ansor_{'ok' if a else 'rejects'}/ours_{'ok' if b else 'rejects'}": n
                                 for (a, b), n in sorted(t.gpu_verdicts.items())},
                **t.to_json(self.feature_names, worst),
                "ansor_view": t.ansor_view.to_json(self.feature_names, worst),
                "failures": dict(t.failures.most_common()),
            }
        return out


def _sampled(records: list[Record], sample: int) -> list[Record]:
    if not sample or sample >= len(records):
        return records
    picks = np.unique(np.linspace(0, len(records) - 1, sample).round().astype(int))
    return [records[i] for i in picks]


def _record_files(dataset: Path) -> Iterator[Path]:
    layout = discover(dataset)
    yield from (path for _, path in layout.record_files())
    yield from layout.unmeasured_files()


def check_replay(dataset: Path, sample: int = 0, tol: float = 0.05,
                 on_record: Callable[[], None] = lambda: None) -> FidelityReport:
    """Replay ``sample`` evenly spaced records of every record file (0: all) and compare."""
    dataset = Path(dataset)
    oracle = Oracle.open(dataset)
    tasks = load_task_index(discover(dataset)).tasks
    report = FidelityReport(oracle.feature_names, tol)
    for path in _record_files(dataset):
        records = [r for r in read_records(path) if isinstance(r, Record)]
        for rec in _sampled(records, sample):
            tally = report.by_target.setdefault(rec.target_kind, Tally())
            tally.programs += 1
            on_record()
            theirs = oracle.rows(dataset, path, rec.source.line)
            if theirs is None:
                tally.no_oracle += 1
                continue
            task = tasks.get((rec.workload_key.text, rec.target_kind))
            result = replay_record(task, rec) if task else None
            if result is None or not result.ok:
                tally.failures[result.reason if result else "no task"] += 1
                continue
            tally.replayed += 1
            ansor_ok = bool(theirs.any())
            if rec.target_kind == "cuda":
                target = record_target(rec.target, rec.hardware_params)
                tally.gpu_verdicts[ansor_ok, not limit_violation(result.mod, target, rec.hardware_params)] += 1
            if not ansor_ok:
                tally.ansor_rejected += 1
                continue
            tally.add(per_store_features(result.schedule, rec.target_kind), theirs, oracle.feature_names, tol)
            tally.ansor_view.add(per_store_features(result.schedule, rec.target_kind, ansor=True), theirs,
                                 oracle.feature_names, tol)
    return report


def format_table(report: FidelityReport, worst: int = 10) -> str:
    """Counts per target kind, then agreement in two columns per kind: the stored features
    (as stored: the scheduled TIR) and the Ansor view of the same programs."""
    kinds = sorted(report.by_target)
    tallies = [report.by_target[k] for k in kinds]
    views = [(t, a) for t in tallies for a in (t, t.ansor_view)]
    width = 14
    lines = [f"{'':<22}" + "".join(f"{k:>{2 * width}}" for k in kinds),
             f"{'':<22}" + f"{'stored':>{width}}{'ansor view':>{width}}" * len(kinds)]

    def row(label: str, cells: list[str]) -> None:
        lines.append(f"{label:<22}" + "".join(f"{c:>{width}}" for c in cells))

    for label, count in (("programs", "programs"), ("replayed", "replayed"), ("no oracle row", "no_oracle"),
                         ("ansor rejected", "ansor_rejected")):
        row(label, [c for t in tallies for c in (str(getattr(t, count)), "")])
    compared = [max(t.replayed - t.ansor_rejected, 1) for t, _ in views]
    row("stmt counts match", [f"{a.count_match} ({a.count_match / n:.1%})" for (_, a), n in zip(views, compared)])
    row("all values agree", [f"{a.all_agree} ({a.all_agree / n:.1%})" for (_, a), n in zip(views, compared)])
    row("stmts ours/ansor", [f"{a.statements_ours}/{a.statements_ansor}" for _, a in views])
    lines.append(f"agreement per group (|ours - ansor| <= {report.tol}, paired statements)")
    agreements = [a.group_agreement(report.feature_names) for _, a in views]
    for g in GROUPS:
        row(f"  {g}", ["-" if a[g] is None else f"{a[g]:.1%}" for a in agreements])
    for kind, t in zip(kinds, tallies):
        if t.gpu_verdicts:
            lines.append(f"{kind}: GPU verdicts (Ansor's lowering vs our verify_gpu_code): " + ", ".join(
                f"ansor {'ok' if a else 'rejects'} / ours {'ok' if b else 'rejects'}: {n}"
                for (a, b), n in sorted(t.gpu_verdicts.items())))
        for label, agreement in (("stored", t), ("ansor view", t.ansor_view)):
            worst_list = agreement.worst_features(report.feature_names, worst)
            if worst_list:
                lines.append(f"{kind} ({label}): least agreeing features: "
                             + ", ".join(f"{n} {r:.0%}" for n, r in worst_list))
        if t.failures:
            lines.append(f"{kind}: failures: " + ", ".join(f"{r}: {n}" for r, n in t.failures.most_common()))
    return "\n".join(lines)

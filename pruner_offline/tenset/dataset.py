"""A TenSet dataset on disk: layout discovery, task index, record files joined to tasks.

```
ROOT/network_info/all_tasks.pkl, ((NET,[SHAPE]),KIND).task.pkl
ROOT/measure_records/DEVICE/([KEY...],KIND).json[.gz]     measured, one task per file
ROOT/to_measure_programs/([KEY...],KIND).json[.gz]        sampled, not measured
```
"""

from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence, Union

import numpy as np

from ..errors import BadInput
from .labels import TENSET_MIN_RECORDS, FailedPolicy, cost_problem, mean_costs, task_labels
from .records import MEASURE_ERRORS, BadLine, Record, read_records
from .steps import STEP_CODES
from .tasks import NetworkTasks, Task, load_all_tasks, load_network_tasks

RECORD_SUFFIXES = (".json", ".json.gz", ".jsonl", ".jsonl.gz")
UNMEASURED = "(unmeasured)"  # device name given to to_measure_programs/


class DatasetError(BadInput):
    pass


@dataclass(frozen=True)
class DatasetLayout:
    root: Path
    all_tasks: Optional[Path]
    network_files: tuple[Path, ...]
    measure_dirs: dict[str, Path]  # device name -> directory
    to_measure: Optional[Path]

    def record_files(self, device: Optional[str] = None) -> list[tuple[str, Path]]:
        """(device, file) for every measured record file, sorted for a stable order."""
        if device is not None and device not in self.measure_dirs:
            raise DatasetError(f"{self.root}: no records of device {device!r} (measure_records/ has: "
                               f"{', '.join(self.measure_dirs) or 'none'})")
        out = []
        for dev, d in sorted(self.measure_dirs.items()):
            if device is None or dev == device:
                out += [(dev, f) for f in _record_files_in(d)]
        return out

    def unmeasured_files(self) -> list[Path]:
        return _record_files_in(self.to_measure) if self.to_measure else []


def _record_files_in(d: Path) -> list[Path]:
    named = sorted(p for p in d.iterdir() if p.name.endswith(RECORD_SUFFIXES))
    for p in named:
        if not p.is_file():
            # a link whose target is gone (a dataset on a drive not mounted) would otherwise leave
            # its records out without a word
            what = "a link to nothing (a missing target, or a loop)" if p.is_symlink() and not p.exists() \
                else "not a regular file"
            warnings.warn(f"{p}: {what}, its records are left out", stacklevel=2)
    return [p for p in named if p.is_file()]


def discover(root: Union[str, Path]) -> DatasetLayout:
    """Find the parts of a TenSet dataset; a directory of record files alone also counts."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"{root}: not a directory")
    if (root / "database_workload.json").is_file() and (root / "database_tuning_record.json").is_file():
        # its two files would otherwise pass for TenSet record files with every line unreadable
        raise DatasetError(f"{root}: a MetaSchedule database, not a TenSet dataset (featurize and adapt "
                           "read both kinds)")
    info = root / "network_info"
    all_tasks = info / "all_tasks.pkl"
    network_files = tuple(sorted(info.glob("*.task.pkl"))) if info.is_dir() else ()
    measure = root / "measure_records"
    measure_dirs = {d.name: d for d in sorted(measure.iterdir()) if d.is_dir()} if measure.is_dir() else {}
    to_measure = root / "to_measure_programs"
    if not measure_dirs and _record_files_in(root):
        measure_dirs = {root.name: root}  # a bare folder of record files
    layout = DatasetLayout(root, all_tasks if all_tasks.is_file() else None, network_files, measure_dirs,
                           to_measure if to_measure.is_dir() else None)
    if not (layout.all_tasks or layout.network_files or layout.measure_dirs or layout.to_measure):
        raise DatasetError(
            f"{root}: no TenSet data found (expected network_info/, measure_records/<device>/ "
            "or to_measure_programs/)")
    return layout


@dataclass
class TaskIndex:
    """Every known task by (workload key, target kind), and the networks using them."""

    tasks: dict[tuple[str, str], Task] = field(default_factory=dict)
    networks: list[NetworkTasks] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # unreadable task files, with reasons


def load_task_index(layout: DatasetLayout) -> TaskIndex:
    """Tasks from all_tasks.pkl and the per-network files; a file that fails is reported, not fatal."""
    index = TaskIndex()
    if layout.all_tasks:
        try:
            for t in load_all_tasks(layout.all_tasks):
                index.tasks.setdefault(t.key, t)
        except Exception as exc:  # noqa: BLE001 - a damaged pickle can fail in any way; report, go on
            index.problems.append(f"{layout.all_tasks}: {exc}")
    for path in layout.network_files:
        try:
            net = load_network_tasks(path)
        except Exception as exc:  # noqa: BLE001
            index.problems.append(f"{path}: {exc}")
            continue
        index.networks.append(net)
        for t in net.tasks:
            index.tasks.setdefault(t.key, t)
    return index


def file_task_key(records: Sequence[Record]) -> Optional[tuple[str, str]]:
    """(workload key, target kind) of a record file's task: the one most of its records name.

    TenSet writes one task per file; taking the majority keeps one damaged line from
    making every other record of the file look like an unknown task."""
    keys = Counter((r.workload_key.text, r.target_kind) for r in records)
    return keys.most_common(1)[0][0] if keys else None


@dataclass
class TaskRecords:
    """The records of one record file (one task on one device), with TenSet's labels."""

    device: str
    path: Path
    task: Optional[Task]
    records: list[Record]
    bad_lines: list[BadLine]

    @property
    def key(self) -> Optional[tuple[str, str]]:
        return file_task_key(self.records)

    def labels(self, failed: FailedPolicy = "zero") -> np.ndarray:
        return task_labels(mean_costs([r.costs for r in self.records]),
                           np.array([r.ok for r in self.records], dtype=bool), failed)


def iter_task_records(
    layout: DatasetLayout,
    index: TaskIndex,
    device: Optional[str] = None,
    include_unmeasured: bool = False,
    min_records: int = 0,
) -> Iterator[TaskRecords]:
    """One TaskRecords per record file; files with fewer than ``min_records`` records are skipped
    (TenSet's filter is 48)."""
    files = layout.record_files(device)
    if include_unmeasured:
        files += [(UNMEASURED, f) for f in layout.unmeasured_files()]
    for dev, path in files:
        records: list[Record] = []
        bad: list[BadLine] = []
        for item in read_records(path):
            (records if isinstance(item, Record) else bad).append(item)  # type: ignore[arg-type]
        if len(records) < min_records:
            continue
        key = file_task_key(records)
        yield TaskRecords(dev, path, index.tasks.get(key) if key else None, records, bad)


@dataclass
class DatasetSummary:
    root: str
    tasks: int
    tasks_by_target: dict[str, int]
    networks: list[tuple[str, str, str, int]]  # name, input shape, target kind, task count
    devices: dict[str, int]
    targets: dict[str, int]
    record_files: int
    records: int
    failed_records: int
    failures_by_reason: dict[str, int]
    # successes (error_no 0) without a positive, finite time: featurize leaves them out
    # (labels.cost_problem), so they count neither as measured nor as failed
    rejected_records: int
    rejected_examples: list[str]
    unknown_task_records: int
    mixed_task_records: int
    bad_lines: int
    bad_line_examples: list[str]
    unmeasured_programs: int
    step_histogram: dict[str, int]
    small_tasks: int  # measured record files below TenSet's 48-record filter
    task_problems: list[str]

    def to_json(self) -> dict:
        return {
            "root": self.root,
            "tasks": self.tasks,
            "tasks_by_target": self.tasks_by_target,
            "records": self.records,
            "failed_records": self.failed_records,
            "failures_by_reason": self.failures_by_reason,
            "rejected_records": self.rejected_records,
            "rejected_examples": self.rejected_examples,
            "unknown_task_records": self.unknown_task_records,
            "mixed_task_records": self.mixed_task_records,
            "bad_lines": self.bad_lines,
            "bad_line_examples": self.bad_line_examples,
            "devices": self.devices,
            "targets": self.targets,
            "record_files": self.record_files,
            "unmeasured_programs": self.unmeasured_programs,
            "networks": len({n[0] for n in self.networks}),
            "network_tasks": [
                {"name": n, "input_shape": s, "target": k, "tasks": c} for n, s, k, c in self.networks],
            "step_histogram": self.step_histogram,
            "small_tasks": self.small_tasks,
            "task_problems": self.task_problems,
        }


def summarize(
    layout: DatasetLayout,
    index: TaskIndex,
    on_file: Optional[Callable[[Path, int], None]] = None,
    max_examples: int = 20,
) -> DatasetSummary:
    """Scan every record file once. ``on_file(path, lines)`` is called after each file (progress)."""
    devices: Counter = Counter()
    targets: Counter = Counter()
    failures: Counter = Counter()
    steps: Counter = Counter({code: 0 for code in STEP_CODES})
    records = failed = rejected = unknown = mixed = bad = small = unmeasured = 0
    examples: list[str] = []
    rejected_examples: list[str] = []
    files = layout.record_files()
    for dev, path in files + [(UNMEASURED, f) for f in layout.unmeasured_files()]:
        n_file = 0
        first_key = None
        for item in read_records(path):
            if isinstance(item, BadLine):
                bad += 1
                if len(examples) < max_examples:
                    examples.append(str(item))
                continue
            n_file += 1
            for s in item.raw_steps:
                steps[s[0]] += 1
            if dev == UNMEASURED:
                continue
            key = (item.workload_key.text, item.target_kind)
            if first_key is None:
                first_key = key
            elif key != first_key:
                mixed += 1  # TenSet keeps one task per file; joins assume it
            if key not in index.tasks:
                unknown += 1
            if item.error_no != 0:
                failed += 1
                failures[MEASURE_ERRORS.get(item.error_no, f"error_{item.error_no}")] += 1
            else:
                problem = cost_problem(item.costs, item.error_no)
                if problem:
                    rejected += 1
                    if len(rejected_examples) < max_examples:
                        rejected_examples.append(f"{item.source}: {problem}")
            devices[dev] += 1
            targets[item.target] += 1
        if dev == UNMEASURED:
            unmeasured += n_file
        else:
            records += n_file
            small += n_file < TENSET_MIN_RECORDS
        if on_file:
            on_file(path, n_file)
    by_target = Counter(k for _, k in index.tasks)
    return DatasetSummary(
        root=str(layout.root),
        tasks=len(index.tasks),
        tasks_by_target=dict(sorted(by_target.items())),
        networks=[(n.name, n.input_shape, n.target_kind, len(n.tasks)) for n in index.networks],
        devices=dict(devices),
        targets=dict(targets),
        record_files=len(files),
        records=records,
        failed_records=failed,
        failures_by_reason=dict(failures),
        rejected_records=rejected,
        rejected_examples=rejected_examples,
        unknown_task_records=unknown,
        mixed_task_records=mixed,
        bad_lines=bad,
        bad_line_examples=examples,
        unmeasured_programs=unmeasured,
        step_histogram=dict(steps),
        small_tasks=small,
        task_problems=index.problems,
    )

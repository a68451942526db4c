"""What one featurized record file contributes to the store, and the store's layout.

The unit of work is one record file (one task on one device): it is featurized as a
whole, saved as one part, and the store is assembled from the parts in file order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import BadInput
from ..tenset.step_vectors import MAX_STEPS, STEP_DIM

STORE_FORMAT = 1

# per-record arrays and their dtypes; statement rows are ragged (stmt_count per record)
RECORD_ARRAYS = {
    "line": np.int32,  # 1-based line in the record file
    "position": np.int32,  # index among the file's records (file order: TenSet's within-task split)
    "label": np.float32,  # min_cost / cost within the task; 0 failed; NaN unmeasured
    "cost": np.float64,  # mean measured seconds (1e10 for failures as in the records)
    "error_no": np.int32,
    "stmt_count": np.int32,
    "draft_score": np.float32,
}
STATEMENT_ARRAYS = ("statements", "symbols")
DENSE_ARRAYS = ("dataflow", "steps")  # steps: TLP step vectors [R, 64, STEP_DIM]
# the shape of one row of each feature array: what the models are built for (features/schema.py)
ROW_SHAPES = {"statements": (174,), "symbols": (11,), "dataflow": (8, 23), "steps": (MAX_STEPS, STEP_DIM)}
# the store's other groups: dataset -> "i" (integers) or "S" (strings); a group's datasets are columns of one table
INDEX_DATASETS = {"files": {"index": "i", "path": "S", "device": "S", "task": "S", "records_read": "i"},
                  "tasks": {"key": "S", "networks": "S"}, "failures": {"file_id": "i", "line": "i", "reason": "S"}}


class StoreError(BadInput):
    pass


@dataclass(frozen=True)
class UnitHeader:
    """What the store's tables need of a unit, without its feature arrays."""

    file: str
    device: str
    workload_key: str
    target_kind: str
    failures: list[tuple[int, str]]
    records_read: int
    n_records: int
    n_statements: int


@dataclass
class UnitFeatures:
    """Features of the successfully replayed records of one record file, and its failures."""

    file: str  # path relative to the dataset root
    device: str
    workload_key: str
    target_kind: str
    arrays: dict[str, np.ndarray]  # RECORD_ARRAYS + STATEMENT_ARRAYS + DENSE_ARRAYS
    failures: list[tuple[int, str]] = field(default_factory=list)  # (line, reason)
    records_read: int = 0  # lines parsed as records, replayed or not

    def __post_init__(self) -> None:
        n = len(self.arrays["line"])
        for name in RECORD_ARRAYS:
            if len(self.arrays[name]) != n:
                raise StoreError(f"{self.file}: array '{name}' has {len(self.arrays[name])} rows, expected {n}")
        s = int(self.arrays["stmt_count"].sum())
        for name in STATEMENT_ARRAYS:
            if len(self.arrays[name]) != s:
                raise StoreError(f"{self.file}: '{name}' has {len(self.arrays[name])} rows, expected {s}")
        for name in DENSE_ARRAYS:
            if len(self.arrays[name]) != n:
                raise StoreError(f"{self.file}: '{name}' has {len(self.arrays[name])} rows, expected {n}")

    @property
    def header(self) -> UnitHeader:
        return UnitHeader(self.file, self.device, self.workload_key, self.target_kind, self.failures,
                          self.records_read, len(self.arrays["line"]), int(self.arrays["stmt_count"].sum()))

    def load(self) -> "UnitFeatures":
        return self


@dataclass(frozen=True)
class LazyUnit:
    """A unit whose arrays are read only when the store writes them, so that a store of any size
    is written holding one unit's features at a time."""

    header: UnitHeader
    load: Callable[[], UnitFeatures]

"""The one interface every source of measured programs implements.

A source turns files on disk into scheduled TIR programs with their measured costs; everything
downstream (features, store, training, adaptation) sees only what this module defines. A source's
work is cut into units (one task's programs, e.g. one TenSet record file or one workload of a
MetaSchedule database) that are featurized independently, in any process, in any order.

To add a kind of source: write one module with a ``ProgramSource`` subclass, decorate it with
``@register_source``, and import it in ``sources/__init__.py``. ``open_source`` then finds it.
"""

from __future__ import annotations

import hashlib
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Union

from ..errors import BadInput
from ..tenset.records import BadLine


_EDGE = 16 * 1024


class SourceError(BadInput):
    """A path that is no source this toolkit can read, with the reason."""


@dataclass(frozen=True)
class Unit:
    """A part of a source featurized as a whole: one task's programs measured on one device."""

    index: int  # position among all units of the source: fixes the order of the store
    device: str  # the device the programs were measured on (a directory name, a database name)
    name: str  # where the programs are, relative to the source root, for provenance


@dataclass
class SourceProgram:
    """One program of a source, scheduled (or the reason it could not be), with its measurement."""

    line: int  # 1-based line of its record
    position: int  # index among its unit's records, in file order
    cost: float  # mean measured seconds; FAILED_COST for a failed measurement
    error_no: int  # 0 ok; Ansor's error codes otherwise
    label: float  # min_cost / cost within the unit's task; NaN when not measured
    # the scheduled tvm PrimFunc, or the s_tir.Schedule holding it (featurizing that saves building
    # a second one), or None when it could not be made
    func: object
    reason: str = ""  # why func is None
    raw_steps: tuple = ()  # Ansor steps, for the TLP step vectors; () for other sources

    @property
    def ok(self) -> bool:
        return self.error_no == 0


@dataclass
class UnitPrograms:
    """What a unit holds: its task, its programs (possibly produced lazily) and its unreadable lines."""

    task_key: str  # workload key (TenSet) or "ms:<structural hash>"
    target_kind: str
    programs: Iterable[SourceProgram]
    records_read: int
    bad_lines: list[tuple[int, str]] = field(default_factory=list)  # (line, reason)


@dataclass
class LiveProgram:
    """A program a live tuning run has just appended, with the task it belongs to."""

    task_key: str
    target_kind: str
    program: SourceProgram


class ProgramSource(ABC):
    """A directory of measured programs. Implementations are small, picklable values (their
    caches live in their module, per process), so units can be featurized by worker processes."""

    kind: str = ""  # short name shown to users and kept in stores ("tenset", "metaschedule")

    def __init__(self, root: Union[str, Path]):
        self.root = Path(root).resolve()

    @classmethod
    @abstractmethod
    def detect(cls, path: Path) -> bool:
        """Whether ``path`` looks like this kind of source (cheap: file names, not contents)."""

    @abstractmethod
    def units(self, device: Optional[str] = None, include_unmeasured: bool = False) -> list[Unit]:
        """Every unit, in a stable order; ``device`` keeps the units measured on that device."""

    @abstractmethod
    def programs(self, unit: Unit) -> UnitPrograms:
        """The programs of one unit; a program that cannot be scheduled carries its reason."""

    @abstractmethod
    def files(self) -> list[Path]:
        """Every file the source's content depends on: its fingerprint is taken over them."""

    def networks(self) -> dict[str, dict[str, int]]:
        """"task_key|target_kind" -> {network: weight} where the source knows networks."""
        return {}

    def fingerprint(self) -> str:
        """A key of the content, the same in every copy of it: relative paths, sizes, and the first and
        last 16 KiB of every file (appending changes the size; reading whole TenSet files would take
        minutes). Stores and model files keep it, to know their data again."""
        h = hashlib.sha256(self.kind.encode())
        for p in sorted(self.files()):
            size = p.stat().st_size
            h.update(f"{p.relative_to(self.root)}\0{size}\0".encode())
            with open(p, "rb") as f:
                h.update(f.read(_EDGE))
                if size > 2 * _EDGE:
                    f.seek(size - _EDGE)
                    h.update(f.read(_EDGE))
        return h.hexdigest()[:16]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"


class LiveSource(ABC):
    """Records that a running tuning job keeps appending (``adapt --follow``)."""

    @abstractmethod
    def poll(self) -> list[Union[LiveProgram, BadLine]]:
        """Programs of the complete lines appended since the last poll (a partial last line waits)."""

    @property
    @abstractmethod
    def lines_read(self) -> int:
        """Lines consumed so far: where a restarted follower skips to."""

    @property
    @abstractmethod
    def path(self) -> Path:
        """The file followed (what an adapted model says it adapted on)."""


class TailedFile:
    """Complete lines appended to a file since the last poll; a partial last line is kept back."""

    CHECKED = 64  # bytes before the offset read again on every poll: a file rewritten in place differs there

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.lines_read = 0
        self._partial = b""
        self._identity: tuple[int, int] | None = None  # (device, inode) of the file being read
        self._seen = b""  # the last bytes read, up to CHECKED

    def poll(self) -> list[bytes]:
        try:
            f = open(self.path, "rb")
        except OSError:
            return []  # not written yet
        with f:
            st = os.fstat(f.fileno())  # of the file read, even if the path is replaced meanwhile
            f.seek(self.offset - len(self._seen))
            chunk = f.read()
        changed = "replaced by another file" if self._identity not in (None, (st.st_dev, st.st_ino)) else \
            f"shrank from {self.offset} to {st.st_size} bytes" if st.st_size < self.offset else None
        if changed is None and not chunk.startswith(self._seen):
            changed = "rewritten"
        if changed:
            # reading on from the old offset would join the middle of another file's line to its rest
            raise SourceError(f"{self.path}: {changed} while followed, after {self.lines_read} lines had been read; "
                              "the lines already read no longer match it")
        self._identity = (st.st_dev, st.st_ino)
        chunk = chunk[len(self._seen):]
        self._seen = (self._seen + chunk)[-self.CHECKED:]
        self.offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        self.lines_read += len(lines)
        return [line + b"\n" for line in lines]


_SOURCES: list[type[ProgramSource]] = []


def register_source(cls: type[ProgramSource]) -> type[ProgramSource]:
    """Class decorator: make ``open_source`` consider ``cls``. The latest registered kind is tried
    first, so a specific kind registered later wins over a general one (TenSet accepts any folder
    of record files)."""
    _SOURCES.append(cls)
    return cls


def source_kinds() -> list[str]:
    return [c.kind for c in _SOURCES]


def open_source(path: Union[str, Path]) -> ProgramSource:
    """The source at ``path``, of the first registered kind that recognises it."""
    p = Path(path)
    if not p.is_dir():
        raise SourceError(f"{p}: not a directory (a source is a TenSet dataset, a MetaSchedule database "
                          "directory or a directory of them)")
    for cls in reversed(_SOURCES):
        if cls.detect(p):
            return cls(p)
    raise SourceError(f"{p}: neither {' nor '.join(source_kinds())} data (a TenSet dataset has network_info/ and "
                      "measure_records/<device>/; a MetaSchedule database has database_workload.json and "
                      "database_tuning_record.json; a directory of past tuning runs has such databases below it)")


class TailedSource(LiveSource):
    """A live source that follows one file with a TailedFile, ``self.tail``."""

    tail: TailedFile

    @property
    def lines_read(self) -> int:
        return self.tail.lines_read

    @property
    def path(self) -> Path:
        return self.tail.path

"""Stream-parse Ansor measure records (log format v0.2 to v0.6), plain or gzipped.

One JSON object per line:
``{"i": [[KEY, TARGET, HW_PARAMS, TARGET_HOST, LAYOUT_REWRITE, INPUT_NAMES], [[], STEPS]],
"r": [COSTS, ERROR_NO, ALL_COST, TIMESTAMP], "v": "v0.6"}``; older versions stop the task
list early. A line that cannot be read becomes a ``BadLine`` carrying file, line number
and reason, and reading goes on with the next line.
"""

from __future__ import annotations

import gzip
import json
import operator
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterable, Iterator, Optional, Union

import orjson

from .steps import STEP_ARITY, Step, StepError, parse_step

MEASURE_ERRORS = {
    0: "ok", 1: "instantiation_error", 2: "compile_host", 3: "compile_device", 4: "runtime_device",
    5: "wrong_answer", 6: "build_timeout", 7: "run_timeout", 8: "unknown_error",
}


@dataclass(frozen=True, slots=True)
class WorkloadKey:
    """``[md5 of the DAG printout, *shape args]``; ``text`` is the canonical JSON form used to join."""

    text: str
    hash: str
    args: tuple


@dataclass(frozen=True, slots=True)
class HardwareParams:
    num_cores: int
    vector_unit_bytes: int
    cache_line_bytes: int
    max_shared_memory_per_block: Optional[int] = None
    max_local_memory_per_block: Optional[int] = None
    max_threads_per_block: Optional[int] = None
    max_vthread_extent: Optional[int] = None
    warp_size: Optional[int] = None


@dataclass(frozen=True, slots=True)
class SourceLine:
    path: str
    line: int  # 1-based

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True, slots=True)
class Record:
    workload_key: WorkloadKey
    target: str
    hardware_params: Optional[HardwareParams]
    target_host: Optional[str]
    layout_rewrite: Optional[int]
    input_names: tuple[str, ...]
    raw_steps: tuple[list, ...]
    costs: tuple[float, ...]
    error_no: int
    all_cost: float
    timestamp: float
    version: str
    source: SourceLine

    @property
    def target_kind(self) -> str:
        return target_kind(self.target)

    @property
    def steps(self) -> tuple[Step, ...]:
        """Typed steps. Built on access: reading a record checks each step's code and
        arity, and building ~25 objects per line would triple the cost of a scan."""
        return tuple(parse_step(s) for s in self.raw_steps)

    @property
    def ok(self) -> bool:
        return self.error_no == 0

    @property
    def mean_cost(self) -> float:
        return sum(self.costs) / len(self.costs) if self.costs else float("inf")


@dataclass(frozen=True, slots=True)
class BadLine:
    source: SourceLine
    reason: str

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}"


class RecordError(ValueError):
    pass


def target_kind(target: str) -> str:
    """``"cuda -arch=sm_37 ..."`` -> ``"cuda"``."""
    return target.split(" ", 1)[0]


def parse_workload_key(text: str) -> WorkloadKey:
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        raise RecordError(f"workload key is not JSON: {text[:80]!r}") from None
    if type(parsed) is not list or not parsed or type(parsed[0]) is not str:
        raise RecordError(f"workload key is not [hash, args...]: {text[:80]!r}")
    return WorkloadKey(json.dumps(parsed), parsed[0], tuple(_freeze(a) for a in parsed[1:]))


def _freeze(v: object) -> object:
    return tuple(_freeze(x) for x in v) if isinstance(v, list) else v


def _hardware_params(raw: object) -> Optional[HardwareParams]:
    if raw is None:
        return None
    if type(raw) is not list or not 3 <= len(raw) <= 8 or any(type(x) is not int for x in raw):
        raise RecordError(f"hardware params are not 3 to 8 integers: {raw!r}")
    return HardwareParams(*raw)


class _Interner:
    """Record files repeat one task header on every line: parse each distinct header once."""

    def __init__(self) -> None:
        self.keys: dict[str, WorkloadKey] = {}
        self.hw: dict[tuple, Optional[HardwareParams]] = {}

    def key(self, text: object) -> WorkloadKey:
        if type(text) is not str:
            raise RecordError("workload key is not a string")
        k = self.keys.get(text)
        if k is None:
            k = self.keys[text] = parse_workload_key(text)
        return k

    def hardware(self, raw: object) -> Optional[HardwareParams]:
        cache_key = tuple(raw) if type(raw) is list else raw
        try:
            return self.hw[cache_key]  # type: ignore[index]
        except KeyError:
            hw = self.hw[cache_key] = _hardware_params(raw)  # type: ignore[index]
            return hw
        except TypeError:  # unhashable garbage
            raise RecordError(f"hardware params are not 3 to 8 integers: {raw!r}") from None


def _parse(obj: object, source: SourceLine, interner: _Interner) -> Record:
    if type(obj) is not dict:
        raise RecordError("line is not a JSON object")
    try:
        inp, res = obj["i"], obj["r"]
    except KeyError as exc:
        raise RecordError(f"missing field {exc.args[0]!r}") from None
    version = obj.get("v", "v0.1")
    if type(inp) is not list or len(inp) != 2 or type(inp[0]) is not list or type(inp[1]) is not list:
        raise RecordError("field 'i' is not [task, state]")
    task, state = inp
    if len(task) < 2 or type(task[1]) is not str:
        raise RecordError("task has no target string")
    n = len(task)
    hw = interner.hardware(task[2]) if n > 2 else None
    target_host = task[3] if n > 3 and task[3] else None
    layout = task[4] if n > 4 else None
    if layout is not None and type(layout) is not int:
        raise RecordError(f"layout rewrite option is not an integer: {layout!r}")
    names = task[5] if n > 5 else []
    if type(names) is not list:
        raise RecordError("task input names are not a list")
    if len(state) != 2 or type(state[1]) is not list:
        raise RecordError("state is not [stages, steps]")
    steps = state[1]
    # Checked with C-level maps: this runs for every step of tens of millions of lines.
    try:
        steps_ok = list(map(_ARITY_GET, map(_FIRST, steps))) == list(map(len, steps))
    except (IndexError, KeyError, TypeError):
        steps_ok = False
    if not steps_ok:
        raise RecordError(f"rejected step: {_first_bad_step(steps)}")
    if type(res) is not list or len(res) < 2 or type(res[0]) is not list:
        raise RecordError("field 'r' is not [costs, error_no, ...]")
    costs = res[0]
    if any(type(c) not in (float, int) for c in costs):
        raise RecordError("costs are not numbers")
    error_no = res[1]
    if type(error_no) is not int:
        raise RecordError(f"error_no is not an integer: {error_no!r}")
    all_cost = res[2] if len(res) > 2 else 0.0
    timestamp = res[3] if len(res) > 3 else 0.0
    if type(all_cost) not in (float, int) or type(timestamp) not in (float, int):
        raise RecordError("all_cost or timestamp is not a number")
    return Record(
        interner.key(task[0]), task[1], hw, target_host, layout, tuple(str(x) for x in names),
        steps, tuple(float(c) for c in costs), error_no, float(all_cost), float(timestamp),
        str(version), source,
    )


_FIRST = operator.itemgetter(0)


_ARITY_GET = STEP_ARITY.get


def _first_bad_step(steps: list) -> str:
    for step in steps:
        try:
            parse_step(step)
        except StepError as exc:
            return str(exc)
    return "malformed step"


def open_record_file(path: Union[str, Path]) -> IO[bytes]:
    p = os.fspath(path)
    return gzip.open(p, "rb") if p.endswith(".gz") else open(p, "rb")


# Ansor's reader skips lines starting with these; a line starting with a tab is a record to it.
_COMMENT_FIRST = frozenset(b"# ")


def parse_lines(lines: Iterable[bytes], path: str, first_line: int = 1) -> Iterator[Union[Record, BadLine]]:
    """Parse record lines (bytes); comments (``#`` or leading space) and blank lines yield nothing."""
    interner = _Interner()
    loads = orjson.loads  # ~3x faster than json.loads on record lines
    for lineno, line in enumerate(lines, first_line):
        if not line or line[0] in _COMMENT_FIRST or line.isspace():
            continue
        source = SourceLine(path, lineno)
        try:
            yield _parse(loads(line), source, interner)
        except orjson.JSONDecodeError as exc:
            truncated = not line.endswith(b"\n") or exc.pos >= len(line.rstrip(b"\r\n"))
            yield BadLine(source, ("truncated line: " if truncated else "malformed JSON: ") + exc.msg)
        except RecordError as exc:
            yield BadLine(source, str(exc))
        except (TypeError, ValueError, IndexError) as exc:
            yield BadLine(source, f"malformed record: {exc}")


def read_records(path: Union[str, Path]) -> Iterator[Union[Record, BadLine]]:
    """Stream one record file (``.json``/``.jsonl``, optionally ``.gz``) line by line."""
    p = os.fspath(path)
    last = 0
    try:
        with open_record_file(p) as f:
            for item in parse_lines(f, p):
                last = item.source.line
                yield item
    except (OSError, EOFError, zlib.error) as exc:  # a gzip file cut short or damaged, a vanished file
        where = f"after line {last}" if last else "from its start"
        yield BadLine(SourceLine(p, last + 1), f"cannot read the file {where} (damaged or cut short?): {exc}")


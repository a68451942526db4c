"""collect --tenset: the programs of a TenSet dataset's to_measure_programs/ measured on this
device, written as TenSet wrote its measurements.

Each program (an Ansor record) is replayed on TIR as featurize replays it, built and timed by the
measurement layer that serves the other inputs, and written to OUT/measure_records/DEVICE/ under
its file's name: the input line with its result part ("r": costs, error number, seconds it took,
timestamp) filled in, Ansor's error numbers for what failed (a program that does not replay is
an instantiation error), so that TenSet's and Ansor's readers take the file as they take TenSet's.
OUT also gets the input's network_info/, which makes it a TenSet dataset that info, featurize and
pretrain read.

The first --programs-per-task programs of each file are measured, in file order, and a file's
output line k is the result of its k-th program: a rerun counts the whole lines each output holds
(dropping a last line cut short) and goes on from there, so a run stopped in any way loses at
most the batch it was measuring.
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Optional

import tvm
from tvm.s_tir.meta_schedule.arg_info import ArgInfo

from ..errors import BadInput, dumps
from ..measure.batch import MeasuredBatch
from ..measure.measurers import check_measurable, run_measurers
from ..measure.outcome import failure_reason
from ..sources.tenset import TenSetSource
from ..targets import tuning_target
from ..tenset.dataset import UNMEASURED
from ..tenset.labels import FAILED_COST
from ..tenset.records import open_record_file
from ..tuning.run.resume import whole_lines
from .manifest import machine, record_run, start_run
from .run import FAILURES, CollectReport
from .settings import CollectSettings

RECORD_VERSION = "v0.6"
# Ansor's MeasureErrorNO for each failure of measure/outcome.py; 1 (instantiation) where the
# record does not replay
_ERROR_NO = {"build_timeout": 6, "build_crash": 2, "build_error": 2, "run_timeout": 7, "run_crash": 4,
             "rpc_error": 4, "run_error": 4}
_NOT_REPLAYED = 1


def _module(func) -> tvm.IRModule:
    """The replayed program (a Schedule or a PrimFunc) as a module of one function, main."""
    mod = func.mod if hasattr(func, "mod") else tvm.IRModule({"main": func})
    if "main" not in {g.name_hint for g in mod.get_global_vars()}:
        (gv,) = mod.get_global_vars()
        mod = tvm.IRModule({"main": mod[gv]})
    return mod


def _output_lines(path: Path, notes: list[str]) -> int:
    """Whole result lines ``path`` holds (a last line cut short is dropped from the file)."""
    if not path.is_file():
        return 0
    lines = whole_lines(path, notes)
    if lines and not lines[-1].endswith(b"\n"):
        with open(path, "ab") as f:
            f.write(b"\n")
    return sum(1 for line in lines if line.strip())


def _result_line(raw: bytes, costs: list[float], error_no: int, seconds: float) -> str:
    record = json.loads(raw)
    record["r"] = [costs, error_no, round(seconds, 6), int(time.time())]
    record["v"] = record.get("v", RECORD_VERSION)
    return json.dumps(record, separators=(", ", ": ")) + "\n"


def default_device_name(s: CollectSettings) -> str:
    """TenSet names a records directory for its device: --device, else the CPU's model name."""
    if s.device:
        return s.device
    cpu = machine()["cpu"].lower()
    return "-".join("".join(c if c.isalnum() else " " for c in cpu).split()) or "cpu"


def collect_tenset(root: str | Path, out: str | Path, s: CollectSettings, device_name: str, *,
                   on_start: Optional[Callable[[int], None]] = None,
                   on_measured: Optional[Callable[[int], None]] = None) -> CollectReport:
    root, out = Path(root), Path(out)
    source = TenSetSource(root)
    units = [u for u in source.units(include_unmeasured=True) if u.device == UNMEASURED]
    kind_files = [u for u in units if u.name.endswith((f",{s.target_kind}).json", f",{s.target_kind}).json.gz"))]
    if not kind_files:
        raise BadInput(f"{root}: no {s.target_kind} programs in to_measure_programs/ "
                       f"({len(units)} files of other targets)" if units else
                       f"{root}: no to_measure_programs/ (TenSet's sampled, unmeasured programs) to measure")
    index, count = s.shard_of
    mine = kind_files[index::count]
    target = tuning_target(s.target_kind, s.num_cores, s.device)
    check_measurable(s.target_kind, s.measure, "collect")
    records_dir = out / "measure_records" / device_name
    records_dir.mkdir(parents=True, exist_ok=True)
    if (root / "network_info").is_dir() and not (out / "network_info").exists():
        partial = out / "network_info.partial"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(root / "network_info", partial)
        partial.rename(out / "network_info")
    notes: list[str] = []
    outputs = [records_dir / Path(u.name).name.removesuffix(".gz") for u in mine]
    done = [_output_lines(p, notes) for p in outputs]
    measured_on = (f"rpc {s.measure.rpc.tracker_host}:{s.measure.rpc.tracker_port} key {s.measure.rpc.key}"
                   if s.measure.rpc else "local")
    manifest = start_run(out, s, target, measured_on,
                         [{"name": Path(u.name).name, "origin": str(root / u.name)} for u in mine])
    if on_start:
        on_start(sum(max(s.programs_per_task - d, 0) for d in done))
    measured, failed = 0, Counter()
    start = time.perf_counter()
    try:
        with run_measurers(s.measure) as (builder, runner), open(out / FAILURES, "a") as failures:
            for unit, output, held in zip(mine, outputs, done):
                if held >= s.programs_per_task:
                    continue
                with open_record_file(root / unit.name) as f:
                    raw = f.read().splitlines()
                programs = list(source.programs(unit).programs)[held:s.programs_per_task]
                for k in range(0, len(programs), s.batch_size):
                    batch = programs[k:k + s.batch_size]
                    began = time.perf_counter()
                    ready = [p for p in batch if p.func is not None]
                    mods = [_module(p.func) for p in ready]
                    results = iter(MeasuredBatch(mods, [ArgInfo.from_prim_func(m["main"]) for m in mods],
                                                 builder, runner, target).results() if ready else [])
                    per_program = (time.perf_counter() - began) / len(batch)
                    lines = []
                    for p in batch:
                        if p.func is None:
                            reason, error_no, message, costs = "not_replayed", _NOT_REPLAYED, p.reason, [FAILED_COST]
                        else:
                            build_error, run = next(results)
                            reason = failure_reason(build_error, run.error_msg)
                            message = build_error or run.error_msg or ""
                            error_no = 0 if reason is None else _ERROR_NO[reason]
                            costs = [float(t) for t in run.run_secs] if reason is None else [FAILED_COST]
                        lines.append(_result_line(raw[p.line - 1], costs, error_no, per_program))
                        if reason is not None:
                            failed[reason] += 1
                            failures.write(dumps({"file": f"{unit.name}:{p.line}", "reason": reason,
                                                  "message": message[-2000:]}) + "\n")
                    with open(output, "a") as f:
                        f.write("".join(lines))
                    failures.flush()
                    measured += len(batch)
                    record_run(out, manifest, measured, time.perf_counter() - start, ended=False)
                    if on_measured:
                        on_measured(len(batch))
    finally:
        seconds = time.perf_counter() - start
        record_run(out, manifest, measured, seconds, ended=True)
    held_now = sum(_output_lines(p, notes) for p in outputs)
    return CollectReport(out=str(out), tasks=len(mine), measured=measured, failed=dict(sorted(failed.items())),
                         duplicates=0, held=held_now, exhausted={}, seconds=round(seconds, 1),
                         programs_per_second=round(measured / max(seconds, 1e-9), 3),
                         shard=f"{index}/{count}", notes=notes)

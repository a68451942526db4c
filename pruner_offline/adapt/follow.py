"""Adapt while a tuning run is still appending to its record file (``adapt --follow``).

The file is tailed line by line: a partial last line is left for the next poll, never read
as an error. Every ``save_every`` rounds the adapted model file and a state file (how many
lines were consumed, the method's weights) are replaced atomically, so a reader never sees
half a file and a restarted ``adapt --follow`` resumes where it stopped: it featurizes the
lines it had consumed again (the online set is derived, not saved) and goes on.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Union

import torch

from ..errors import BadInput
from ..tenset.dataset import TaskIndex
from ..tenset.records import BadLine, Record, parse_lines
from ..tenset.step_vectors import step_vectors
from ..training.export import export_model
from ..training.module import CostModelModule
from .methods import AdaptConfig, Method, make_method
from .online import OnlineProgram, OnlineRecords

STATE_FORMAT = "pruner-offline-adapt-state/1"


class TargetMismatch(BadInput):
    pass


class RecordTail:
    """Complete lines appended to a file since the last poll."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.lines_read = 0
        self._partial = b""

    def poll(self) -> list[bytes]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        self.offset += len(chunk)
        data = self._partial + chunk
        *lines, self._partial = data.split(b"\n")
        self.lines_read += len(lines)
        return [line + b"\n" for line in lines]


@dataclass
class FollowState:
    lines: int = 0  # lines of the record file consumed
    rounds: int = 0
    online: int = 0  # programs in the online set
    skipped: int = 0  # records that could not be used (replay failed, bad line, ...)


def online_program(index: TaskIndex, rec: Record, device: str) -> Union[OnlineProgram, str]:
    """Replay and featurize one record; a reason string when it cannot be used."""
    from ..features import featurize_prim_func
    from ..replay import replay_record

    task = index.tasks.get((rec.workload_key.text, rec.target_kind))
    if task is None:
        return "unknown task"
    replayed = replay_record(task, rec)
    if not replayed.ok:
        return f"{replayed.reason}: {replayed.detail}"
    f = featurize_prim_func(replayed.mod["main"], rec.target_kind, device=device)
    return OnlineProgram(f.statements, f.symbols, f.dataflow, step_vectors(rec.raw_steps), f.draft_score,
                         rec.mean_cost, rec.ok, task.workload_key)


def _save(path: Path, state_path: Path, method: Method, st: FollowState, meta: dict) -> None:
    export_model(method.predictor, path, {**meta, "online_records": st.online, "rounds": st.rounds})
    tmp = state_path.with_name(state_path.name + ".tmp")
    torch.save({"format": STATE_FORMAT, "lines": st.lines, "rounds": st.rounds, "online": st.online,
                "skipped": st.skipped, "method": method.name, "states": method.state()}, tmp)
    os.replace(tmp, state_path)


def follow(pretrained: CostModelModule, records: Path, index: TaskIndex, target: str, device: str,
           method_name: str, cfg: AdaptConfig, save: Path, save_every: int = 1, idle_timeout: float = 30.0,
           poll_interval: float = 0.2, max_records: Optional[int] = None,
           on_event: Optional[Callable[[str], None]] = None) -> FollowState:
    say = on_event or (lambda msg: None)
    state_path = save.with_name(save.name + ".state")
    method = make_method(method_name, pretrained, cfg)
    st = FollowState()
    resume_lines = 0
    if state_path.exists():
        try:
            saved = torch.load(state_path, map_location="cpu", weights_only=True)
            if saved.get("format") != STATE_FORMAT or saved.get("method") != method_name:
                raise ValueError("state of another kind or method")
            method.load_state(saved["states"])
            resume_lines, st.rounds, st.skipped = int(saved["lines"]), int(saved["rounds"]), int(saved["skipped"])
        except Exception as exc:  # noqa: BLE001 - unpickling and state errors come in many types
            raise BadInput(f"{state_path}: cannot resume from it ({type(exc).__name__}: {exc}); "
                           "remove it to start over") from None
        say(f"resuming after line {resume_lines} ({st.rounds} rounds)")
    online = OnlineRecords()
    tail = RecordTail(records)
    pending = 0
    saved_rounds = st.rounds
    last_new = time.monotonic()
    meta = {"adapted_from": str(records), "method": method_name, "target": target}
    while max_records is None or st.online < max_records:
        lines = tail.poll()
        if not lines:
            if time.monotonic() - last_new > idle_timeout:
                say(f"no new records for {idle_timeout:.0f} s; stopping")
                break
            time.sleep(poll_interval)
            continue
        last_new = time.monotonic()
        for item in parse_lines(lines, str(records), tail.lines_read - len(lines) + 1):
            replaying = item.source.line <= resume_lines  # rebuilding a resumed run's online set
            if isinstance(item, BadLine):
                st.skipped += not replaying
                say(f"skipped {item}")
                continue
            if item.target_kind != target:
                raise TargetMismatch(f"{item.source}: a {item.target_kind} record, but adapting for --target "
                                     f"{target}; pass --target {item.target_kind} or records measured on {target}")
            prog = online_program(index, item, device)
            if isinstance(prog, str):
                st.skipped += not replaying
                continue
            online.add(prog)
            st.online = len(online)
            if replaying:
                continue
            pending += 1
            if pending < cfg.round_size:
                continue
            pending = 0
            st.rounds += 1
            st.lines = item.source.line  # a round boundary: where a restart picks up
            if method.after_round(online, st.rounds):
                say(f"round {st.rounds}: retrained on {len(online)} records")
            if st.rounds % save_every == 0:
                _save(save, state_path, method, st, meta)
                saved_rounds = st.rounds
    if st.rounds > saved_rounds:
        _save(save, state_path, method, st, meta)
    return st

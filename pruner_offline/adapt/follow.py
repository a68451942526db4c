"""Adapt while a tuning run is still appending its records (``adapt --follow``).

The records come from a ``LiveSource``: an Ansor record file (TenSet format) or the MetaSchedule
database a TVM tuning run writes. Every ``save_every`` rounds the adapted model file and a state
file (how many lines were consumed, the method's weights) are replaced atomically, so a reader
never sees half a file and a restarted ``adapt --follow`` resumes where it stopped: it featurizes
the lines it had consumed again (the online set is derived, not saved) and goes on.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Union

import torch

from ..errors import BadInput, why_not_loaded
from ..devices import DeviceConstants
from ..sources.base import LiveProgram, LiveSource
from ..tenset.records import BadLine
from ..training.export import export_model, model_schema
from ..training.module import CostModelModule
from .methods import AdaptConfig, Method, make_method
from .model_file import adapted_meta
from .online import OnlineProgram, OnlineRecords

STATE_FORMAT = "pruner-offline-adapt-state/3"  # 3: guarded predicts with a mix whose weight grows with the records


class TargetMismatch(BadInput):
    pass


@dataclass
class FollowState:
    lines: int = 0  # lines of the record file consumed
    rounds: int = 0
    online: int = 0  # programs in the online set
    skipped: int = 0  # records that could not be used (replay failed, bad line, ...)


def online_program(live: LiveProgram, device: DeviceConstants, schema: int) -> Union[OnlineProgram, str]:
    """Featurize one appended program (feature schema ``schema``); a reason string when it cannot be used."""
    from ..features.program import program_features

    prog = live.program
    feats = program_features(prog, live.target_kind, device, schema)
    if isinstance(feats, str):
        return feats
    return OnlineProgram.of_features(feats, prog.cost, prog.ok, live.task_key, prog.raw_steps)


def _save(path: Path, state_path: Path, method: Method, st: FollowState, source: str, target: str,
          device: DeviceConstants) -> None:
    export_model(method.predictor, path, {**adapted_meta(source, method, target, device, st.online), "rounds": st.rounds})
    tmp = state_path.with_name(state_path.name + ".tmp")
    torch.save({"format": STATE_FORMAT, "lines": st.lines, "rounds": st.rounds, "online": st.online,
                "skipped": st.skipped, "method": method.name, "states": method.state()}, tmp)
    os.replace(tmp, state_path)


def follow(pretrained: CostModelModule, live: LiveSource, target: str, device: DeviceConstants,
           method_name: str, cfg: AdaptConfig, save: Path, save_every: int = 1, idle_timeout: float = 30.0,
           poll_interval: float = 0.2, max_records: Optional[int] = None,
           on_event: Optional[Callable[[str], None]] = None) -> FollowState:
    say = on_event or (lambda msg: None)
    state_path = save.with_name(save.name + ".state")
    schema = model_schema(pretrained)  # the appended programs are featurized as the model was trained
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
            raise BadInput(f"{state_path}: cannot resume from it ({why_not_loaded(exc)}); "
                           "remove it to start over") from None
        say(f"resuming after line {resume_lines} ({st.rounds} rounds)")
    online = OnlineRecords()
    pending = 0
    saved_rounds = st.rounds
    last_new = time.monotonic()
    while max_records is None or st.online < max_records:
        items = live.poll()
        if not items:
            if live.lines_read < resume_lines:
                # every line the state counted was complete when it was saved
                raise BadInput(f"{live.path}: holds {live.lines_read} lines, but {state_path} was saved after line "
                               f"{resume_lines}: the records were truncated or replaced since; remove {state_path} "
                               "to start over on them")
            if time.monotonic() - last_new > idle_timeout:
                say(f"no new records for {idle_timeout:.0f} s; stopping")
                break
            time.sleep(poll_interval)
            continue
        last_new = time.monotonic()
        for item in items:
            line = item.source.line if isinstance(item, BadLine) else item.program.line
            replaying = line <= resume_lines  # rebuilding a resumed run's online set
            if isinstance(item, BadLine):
                st.skipped += not replaying
                say(f"skipped {item}")
                continue
            if item.target_kind != target:
                raise TargetMismatch(f"line {line}: a {item.target_kind} record, but adapting for --target "
                                     f"{target}; pass --target {item.target_kind} or records measured on {target}")
            prog = online_program(item, device, schema)
            if isinstance(prog, str):
                st.skipped += not replaying
                say(f"skipped line {line}: {prog}")
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
            st.lines = line  # a round boundary: where a restart picks up
            if method.after_round(online, st.rounds):
                say(f"round {st.rounds}: retrained on {len(online)} records")
            if st.rounds % save_every == 0:
                _save(save, state_path, method, st, str(live.path), target, device)
                saved_rounds = st.rounds
    if st.rounds > saved_rounds:
        _save(save, state_path, method, st, str(live.path), target, device)
    return st

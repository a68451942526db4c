"""One batch of programs built and handed to the runner at once; its results come back in the
batch's order, each with the build's error (None: it built) and the run's result."""

from __future__ import annotations

import os
import shutil
from typing import Optional

import tvm
from tvm.s_tir.meta_schedule.builder import BuilderInput
from tvm.s_tir.meta_schedule.runner import RunnerInput, RunnerResult


class MeasuredBatch:
    """``mods[i]`` built for ``target`` and run with ``args_info[i]``. The builds end in the
    constructor, the runs may still go on (a remote device); ``results`` waits for them and removes
    the built artifacts."""

    def __init__(self, mods: list[tvm.IRModule], args_info: list, builder, runner, target: tvm.target.Target):
        self.built = builder.build([BuilderInput(m, target) for m in mods])
        ok = [i for i, b in enumerate(self.built) if b.error_msg is None]
        device = "cuda" if target.kind.name == "cuda" else "cpu"
        inputs = [RunnerInput(self.built[i].artifact_path, device, args_info[i]) for i in ok]
        self.futures = dict(zip(ok, runner.run(inputs)))

    def results(self) -> list[tuple[Optional[str], RunnerResult]]:
        out = []
        for i, built in enumerate(self.built):
            run = self.futures[i].result() if i in self.futures else RunnerResult(None, built.error_msg)
            out.append((built.error_msg, run))
        for b in self.built:
            if b.artifact_path:
                shutil.rmtree(os.path.dirname(b.artifact_path), ignore_errors=True)
        return out

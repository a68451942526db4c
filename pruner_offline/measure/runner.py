"""The runner of tuning runs and of collect: each built program timed on this machine or on a remote
device through TVM's RPC tracker, on worker processes whose every run is bounded in time.

MetaSchedule's RPCRunner bounds only the wait for a result: a kernel that hangs keeps its worker
busy for good, and every later program waits behind it. Here the pool kills a worker that passes
its time and starts another, and a worker that dies (a kernel that segfaults, a device that aborts)
is replaced the same way: the program is recorded as failed with its reason (outcome.py) and the
run goes on. The timing itself is MetaSchedule's (``run_evaluator_common``): `number` runs a
measurement, raised until it lasts `min_repeat_ms`, `repeat` measurements, the CPU caches flushed
before each where asked.
"""

from __future__ import annotations

import concurrent.futures
import os
from typing import Callable, Optional

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.runner import EvaluatorConfig, PyRunner, PyRunnerFuture, RunnerInput, RunnerResult
from tvm.s_tir.meta_schedule.runner import local_runner, rpc_runner
from tvm.s_tir.meta_schedule.runner.config import RPCConfig
from tvm.s_tir.meta_schedule.runner.utils import run_evaluator_common
from tvm.support.popen_pool import PopenPoolExecutor

from .settings import MeasureSettings, RPCSettings

# (artifact path, device type, args info as JSON, evaluator, remote device or None)
RunJob = tuple[str, str, tuple, EvaluatorConfig, Optional[RPCSettings]]


def rpc_config(rpc: RPCSettings) -> RPCConfig:
    return RPCConfig(tracker_host=rpc.tracker_host, tracker_port=rpc.tracker_port, tracker_key=rpc.key,
                     session_priority=rpc.priority, session_timeout_sec=int(rpc.session_timeout_s))


def _measure_here(path: str, device_type: str, args_info: tuple, evaluator: EvaluatorConfig) -> list[float]:
    rt_mod = tvm.runtime.load_module(path)
    device = tvm.runtime.device(device_type, 0)
    args = local_runner.default_alloc_argument(device, args_info, 1)
    return run_evaluator_common(rt_mod, device, evaluator, args)


def _measure_remote(path: str, device_type: str, args_info: tuple, evaluator: EvaluatorConfig,
                    rpc: RPCSettings) -> list[float]:
    session = rpc_config(rpc).connect_server()
    remote = os.path.basename(path)
    try:
        rt_mod = rpc_runner.default_upload_module(session, path, remote)
        device = session.device(device_type, 0)
        args = rpc_runner.default_alloc_argument(session, device, args_info, 1)
        return run_evaluator_common(rt_mod, device, evaluator, args)
    finally:
        rpc_runner.default_cleanup(session, remote)


def measure_job(job: RunJob) -> list[float]:
    """In a worker: the run times of one built program, in seconds."""
    path, device_type, args_info, evaluator, rpc = job
    if rpc is None:
        return _measure_here(path, device_type, args_info, evaluator)
    return _measure_remote(path, device_type, args_info, evaluator, rpc)


@derived_object
class _PoolFuture(PyRunnerFuture):
    def __init__(self, future: concurrent.futures.Future, timeout_s: float, where: str):
        super().__init__()
        self.future, self.timeout_s, self.where = future, timeout_s, where

    def done(self) -> bool:
        return self.future.done()

    def result(self) -> RunnerResult:
        try:
            return RunnerResult([float(s) for s in self.future.result()], None)
        except TimeoutError:
            return RunnerResult(None, f"PooledRunner: timeout, killed after {self.timeout_s:g} seconds")
        except ChildProcessError:
            return RunnerResult(None, "PooledRunner: the run worker died (the kernel crashed it)")
        except Exception as exc:  # noqa: BLE001 - the worker raises whatever TVM or the RPC raised
            prefix = "RPC error" if self.where == "rpc" else "the run raised"
            return RunnerResult(None, f"PooledRunner: {prefix}\n{type(exc).__name__}: {exc}")


@derived_object
class PooledRunner(PyRunner):
    """Times programs one at a time on this machine (a CPU timed while another program runs beside
    it is timed wrong), or `rpc_workers` at a time through the tracker. ``measure`` is the worker's
    function, for tests that need a kernel that hangs or crashes."""

    def __init__(self, s: MeasureSettings, measure: Callable[[RunJob], list[float]] = measure_job):
        super().__init__()
        self.settings = s
        self.measure = measure
        self.evaluator = EvaluatorConfig(number=s.number, repeat=s.repeat, min_repeat_ms=s.min_repeat_ms,
                                         enable_cpu_cache_flush=s.cpu_cache_flush)
        self.timeout_s = s.rpc.session_timeout_s if s.rpc else s.run_timeout_s
        self.pool = PopenPoolExecutor(max_workers=s.rpc_workers if s.rpc else 1, timeout=self.timeout_s)

    def run(self, runner_inputs: list[RunnerInput]) -> list[_PoolFuture]:
        where = "rpc" if self.settings.rpc else "local"
        return [_PoolFuture(self.pool.submit(self.measure, (str(r.artifact_path), str(r.device_type),
                                                            tuple(a.as_json() for a in r.args_info),
                                                            self.evaluator, self.settings.rpc)),
                            self.timeout_s, where)
                for r in runner_inputs]

    def close(self) -> None:
        self.pool.shutdown()

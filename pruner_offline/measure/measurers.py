"""The builder and runner of one run, and the checks that refuse a run that could not measure
before it does any work."""

from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from typing import Iterator

import tvm

from ..errors import BadInput
from .builder import PooledBuilder
from .runner import PooledRunner
from .settings import MeasureSettings, RPCSettings


def tracker_devices(rpc: RPCSettings, timeout_s: float = 10.0) -> int:
    """How many servers the tracker holds under the key; BadInput naming the tracker when it
    cannot be reached in time or holds none."""
    where = f"{rpc.tracker_host}:{rpc.tracker_port}"
    try:  # connect_tracker retries for a while on a refused connection: a quick probe first
        socket.create_connection((rpc.tracker_host, rpc.tracker_port), timeout=timeout_s).close()
    except OSError as exc:
        raise BadInput(f"--rpc-tracker {where}: cannot connect ({exc.strerror or exc}); start one with "
                       f"python -m tvm.exec.rpc_tracker --host {rpc.tracker_host} --port {rpc.tracker_port}") from None
    found: dict = {}

    def ask() -> None:
        try:
            found["summary"] = tvm.rpc.connect_tracker(rpc.tracker_host, rpc.tracker_port).summary()
        except Exception as exc:  # noqa: BLE001 - reported below, with the address
            found["error"] = exc

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    asker.join(timeout_s)
    if "summary" not in found:
        why = f"{type(found['error']).__name__}: {found['error']}" if "error" in found else f"no answer in {timeout_s:g} s"
        raise BadInput(f"--rpc-tracker {where}: not a TVM RPC tracker ({why})")
    keys = [item.get("key", "") for item in found["summary"].get("server_info", [])]
    n = sum(1 for k in keys if k.partition(":")[2] == rpc.key)
    if not n:
        held = sorted({k.partition(":")[2] for k in keys}) or ["none"]
        raise BadInput(f"--rpc-tracker {where} holds no device with key {rpc.key!r} (keys there: {', '.join(held)}); "
                       f"start one with python -m tvm.exec.rpc_server --tracker {where} --key {rpc.key}")
    return n


def check_measurable(target_kind: str, s: MeasureSettings, command: str) -> None:
    """Refuse, in one line, a run that has nowhere to measure its programs."""
    if s.rpc is not None:
        tracker_devices(s.rpc)
    elif target_kind == "cuda" and not tvm.cuda(0).exist:
        raise BadInput(f"{command} --target cuda: no CUDA GPU is visible here to measure on; measure on a remote one "
                       "with --rpc-tracker HOST:PORT --rpc-key KEY (its server started with "
                       "python -m tvm.exec.rpc_server --tracker HOST:PORT --key KEY)")


def make_builder(s: MeasureSettings) -> PooledBuilder:
    return PooledBuilder(max_workers=s.build_workers, timeout_sec=s.build_timeout_s)


def make_runner(s: MeasureSettings) -> PooledRunner:
    return PooledRunner(s)


@contextmanager
def run_measurers(s: MeasureSettings) -> Iterator[tuple[PooledBuilder, PooledRunner]]:
    """The builder and runner of one run: the workers of both end with the block. A pool left to
    the garbage collector shut down while Python was exiting, where TVM's first import of psutil
    failed and printed a traceback."""
    builder, runner = make_builder(s), make_runner(s)
    try:
        yield builder, runner
    finally:
        builder.close()
        runner.close()

"""What one measurement is: repeats, timeouts, and where it runs (no TVM import: the command line
is built from these)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class RPCSettings:
    """A device behind TVM's RPC tracker (``python -m tvm.exec.rpc_tracker``), found by its key."""

    tracker_host: str
    tracker_port: int
    key: str
    session_timeout_s: float = 60.0  # connecting and measuring one program, in all
    priority: int = 1

    @staticmethod
    def parse(address: str, key: str, **kwargs) -> "RPCSettings":
        """``HOST:PORT`` and a key; ValueError saying what is wrong."""
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"--rpc-tracker {address!r}: expected HOST:PORT, e.g. 127.0.0.1:9190")
        if not key:
            raise ValueError("--rpc-key must name the devices' key (the --key their rpc_server registered with)")
        return RPCSettings(host, int(port), key, **kwargs)


@dataclass(frozen=True)
class MeasureSettings:
    build_workers: int = 2
    build_timeout_s: float = field(default=30.0, metadata={
        "flag": "--build-timeout", "above": 0, "help": "seconds one program may take to build; past that it is "
                                                       "recorded as failed (build_timeout) and its worker replaced"})
    run_timeout_s: float = field(default=30.0, metadata={
        "flag": "--run-timeout", "above": 0, "help": "seconds one program may take to run all its measurements "
                                                     "here; past that it is recorded as failed (run_timeout)"})
    number: int = field(default=3, metadata={"min": 1, "help": "runs per measurement, averaged"})
    repeat: int = field(default=1, metadata={"min": 1, "help": "measurements per program"})
    # Each measurement runs the kernel at least this long (time_evaluator raises `number` until it
    # does). MetaSchedule's default is 100 ms; a 2-core machine tunes far more candidates per minute
    # at 20 ms, at the price of noisier latencies for sub-millisecond kernels.
    min_repeat_ms: int = field(default=20, metadata={
        "min": 0, "help": "a measurement runs the kernel at least this long (more runs for a fast kernel)"})
    # Flush the CPU caches before each measurement (except of the output), as TenSet measured its
    # CPU data: without it a kernel whose inputs fit the cache is timed warm, as no network runs it.
    cpu_cache_flush: bool = field(default=False, metadata={
        "help": "llvm: flush the CPU caches before each measurement, as TenSet measured"})
    rpc: Optional[RPCSettings] = None  # None: measure on this machine
    rpc_workers: int = field(default=1, metadata={
        "min": 1, "help": "with --rpc-tracker: programs measured at once (one per remote device)"})

    def __post_init__(self) -> None:
        for name in ("build_workers", "number", "repeat", "rpc_workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        for name in ("build_timeout_s", "run_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be above 0, not {getattr(self, name)}")

"""Where featurization's per-file units run: this process, a local pool, or a Ray cluster.

An executor only maps a picklable function over picklable tasks and hands back each result as it
arrives; what a unit does (featurize one record file, write its part atomically) and how a run
resumes (the parts already on disk are skipped) belong to ``build_store``. So every executor gives
the same parts, and the same store byte for byte.

To add one (a batch system's API, Dask, ...): subclass ``Executor`` and pass an instance to
``run_featurize``.
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Callable, Iterator, Optional, TypeVar

from .errors import BadInput

T = TypeVar("T")
R = TypeVar("R")


class Executor:
    """Runs ``fn`` on every task, yielding results in completion order."""

    def map_unordered(self, fn: Callable[[T], R], tasks: list[T]) -> Iterator[R]:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


class LocalExecutor(Executor):
    """``jobs`` worker processes on this machine (1: this process)."""

    def __init__(self, jobs: int = 1):
        self.jobs = jobs

    def map_unordered(self, fn: Callable[[T], R], tasks: list[T]) -> Iterator[R]:
        if self.jobs <= 1 or len(tasks) <= 1:
            yield from map(fn, tasks)
            return
        # spawn, not fork: TVM's runtime threads do not survive a fork
        with mp.get_context("spawn").Pool(self.jobs) as pool:
            yield from pool.imap_unordered(fn, tasks)

    def describe(self) -> str:
        return f"{self.jobs} local process{'es' if self.jobs > 1 else ''}"


class RayExecutor(Executor):
    """Tasks on a Ray cluster (``pip install 'pruner-offline[ray]'``), one CPU each.

    ``address``: a running cluster ("auto", "ray://host:10001", "host:6379"); None starts a local
    Ray instance for this run. Every node needs this package installed and the store's directory
    on storage all nodes share: each task writes its part there itself, so a part exists only
    once its task has finished, and a run that is stopped (or loses nodes) resumes from the parts.
    """

    def __init__(self, address: Optional[str] = None, num_cpus: Optional[int] = None):
        try:
            import ray
        except ImportError:
            raise BadInput("featurize --ray needs Ray: pip install 'pruner-offline[ray]'") from None
        self.ray = ray
        self.address = address
        self.num_cpus = num_cpus

    def map_unordered(self, fn: Callable[[T], R], tasks: list[T]) -> Iterator[R]:
        ray = self.ray
        started = not ray.is_initialized()
        if started:
            try:
                ray.init(address=self.address, num_cpus=self.num_cpus if self.address is None else None,
                         include_dashboard=False, log_to_driver=False)
            except ConnectionError as exc:
                raise BadInput(f"featurize --ray {self.address}: no Ray cluster there ({exc})") from None
        try:
            remote = ray.remote(num_cpus=1, max_retries=2)(fn)
            pending = [remote.remote(t) for t in tasks]
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                yield ray.get(done[0])
        finally:
            if started:
                ray.shutdown()

    def describe(self) -> str:
        return f"Ray at {self.address}" if self.address else "a local Ray instance"


def executor_for(jobs: int = 1, ray: Optional[str] = None) -> Executor:
    """The CLI's choice: ``--ray [ADDRESS]`` (ADDRESS "" starts a local instance), else ``--jobs``."""
    if ray is not None:
        return RayExecutor(ray or None, num_cpus=jobs if not ray else None)
    return LocalExecutor(jobs)

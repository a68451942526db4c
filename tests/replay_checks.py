"""Numerical checks of replayed programs, shared by the replay tests."""

import numpy as np
import tvm

from pruner_offline.replay import build_prim_func


def random_args(task, rng: np.random.Generator) -> list[np.ndarray]:
    ops = task.graph.ops
    return [rng.uniform(-1, 1, ops[r.op].shape).astype(ops[r.op].dtype) for r in task.graph.tensors]


def run_on_cpu(mod: tvm.IRModule, args: list[np.ndarray]) -> np.ndarray:
    # the host's own llvm: a record's -mcpu (core-avx2, ...) need not be this machine's
    dev = tvm.cpu()
    tensors = [tvm.runtime.tensor(a, dev) for a in args]
    tvm.compile(mod, target=tvm.target.Target({"kind": "llvm"})).jit()["main"](*tensors)
    return tensors[-1].numpy()


def assert_replay_computes_the_compute(task, replayed_mod: tvm.IRModule, seed: int) -> None:
    args = random_args(task, np.random.default_rng(seed))
    expect = run_on_cpu(tvm.IRModule({"main": build_prim_func(task.graph)}), args)
    np.testing.assert_allclose(run_on_cpu(replayed_mod, args), expect, rtol=1e-4, atol=1e-4)

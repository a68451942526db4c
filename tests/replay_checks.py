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


def assert_all_replay_and_the_view_agrees(report, kind: str, n: int, floor: float) -> None:
    """check_replay's ``report``: all ``n`` programs of ``kind`` replayed, and every feature group
    of the Ansor view agrees with Ansor on at least ``floor`` of the paired values, and on no fewer
    than the stored features do."""
    t = report.by_target[kind]
    assert (t.programs, t.replayed, dict(t.failures)) == (n, n, {}), kind
    stored = t.group_agreement(report.feature_names)
    view = t.ansor_view.group_agreement(report.feature_names)
    for group, agreement in view.items():
        assert agreement >= floor, (kind, group, agreement)
        assert agreement >= stored[group], (kind, group)

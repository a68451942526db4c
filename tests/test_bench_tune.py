"""bench/tune.py's resume: a recorded run made with other settings is refused, not mixed into a table."""

import argparse
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_tune", REPO / "bench" / "tune.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_args(**changes) -> argparse.Namespace:
    args = dict(trials=256, trials_per_batch=16, population=128, verify_max=32, structure_cap=4, calibrate=True,
                explore=2, in_task_trees=64, verify_pool_after=0, calibrate_unmeasured="median", online_epochs=5,
                online_method="guarded", search="draft-then-verify",
                out=Path("OUT"))
    return argparse.Namespace(**{**args, **changes})


HERE = {"cpu": "AMD EPYC 7B13", "cores_usable": 2}


def record(bench, model, args, seed=0, host=HERE):
    return {"workload": "softmax", "model": model, "seed": seed, "host": host,
            "settings": bench.settings_record(bench.run_settings(model, seed, args, Path("pacm.pt")))}


def test_xgb_runs_serve_every_arm_of_ours_and_ours_refuse_another_arm(bench):
    default, arm = bench_args(), bench_args(structure_cap=0, explore=0)
    done = {("softmax", 0, "xgb"): record(bench, "xgb", default)}
    assert bench.check_recorded(done, arm, Path("pacm.pt"), HERE) == 0

    done[("softmax", 0, "pruner-online")] = record(bench, "pruner-online", default)
    assert bench.check_recorded(done, default, Path("pacm.pt"), HERE) == 0
    with pytest.raises(SystemExit, match=r"softmax / pruner-online / seed 0 .*\(pruner\.explore, pruner\.structure_cap\)"):
        bench.check_recorded(done, arm, Path("pacm.pt"), HERE)
    with pytest.raises(SystemExit, match=r"softmax / xgb / seed 0 .*\(trials\)"):
        bench.check_recorded(done, bench_args(trials=64), Path("pacm.pt"), HERE)


def test_runs_logged_without_settings_are_counted_and_taken_as_given(bench):
    done = {("softmax", 0, "xgb"): {"workload": "softmax", "model": "xgb", "seed": 0},
            ("softmax", 1, "xgb"): record(bench, "xgb", bench_args(), seed=1)}
    assert bench.check_recorded(done, bench_args(), Path("pacm.pt"), HERE) == 1


def test_a_run_measured_on_another_machine_is_refused(bench):
    done = {("softmax", 0, "xgb"): record(bench, "xgb", bench_args(), host={"cpu": "Intel(R) Xeon(R)", "cores_usable": 2})}
    with pytest.raises(SystemExit, match=r"softmax / xgb / seed 0 was measured on .*Intel.*not on this machine"):
        bench.check_recorded(done, bench_args(), Path("pacm.pt"), HERE)

"""Benchmark: trial efficiency and search time of MetaSchedule with our cost model against its
default XGB model and a random order, on this CPU, with a checkpoint pretrained on CPU tuning runs.

The user's path: past tuning runs (MetaSchedule work directories) of other workloads ->
``pruner-train pretrain --data DIR_OF_RUNS`` -> ``tune --checkpoint``. Here the past runs are XGB
tuning runs of the GEMM and conv operators at other shapes (workloads.OTHER_SHAPES; made with
--make-past, kept in --past), and the benchmark refuses a past run that shares a workload with the
benchmark. The grouped conv, dense + GELU, GEMV, softmax and layer norm of the default workloads
are kinds of kernel no past run has: how the model does on kernels it never saw.

Per workload x seed x model one tuning run of --trials; at each budget in --budgets the best latency
found within that many trials is read off the run's curve. Printed:
- per budget, the geometric mean over workloads and seeds of XGB's best latency / the model's
  (> 1: the model found faster programs in as many trials);
- time to XGB's final latency: XGB's search seconds to its own final best / the model's seconds to
  reach that latency (geometric mean over the runs that reached it, and how many did);
- seconds inside the cost model (predict + update), ours / XGB's, from the same runs.
Runs of one workload and seed follow each other, so load on a shared machine hits every model.

Note: MetaSchedule's XGBModel predicts uniform random scores until it holds 100 measured samples
(num_warmup_samples), so up to ~100 trials `xgb` searches like `random` and costs only its updates.

    python bench/tune.py --make-past --seeds 0 1 2 --trials 64
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = ("xgb", "pruner", "pruner-online", "random")


def seconds_to_reach(curve: dict, latency: float) -> float:
    for best, t in zip(curve["best"], curve["t"]):  # best is Infinity until a candidate ran
        if best <= latency:
            return t
    return math.inf


def within(curve: dict, key: str, trials: int, before: float) -> float:
    """``curve[key]`` at the last batch within ``trials`` (``before`` if none is). A run logged
    before the runs recorded a key has none of it, and gives ``before`` too."""
    value = before
    for v, n in zip(curve.get(key, []), curve["trials"]):
        if n > trials:
            break
        value = v
    return value


def cost_within(curve: dict, trials: int) -> float:
    """Seconds inside the cost model by ``trials``; NaN where the run did not record them per batch."""
    return within(curve, "cost", trials, float("nan"))


def best_within(curve: dict, trials: int) -> float:
    return within(curve, "best", trials, math.inf)


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if 0 < x < math.inf]
    return math.exp(statistics.mean(math.log(x) for x in xs)) if xs else float("nan")


def spread(ratios: list[float], draws: int = 2000) -> str:
    """The 5th-95th percentile of the geometric mean over resamples of the runs' paired ratios
    (one per workload x seed, drawn with replacement): how far the figure moves with which runs
    happened to be made."""
    if len(ratios) < 2:
        return ""
    rng = random.Random(0)
    means = sorted(m for m in (geomean(rng.choices(ratios, k=len(ratios))) for _ in range(draws)) if m == m)
    if not means:
        return ""
    return f"[{means[len(means) // 20]:.2f}-{means[-1 - len(means) // 20]:.2f}]"


def make_past(past: Path, trials: int, population: int) -> None:
    """XGB tuning runs of the other shapes: what a user's earlier work directories hold."""
    from pruner_offline.tuning.frontends.workloads import OTHER_SHAPES, named_workload
    from pruner_offline.tuning.run.workload import tune
    from pruner_offline.tuning.settings import TuneSettings

    for name in OTHER_SHAPES:  # tune finishes a run cut short, and measures nothing for one that finished
        r = tune(named_workload(name), name, past / name,
                 TuneSettings(cost_model="xgb", trials=trials, seed=0, population_size=population))
        print(json.dumps({"past_run": name, "best_s": r.best_latency_s, "search_s": r.search_seconds}), flush=True)


def check_disjoint(past: Path, workloads: list[str]) -> int:
    """The number of workloads in the past runs; refuses one that the benchmark tunes."""
    from tvm.s_tir import meta_schedule as ms

    from pruner_offline.sources.metaschedule_runs import MetaScheduleRunsSource
    from pruner_offline.tuning.frontends.workloads import named_workload

    source = MetaScheduleRunsSource(past)
    seen = {source.programs(u).task_key for u in source.units()}
    for wl in workloads:
        if f"ms:{ms.database.Workload(named_workload(wl)).as_json()[0]}" in seen:
            raise SystemExit(f"{past} holds a tuning run of the benchmark's workload {wl}: not an unseen workload")
    return len(seen)


def pretrain(past: Path, out: Path, cpu: str) -> Path:
    from pruner_offline.cli import main as cli

    ckpt = out / "pacm.pt"
    if not ckpt.is_file() and cli(["pretrain", "--data", str(past), "--model", "pacm", "--cpu", cpu, "--out", str(out),
                                   "--quiet"]):
        raise SystemExit("pretraining on the past runs failed")
    return ckpt


def run_settings(model: str, seed: int, args, checkpoint: Path):
    """The TuneSettings of one run: XGB's and random's do not hold our options, so their runs serve
    every arm of ours measured with the same trials, batch and population."""
    from pruner_offline.tuning.settings import PrunerSettings, TuneSettings

    common = dict(trials=args.trials, trials_per_batch=args.trials_per_batch, population_size=args.population,
                  seed=seed)
    if model.startswith("pruner"):
        online = model == "pruner-online"
        pruner = PrunerSettings(verify_max=args.verify_max, structure_cap=args.structure_cap,
                                calibrate=args.calibrate, explore=args.explore, in_task_trees=args.in_task_trees,
                                verify_pool_after=args.verify_pool_after, calibrate_unmeasured=args.calibrate_unmeasured,
                                online_epochs=args.online_epochs if online else 0,
                                online_method=args.online_method, search=args.search)
        return TuneSettings(cost_model="pruner", checkpoint=str(checkpoint), pruner=pruner, **common)
    return TuneSettings(cost_model=model, **common)


def settings_record(s) -> dict:
    """`s` as runs.jsonl holds it (a JSON round trip, so that a fresh record compares equal to a read one)."""
    import dataclasses

    return json.loads(json.dumps(dataclasses.asdict(s)))


def flat(record: dict, prefix: str = "") -> dict:
    """Nested settings as dotted names (pruner.explore), so that a refusal names the option."""
    out = {}
    for k, v in record.items():
        out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def host() -> dict:
    """What a run's latencies belong to: pairs measured on two machines compare the machines."""
    from pruner_offline.collect.manifest import machine

    m = machine()
    return {"cpu": m["cpu"], "cores_usable": m["cores_usable"]}


def check_recorded(done: dict, args, checkpoint: Path, here: dict) -> int:
    """Refuses a recorded run made with settings other than these or on another machine than `here`
    (resuming would mix two arms, or two machines, in one table); returns how many recorded neither
    (logged before runs did), which are taken as made with these, here."""
    legacy = 0
    for (wl, seed, model), r in done.items():
        if "settings" not in r:
            legacy += 1
            continue
        if r.get("host", here) != here:
            raise SystemExit(f"{args.out / 'runs.jsonl'}: the run {wl} / {model} / seed {seed} was measured on "
                             f"{r['host']}, not on this machine ({here}): give another --out")
        want = settings_record(run_settings(model, seed, args, checkpoint))
        if r["settings"] != want:
            got, want = flat(r["settings"]), flat(want)
            diff = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
            raise SystemExit(f"{args.out / 'runs.jsonl'}: the run {wl} / {model} / seed {seed} was made with other "
                             f"settings ({', '.join(diff)}): give the same options, or another --out")
    return legacy


def run_one(wl: str, model: str, seed: int, args, checkpoint: Path, here: dict) -> dict:
    from pruner_offline.tuning.frontends.workloads import named_workload
    from pruner_offline.tuning.run.workload import tune

    s = run_settings(model, seed, args, checkpoint)
    work_dir = args.out / "runs" / f"{wl}-{model}-{seed}"
    # a fresh run each time: tune would continue a database a run cut short left behind
    shutil.rmtree(work_dir, ignore_errors=True)
    r = tune(named_workload(wl), wl, work_dir, s)
    b = r.cost_model_breakdown
    return {"workload": wl, "model": model, "seed": seed, "final_s": r.best_latency_s,
            "best": r.best_latency_per_batch, "t": r.batch_end_seconds, "trials": r.trials_per_batch,
            "search_s": r.search_seconds, "cost_model_s": r.cost_model_seconds, "cost": r.cost_model_seconds_per_batch,
            "draft_s": b.get("features_draft_s", 0.0) + b.get("model_draft_model_s", 0.0),
            "draft_programs": b.get("features_draft_programs", 0), "scored": b.get("model_candidates", 0),
            "verify_s": b.get("features_full_s", 0.0) + b.get("features_key_s", 0.0) + b.get("model_verify_model_s", 0.0),
            "verified": b.get("features_full_programs", 0), "settings": settings_record(s), "host": here}


def tables(runs: list[dict], models: list[str], budgets: list[int]) -> str:
    by = {(r["workload"], r["seed"], r["model"]): r for r in runs}
    pairs = sorted({(r["workload"], r["seed"]) for r in runs})
    others = [m for m in models if m != "xgb"]
    lines = ["best latency, XGB / model (geometric mean over workloads x seeds; > 1: model better; "
             "[5-95%] over resamples of the runs)",
             f"{'model':<15}" + "".join(f"{f'{b} trials':>24}" for b in budgets)]
    for m in others:
        row = []
        for b in budgets:
            ratios = [best_within(by[(w, s, 'xgb')], b) / best_within(by[(w, s, m)], b)
                      for w, s in pairs if (w, s, m) in by and (w, s, "xgb") in by]
            row.append(f"{geomean(ratios):.3f} {spread(ratios)}")
        lines.append(f"{m:<15}" + "".join(f"{x:>24}" for x in row))
    lines += ["", "per workload at the largest budget, XGB / model (geometric mean over seeds)",
              f"{'workload':<15}" + "".join(f"{m:>15}" for m in others)]
    for w in sorted({w for w, _ in pairs}):
        cells = [geomean([best_within(by[(w, s, 'xgb')], budgets[-1]) / best_within(by[(w, s, m)], budgets[-1])
                          for ww, s in pairs if ww == w and (w, s, m) in by and (w, s, "xgb") in by]) for m in others]
        lines.append(f"{w:<15}" + "".join(f"{x:>15.3f}" for x in cells))
    # Where XGB's final program came in its first batch, reaching it sooner is impossible (times are read
    # at batch ends, and every model's first batch takes as long): a tie is the best any model can do,
    # so the speedup is also given over the runs where XGB needed more than one batch.
    lines += ["", "time to XGB's final latency: XGB seconds / model seconds (geometric mean where reached); "
                  "'later': only the runs where XGB found its final program after its first batch",
              f"{'model':<15}{'speedup':>10}{'[5-95%]':>13}{'reached':>10}{'later':>10}{'reached':>10}"]
    for m in others:
        ratios, later = [], []
        for w, s in pairs:
            x = by.get((w, s, "xgb"))
            if (w, s, m) in by and x and x["final_s"] is not None:
                ratio = seconds_to_reach(x, x["final_s"]) / seconds_to_reach(by[(w, s, m)], x["final_s"])
                ratios.append(ratio)
                if x["best"][0] > x["final_s"]:
                    later.append(ratio)
        reached, reached_later = [r for r in ratios if r > 0], [r for r in later if r > 0]
        lines.append(f"{m:<15}{geomean(reached):>10.3f}{spread(reached):>13}{f'{len(reached)}/{len(ratios)}':>10}"
                     f"{geomean(reached_later):>10.3f}{f'{len(reached_later)}/{len(later)}':>10}")
    # XGBModel predicts at random, for free, until it holds 100 measured programs: up to there its
    # cost is its updates alone, after it every generation of every search is featurized and
    # predicted. So the ratio depends on the budget, and is given at each.
    lines += ["", "seconds inside the cost model by each budget, model / XGB (geometric mean of paired ratios)",
              f"{'model':<15}" + "".join(f"{f'{b} trials':>12}" for b in budgets)]
    for m in others:
        row = [geomean([cost_within(by[(w, s, m)], b) / cost_within(by[(w, s, 'xgb')], b)
                        for w, s in pairs if (w, s, m) in by and (w, s, "xgb") in by]) for b in budgets]
        lines.append(f"{m:<15}" + "".join(f"{x:>12.3f}" for x in row))
    # per run as well as summed: a run's one-time start-up (the first run of a model in the process)
    # weighs on the sum, not on the geometric mean of the paired ratios
    lines += ["", "seconds inside the cost model (sum over runs; / xgb per run: geometric mean of paired ratios) "
              "and per scored candidate",
              f"{'model':<15}{'cost s':>10}{'/ xgb':>8}{'per run':>9}{'search s':>10}{'draft us/new':>14}"
              f"{'verify us/prog':>16}{'verify/draft':>14}"]
    xgb_cost = sum(r["cost_model_s"] for r in runs if r["model"] == "xgb")
    for m in models:
        rs = [r for r in runs if r["model"] == m]
        cost = sum(r["cost_model_s"] for r in rs)
        per_run = geomean([r["cost_model_s"] / by[(r["workload"], r["seed"], "xgb")]["cost_model_s"]
                           for r in rs if (r["workload"], r["seed"], "xgb") in by])
        draft = 1e6 * sum(r["draft_s"] for r in rs) / max(1, sum(r["draft_programs"] for r in rs))
        verify = 1e6 * sum(r["verify_s"] for r in rs) / max(1, sum(r["verified"] for r in rs))
        lines.append(f"{m:<15}{cost:>10.2f}{cost / xgb_cost if xgb_cost else float('nan'):>8.2f}{per_run:>9.2f}"
                     f"{sum(r['search_s'] for r in rs):>10.1f}{draft:>14.0f}{verify:>16.0f}"
                     f"{verify / draft if draft else float('nan'):>14.1f}")
    return "\n".join(lines)


def main() -> None:
    from pruner_offline.tuning.settings import SEARCHES, PrunerSettings
    from pruner_offline.tuning.cost_model.calibration import UNMEASURED
    from pruner_offline.tuning.frontends.workloads import WORKLOADS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", nargs="+", choices=list(WORKLOADS),
                    default=[w for w in WORKLOADS if w != "matmul-small"])
    ap.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--budgets", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--trials-per-batch", type=int, default=16)
    ap.add_argument("--population", type=int, default=128, help="evolutionary search population (MetaSchedule: 512)")
    ap.add_argument("--verify-max", type=int, default=32)
    # tune's own defaults; runs with other values belong in another --out
    ap.add_argument("--structure-cap", type=int, default=PrunerSettings.structure_cap, help="tune --structure-cap")
    ap.add_argument("--calibrate", action=argparse.BooleanOptionalAction, default=PrunerSettings.calibrate,
                    help="tune --calibrate")
    ap.add_argument("--explore", type=int, default=PrunerSettings.explore, help="tune --explore")
    ap.add_argument("--in-task-trees", type=int, default=PrunerSettings.in_task_trees, help="tune --in-task-trees")
    ap.add_argument("--calibrate-unmeasured", choices=UNMEASURED, default=PrunerSettings.calibrate_unmeasured,
                    help="tune --calibrate-unmeasured")
    ap.add_argument("--verify-pool-after", type=int, default=PrunerSettings.verify_pool_after,
                    help="tune --verify-pool-after")
    ap.add_argument("--online-epochs", type=int, default=5)
    ap.add_argument("--online-method", choices=("guarded", "retrain", "moa"), default="guarded")
    ap.add_argument("--search", choices=SEARCHES, default=SEARCHES[0], help="our models' search strategy "
                    "(runs of another strategy belong in another --out)")
    ap.add_argument("--past", type=Path, default=REPO / "runs" / "bench-tune" / "past",
                    help="directory of past tuning runs to pretrain on")
    ap.add_argument("--make-past", action="store_true", help="first tune workloads.OTHER_SHAPES with XGB into --past")
    ap.add_argument("--past-trials", type=int, default=64)
    ap.add_argument("--checkpoint", type=Path, help="PaCM model file (default: pretrained on --past, which is then "
                    "checked to share no workload with the benchmark)")
    ap.add_argument("--cpu", default="epyc-2vcpu", help="device constants of the draft score when pretraining")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "bench-tune")
    ap.add_argument("--report-only", action="store_true", help="print the tables of the runs in OUT/runs.jsonl; "
                    "run nothing (several processes' logs, concatenated, make one report)")
    args = ap.parse_args()
    budgets = sorted(b for b in args.budgets if b <= args.trials) or [args.trials]

    import torch

    torch.set_num_threads(1)
    if args.make_past:
        make_past(args.past, args.past_trials, args.population)
    if args.checkpoint:  # a model file of the user's: no past runs are read
        n_past, checkpoint = 0, args.checkpoint
    else:
        n_past = check_disjoint(args.past, args.workloads)
        checkpoint = pretrain(args.past, args.out / "pretrain", args.cpu)
    log = args.out / "runs.jsonl"
    done = {}
    if log.is_file():  # resume: a run already recorded is not repeated
        for line in log.read_text().splitlines():
            r = json.loads(line)
            done[(r["workload"], r["seed"], r["model"])] = r
    here = host()
    legacy = check_recorded(done, args, checkpoint, here)
    if legacy:
        print(f"{legacy} recorded runs hold no settings: taken as made with these, on this machine", flush=True)
    for seed in args.seeds:  # seed-major: an interrupted benchmark still covers every workload
        for wl in args.workloads:
            for model in args.models:
                if (wl, seed, model) not in done and not args.report_only:
                    r = run_one(wl, model, seed, args, checkpoint, here)
                    done[(wl, seed, model)] = r
                    with open(log, "a") as f:
                        f.write(json.dumps(r) + "\n")
                    print(json.dumps({k: r[k] for k in ("workload", "model", "seed", "final_s", "search_s",
                                                        "cost_model_s")}), flush=True)
    runs = [r for r in done.values() if r["workload"] in args.workloads and r["seed"] in args.seeds
            and r["model"] in args.models]
    print(f"trials {args.trials} (budgets {budgets}), batch {args.trials_per_batch}, population {args.population}, "
          f"seeds {args.seeds}, verify_max {args.verify_max}, structure cap {args.structure_cap}, calibrate {args.calibrate}, explore {args.explore}, in-task trees {args.in_task_trees}, verify pool after {args.verify_pool_after}, unmeasured {args.calibrate_unmeasured}, online {args.online_method} x {args.online_epochs} "
          f"epochs, search {args.search}; on {here['cpu']} ({here['cores_usable']} cores); checkpoint {checkpoint}" + (f" pretrained on {n_past} workloads of {args.past}, none benchmarked"
                                                if n_past else " (given)"))
    print(tables(runs, [m for m in MODELS if m in args.models], budgets))


if __name__ == "__main__":
    main()

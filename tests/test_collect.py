"""pruner-train collect and the measurement layer it shares with tune: real builds and runs on this
machine, a kill -9 and a rerun, a TVM RPC tracker and server on 127.0.0.1, kernels that hang and
crash their worker."""

import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import cloudpickle
import pytest

CLI = [sys.executable, "-m", "pruner_offline.cli"]


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=timeout)


def _records(out: Path) -> list[list]:
    path = out / "database_tuning_record.json"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def _program_hashes(out: Path) -> list[int]:
    """The structural hash of every record's scheduled program, as TVM replays it."""
    import tvm_ffi
    from tvm import s_tir
    from tvm.s_tir import meta_schedule as ms

    database = ms.database.JSONDatabase(work_dir=str(out))
    out_hashes = []
    for record in database.get_all_tuning_records():
        sch = s_tir.Schedule(record.workload.mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        out_hashes.append(int(tvm_ffi.structural_hash(sch.mod)))
    return out_hashes


def test_collect_measures_distinct_programs_that_info_and_featurize_read(tmp_path):
    out = tmp_path / "c"
    done = _run("collect", "--workload", "matmul-small", "--programs-per-task", "20", "--batch", "8",
                "--out", str(out), "--json", "--quiet")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["measured"] == 20 and report["held"] == 20 and report["tasks"] == 1
    records = _records(out)
    assert len(records) == 20
    ok = [r for r in records if all(0 < s < 1e9 for s in r[1][1])]
    assert len(ok) == 20 - sum(report["failed"].values()) and len(ok) >= 15
    assert len(set(_program_hashes(out))) == 20
    manifest = json.loads((out / "collect.json").read_text())
    assert manifest["settings"]["measure"]["cpu_cache_flush"] is True
    assert manifest["settings"]["target"]["kind"] == "llvm" and manifest["machine"]["tvm"]
    assert manifest["runs"][-1]["measured"] == 20 and manifest["runs"][-1]["ended"]
    [task] = manifest["runs"][-1]["tasks"]
    assert task["name"] == "matmul-small" and task["origin"] == "built-in" and task["weight"] == 1
    info = _run("info", str(out), "--json")
    assert info.returncode == 0 and json.loads(info.stdout.splitlines()[-1])["records"] == 20
    # shipped gzipped (datasets/cpu-collect), the database reads the same
    packed = tmp_path / "packed"
    packed.mkdir()
    for name in ("database_workload.json", "database_tuning_record.json"):
        with open(out / name, "rb") as fin, gzip.open(packed / f"{name}.gz", "wb") as fout:
            shutil.copyfileobj(fin, fout)
    info = _run("info", str(packed), "--json")
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout.splitlines()[-1])["records"] == 20
    store = tmp_path / "c.h5"
    feat = _run("featurize", str(out), "--out", str(store), "--quiet")
    assert feat.returncode == 0, feat.stderr
    assert json.loads(feat.stdout.splitlines()[-1])["replayed"] == 20

    # the same command again measures nothing; more programs per task continue the set
    again = _run("collect", "--workload", "matmul-small", "--programs-per-task", "26", "--batch", "8",
                 "--out", str(out), "--json", "--quiet")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.splitlines()[-1])["measured"] == 6
    assert len(set(_program_hashes(out))) == 26
    # data measured another way is never mixed in
    other = _run("collect", "--workload", "matmul-small", "--programs-per-task", "30", "--number", "5",
                 "--out", str(out), "--quiet")
    assert other.returncode == 2 and "number 3 there, 5 now" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1


def test_collect_killed_with_sigkill_and_rerun_ends_with_exactly_the_programs_asked(tmp_path):
    out = tmp_path / "c"
    cmd = CLI + ["collect", "--network", "mlp", "--programs-per-task", "16", "--batch", "4", "--out", str(out),
                 "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while len(_records(out)) < 6:
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "never measured a batch"
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    held = len(_records(out))
    assert 0 < held < 48
    rerun = subprocess.run(cmd + ["--json"], capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout.splitlines()[-1])
    records = _records(out)
    assert Counter(r[0] for r in records) == {0: 16, 1: 16, 2: 16}
    assert report["held"] == 48 and report["measured"] == 48 - held
    assert len(set(_program_hashes(out))) == 48  # no program measured twice
    assert len({json.dumps(r) for r in records}) == 48
    manifest = json.loads((out / "collect.json").read_text())
    # the killed run: no end, and the programs it appended counted (its entry follows every batch;
    # the kill may fall between a batch of 4 reaching the database and the entry)
    assert manifest["runs"][0]["ended"] is None and held - 4 <= manifest["runs"][0]["measured"] <= held
    assert manifest["runs"][1]["measured"] == 48 - held
    # a store of the collection knows the network of every task: holdout:mlp splits by it
    from pruner_offline.sources.metaschedule import MetaScheduleSource

    networks = MetaScheduleSource(out).networks()
    workloads = [json.loads(line)[0] for line in (out / "database_workload.json").read_text().splitlines()]
    assert sorted(networks) == sorted(f"ms:{w}|llvm" for w in workloads)
    assert all(list(n) == ["mlp"] and min(n.values()) >= 1 for n in networks.values())


def test_random_programs_replay_as_the_search_replays_the_records_it_starts_from(tmp_path):
    """The evolutionary search starts from measured records, replayed without their postprocessing
    and postprocessed again: a random draw must mark where its postprocessing starts, or the
    replay applies it twice (a conv's loops no longer match: TVM stops the run)."""
    import tvm_ffi
    from tvm import s_tir
    from tvm.s_tir import meta_schedule as ms

    from pruner_offline.collect.sampler import TaskSampler
    from pruner_offline.targets import tuning_target
    from pruner_offline.tuning.frontends.workloads import named_workload

    mod, target = named_workload("conv2d"), tuning_target("llvm", 2, None)
    database = ms.database.JSONDatabase(work_dir=str(tmp_path))
    sampler = TaskSampler(mod, target, database, seed=3, random_fraction=1.0, batch=8, population_size=16,
                          num_threads=2, seen=set())
    drawn = sampler.next_batch(8)
    assert len(drawn) == 8 and sampler.counts.random == 8
    for cand in drawn:
        again = s_tir.Schedule(mod)
        cand.sch.trace.apply_to_schedule(again, remove_postproc=True)
        assert all(p.apply(again) for p in sampler.context.space_generator.postprocs)
        assert tvm_ffi.structural_hash(again.mod) == tvm_ffi.structural_hash(cand.sch.mod)
    sampler.close()


def test_shards_split_the_tasks_between_them():
    from pruner_offline.collect.run import select_shard
    from pruner_offline.collect.tasks import workload_tasks

    tasks = workload_tasks(["matmul", "matmul-small", "conv2d", "dense", "depthwise"])
    shards = [[t.name for t in select_shard(tasks[::-1] if i % 2 else tasks, i, 3)] for i in range(3)]
    names = [n for s in shards for n in s]
    assert sorted(names) == sorted(t.name for t in tasks) and all(shards)


def test_collect_refuses_cuda_with_nowhere_to_measure_before_any_work(tmp_path):
    import tvm

    if tvm.cuda(0).exist:
        pytest.skip("a CUDA GPU is visible here")
    done = _run("collect", "--workload", "matmul-small", "--target", "cuda", "--device", "h200",
                "--out", str(tmp_path / "c"))
    assert done.returncode == 2 and "no CUDA GPU is visible here" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "c").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(ready, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"{what} did not come up in {timeout} s"
        time.sleep(0.3)


@pytest.fixture
def rpc_tracker():
    """A TVM RPC tracker and one server under key 'cpu-test', on 127.0.0.1 only, ended by the test."""
    pytest.importorskip("tornado", reason="TVM's RPC tracker needs tornado (the test extra installs it)")
    from pruner_offline.measure.measurers import tracker_devices
    from pruner_offline.measure.settings import RPCSettings

    port = _free_port()
    procs = [subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1",
                               "--port", str(port), "--port-end", str(port + 1)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        def up() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False
        _wait_for(up, "the tracker")
        procs.append(subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_server", "--host", "127.0.0.1",
                                       "--tracker", f"127.0.0.1:{port}", "--key", "cpu-test"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

        def registered() -> bool:
            try:
                return tracker_devices(RPCSettings("127.0.0.1", port, "cpu-test"), timeout_s=2) > 0
            except ValueError:
                return False
        _wait_for(registered, "the RPC server")
        yield port
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def test_collect_measures_through_a_tvm_rpc_tracker(tmp_path, rpc_tracker):
    out = tmp_path / "c"
    done = _run("collect", "--workload", "matmul-small", "--programs-per-task", "8", "--batch", "4",
                "--rpc-tracker", f"127.0.0.1:{rpc_tracker}", "--rpc-key", "cpu-test", "--out", str(out),
                "--json", "--quiet")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["measured"] == 8 and not report["failed"], report
    assert all(0 < s < 1 for r in _records(out) for s in r[1][1])
    assert json.loads((out / "collect.json").read_text())["settings"]["measured_on"].startswith("rpc 127.0.0.1:")
    wrong = _run("collect", "--workload", "matmul-small", "--rpc-tracker", f"127.0.0.1:{rpc_tracker}",
                 "--rpc-key", "no-such-key", "--out", str(tmp_path / "d"))
    assert wrong.returncode == 2 and "holds no device with key 'no-such-key'" in wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1


def test_tune_measures_through_the_same_tracker(tmp_path, rpc_tracker):
    done = _run("tune", "--workload", "matmul-small", "--trials", "4", "--trials-per-batch", "2", "--population", "16",
                "--seed", "0", "--checkpoint", str(Path(__file__).resolve().parents[1] / "checkpoints" / "pacm.pt"),
                "--search-device", "epyc-2vcpu", "--rpc-tracker", f"127.0.0.1:{rpc_tracker}", "--rpc-key", "cpu-test",
                "--work-dir", str(tmp_path / "w"), "--quiet")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["trials"] == 4 and 0 < report["best_latency_s"] < 1
    assert len(_records(tmp_path / "w")) == 4


def test_collect_refuses_a_tracker_nobody_runs(tmp_path):
    done = _run("collect", "--workload", "matmul-small", "--rpc-tracker", f"127.0.0.1:{_free_port()}",
                "--rpc-key", "k", "--out", str(tmp_path / "c"))
    assert done.returncode == 2 and "cannot connect" in done.stderr and not (tmp_path / "c").exists()


def _flaky(job):
    """A stand-in for the timing worker: the artifact's name says whether the kernel hangs or crashes."""
    path = job[0]
    if path == "hang":
        time.sleep(120)
    if path == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    return [1e-3]


def test_a_kernel_that_hangs_or_crashes_fails_alone_and_its_worker_is_replaced():
    from tvm.s_tir.meta_schedule.runner import RunnerInput

    from pruner_offline.measure.outcome import failure_reason
    from pruner_offline.measure.runner import PooledRunner
    from pruner_offline.measure.settings import MeasureSettings

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the worker cannot import this test file
    runner = PooledRunner(MeasureSettings(run_timeout_s=3), measure=_flaky)
    try:
        start = time.monotonic()
        results = [f.result() for f in runner.run([RunnerInput(p, "cpu", []) for p in ("ok", "hang", "ok", "crash", "ok")])]
        assert time.monotonic() - start < 60
    finally:
        runner.close()
    reasons = [failure_reason(None, r.error_msg) for r in results]
    assert reasons == [None, "run_timeout", None, "run_crash", None]
    assert results[4].run_secs is not None and float(results[4].run_secs[0]) == pytest.approx(1e-3)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here: CUDA programs cannot be built")
def test_cuda_programs_of_a_real_search_build_with_nvcc_for_sm_90_without_a_gpu(tmp_path):
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.builder import BuilderInput

    from pruner_offline.collect.sampler import TaskSampler
    from pruner_offline.measure.builder import PooledBuilder
    from pruner_offline.targets import tuning_target
    from pruner_offline.tuning.frontends.workloads import named_workload

    target = tuning_target("cuda", 2, "h200")
    sampler = TaskSampler(named_workload("matmul-small"), target, ms.database.MemoryDatabase(), seed=0,
                          random_fraction=0.5, batch=4, population_size=32, num_threads=1, seen=set())
    candidates = sampler.next_batch(4)
    builder = PooledBuilder(max_workers=1, timeout_sec=120)
    try:
        built = builder.build([BuilderInput(c.sch.mod, target) for c in candidates])
    finally:
        builder.close()
    assert len(built) == 4 and all(b.error_msg is None for b in built), [b.error_msg for b in built]
    assert all(Path(b.artifact_path).stat().st_size > 0 for b in built)


def test_collect_measures_a_tenset_datasets_programs_into_tensets_layout(tmp_path, tenset_mini):
    """--tenset: to_measure_programs/ replayed, built and timed here, written as TenSet's
    measure_records/DEVICE/ lines; a rerun after a line cut short, and one asking for more, go on
    from what the output holds; info and featurize read the output as a TenSet dataset."""
    name = "([023dee82f41c4b3ee991e7ec3fe00350,[32,64],[10,64],[1,10],[32,10]],llvm).json"
    ds = tmp_path / "ds"
    (ds / "to_measure_programs").mkdir(parents=True)
    shutil.copytree(tenset_mini / "network_info", ds / "network_info")
    source = (tenset_mini / "measure_records" / "epyc-zen3" / name).read_text().splitlines()[:6]
    (ds / "to_measure_programs" / name).write_text("\n".join(source) + "\n")
    out = tmp_path / "out"
    common = ["collect", "--tenset", str(ds), "--target", "llvm", "--batch", "2", "--records-device", "test-cpu",
              "--out", str(out), "--json", "--quiet"]
    done = _run(*common, "--programs-per-task", "4")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["measured"] == 4 and report["held"] == 4 and report["tasks"] == 1
    result = out / "measure_records" / "test-cpu" / name
    lines = [json.loads(line) for line in result.read_text().splitlines()]
    assert [line["i"] for line in lines] == [json.loads(line)["i"] for line in source[:4]]
    assert all(line["r"][1] == 0 and all(0 < c < 1 for c in line["r"][0]) for line in lines), lines
    # a run stopped while writing its last line: the rerun drops it and measures that program again
    with open(result, "a") as f:
        f.write(json.dumps(lines[0])[:50])
    done = _run(*common, "--programs-per-task", "6")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["measured"] == 2 and report["held"] == 6
    lines = [json.loads(line) for line in result.read_text().splitlines()]
    assert [line["i"] for line in lines] == [json.loads(line)["i"] for line in source]
    info = _run("info", str(out), "--json", "--quiet")
    assert info.returncode == 0, info.stderr
    summary = json.loads(info.stdout.splitlines()[-1])
    assert summary["records"] == 6 and summary["devices"] == {"test-cpu": 6}
    feat = _run("featurize", str(out), "--out", str(tmp_path / "s.h5"), "--quiet")
    assert feat.returncode == 0, feat.stderr
    assert json.loads(feat.stdout.splitlines()[-1])["replayed"] == 6
    refused = _run("collect", "--tenset", str(ds), "--target", "cuda", "--device", "h200", "--out", str(tmp_path / "x"))
    assert refused.returncode == 2 and "no cuda programs in to_measure_programs/" in refused.stderr

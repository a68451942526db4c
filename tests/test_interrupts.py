"""A command stopped by Ctrl-C or SIGTERM ends with one line and 130 / 143, and its work continues.

Each runs the real console command in a process of its own and signals that process alone (a
terminal signals the whole process group, TVM's worker processes included, which print their own
KeyboardInterrupt; that is theirs to say)."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from synthetic import synthetic_store

CLI = [sys.executable, "-m", "pruner_offline.cli"]


def _signal_when(proc: subprocess.Popen, ready, signum: int, timeout: float = 240) -> tuple[int, str]:
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, f"ended before it could be interrupted:\n{proc.communicate()[1]}"
        assert time.monotonic() < deadline, "never got to the point to interrupt"
        time.sleep(0.2)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.is_file() else 0


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_tune_stopped_between_batches_ends_in_one_line_and_continues(tmp_path, signum):
    # Ctrl-C raised inside MetaSchedule's C++ loop ended in a segfault or a hang (a fuzzing pass)
    work = tmp_path / "work"
    cmd = CLI + ["tune", "--workload", "matmul-small", "--cost-model", "random", "--trials", "12",
                 "--trials-per-batch", "4", "--population", "16", "--work-dir", str(work), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    records = work / "database_tuning_record.json"
    code, err = _signal_when(proc, lambda: _lines(records) >= 4, signum)
    assert code == 128 + signum, err
    assert err.strip().splitlines()[-1] == \
        f"pruner-train: interrupted; the same command continues from the trials measured in {work}"
    assert "Traceback" not in err and "Segfault" not in err
    measured = _lines(records)
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert report["resumed_trials"] == measured >= 4 and report["trials"] == 12


def test_pretrain_stopped_by_sigterm_says_so_and_writes_no_model(tmp_path):
    # Lightning took SIGTERM as "stop early" and the command exited 0 as if it had trained: a batch
    # system recorded a preempted job as a success
    store = synthetic_store(tmp_path / "s.h5", n_tasks=6, per_task=400)
    out = tmp_path / "run"
    proc = subprocess.Popen(CLI + ["pretrain", "--data", str(store), "--model", "pacm", "--max-epochs", "500",
                                   "--out", str(out), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    code, err = _signal_when(proc, lambda: any((out / "pacm").rglob("*.ckpt")), signal.SIGTERM)
    assert code == 143, err
    assert err.strip().splitlines()[-1] == "pruner-train: interrupted"
    assert not (out / "pacm.pt").exists()

"""The record lines of TVM's auto-scheduler history (for bench/public_history.py), and, for each
ResNet line keyed by a bare hash (log v0.3: the key of a compute DAG an older TVM built), the
ansor-public-logs tasks of its target kind on which our replay of it succeeds.

Runs under the package's interpreter; bench/public_history.py (under hhb-tvm) then keeps a line
where Ansor's own bound inference confirms exactly one of these tasks. Ansor's C++ crashes on
steps that do not fit a compute, so only tasks our replay accepted are handed to it.

    python bench/public_history_candidates.py /tmp/tvm-git /tmp/candidates.json

The module-level parts use the standard library only, so that the builder imports them under
hhb-tvm too.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
from collections import defaultdict
from pathlib import Path

LOG_DIRS = ("gallery/how_to/tune_with_autoscheduler/ci_logs", "tutorials/auto_scheduler/ci_logs")
# the last commit with Ansor's unit tests (the next one removed them), and the tests holding record lines
UNIT_TESTS = ("bd67d2e5eb^", ("tests/python/unittest/test_auto_scheduler_feature.py",
                              "tests/python/unittest/test_auto_scheduler_search_task.py",
                              "tests/python/unittest/test_tir_transform_common_subexpr_elim.py"))
NETWORK_LOGS = ("resnet-18-NHWC-B1-cuda.json", "resnet-18-NHWC-B1.json", "resnet-50-NHWC-B1-llvm.json")
PUBLIC_TASKS = Path(__file__).resolve().parents[1] / "datasets" / "ansor-public-logs" / "network_info" / "all_tasks.pkl"


def published_lines(tvm_git: Path) -> dict[str, list[str]]:
    """Every distinct record line of each tutorial log, over all commits that touched one."""
    git = ["git", "-C", str(tvm_git)]
    out: dict[str, dict[str, None]] = defaultdict(dict)
    for log_dir in LOG_DIRS:
        commits = subprocess.run(git + ["log", "--all", "--format=%H", "--", log_dir], check=True,
                                 capture_output=True, text=True).stdout.split()
        for commit in commits:
            names = subprocess.run(git + ["ls-tree", "--name-only", f"{commit}:{log_dir}"],
                                   capture_output=True, text=True).stdout.split()
            for name in names:
                text = subprocess.run(git + ["show", f"{commit}:{log_dir}/{name}"], capture_output=True,
                                      text=True).stdout
                out[name].update((line, None) for line in text.splitlines() if line.startswith("{"))
    commit, paths = UNIT_TESTS
    for path in paths:  # string constants of the test sources that are record lines
        source = subprocess.run(git + ["show", f"{commit}:{path}"], check=True, capture_output=True, text=True).stdout
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lstrip().startswith('{"i"'):
                out["unit-tests.json"].update((line.strip(), None) for line in node.value.splitlines() if line.strip())
    return {name: sorted(lines) for name, lines in out.items()}


def bare_hash(line: str) -> bool:
    return len(json.loads(json.loads(line)["i"][0][0])) == 1


def main() -> None:
    import dataclasses

    from pruner_offline.replay import replay_record
    from pruner_offline.tenset.records import Record, parse_lines, parse_workload_key
    from pruner_offline.tenset.tasks import load_all_tasks

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tvm_git", type=Path, help="a clone of apache/tvm with its history")
    ap.add_argument("out", type=Path, help="JSON: {record line: [task keys]}")
    args = ap.parse_args()
    tasks = load_all_tasks(PUBLIC_TASKS)
    out: dict[str, list[str]] = {}
    for log, lines in published_lines(args.tvm_git).items():
        for line in lines if log in NETWORK_LOGS else ():
            if not bare_hash(line):
                continue
            (rec,) = parse_lines([line.encode()], log)
            if not isinstance(rec, Record):
                continue
            out[line] = [t.key[0] for t in tasks if t.key[1] == rec.target_kind and replay_record(
                t, dataclasses.replace(rec, workload_key=parse_workload_key(t.key[0]))).ok]
    args.out.write_text(json.dumps(out))
    print(json.dumps({"lines": len(out), "with candidates": sum(bool(v) for v in out.values())}))


if __name__ == "__main__":
    main()

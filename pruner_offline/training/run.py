"""Pretraining driven by LightningCLI and the YAML recipes in ``training/``.

The command line of ``pruner-train pretrain`` becomes LightningCLI arguments layered over the
recipe, so a run can equally be started with ``python -m pruner_offline.training.lightning_cli``.
A run directory holds ``run/checkpoints/last.ckpt``; starting the same command again resumes
from it.
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

import torch
import yaml

from ..bundled import recipe
from ..errors import BadInput, dumps, why_not_loaded
from ..interrupts import Terminated
from ..models.registry import model_spec
from ..store.reader import FeatureStore
from .data import StoreDataModule
from .evaluate import Evaluation, evaluate_module, reference_metrics
from .export import ModelFileError, export_model
from .lightning_cli import CostModelCLI
from .lightning_voice import lightning_voice
from .module import CostModelModule



@dataclass
class PretrainResult:
    model: str
    model_file: Path
    evaluation: Evaluation  # on the split's test records
    train_seconds: float
    epochs: int
    reference_of: Callable[[], dict[str, dict]] = field(repr=False)

    @cached_property
    def reference(self) -> dict[str, dict]:
        """The analytic draft and a random order on the same test records: what ranking them costs
        nothing. Made when first read: a run of several models reports it once (every model is
        tested on the same records), and on a large split it costs seconds (reference_metrics)."""
        return self.reference_of()


def training_meta(store: Path, split: str, seed: int, evaluation: Evaluation, dm: StoreDataModule,
                  seconds: float) -> dict:
    """What every model file says of its training: the data (and how its features were made), the
    split, and the test scores."""
    store_meta = FeatureStore(store).meta
    kinds = store_meta.get("target_kinds", [])
    return {"store": str(store), "split": split, "seed": seed, "test_metrics": evaluation.metrics,
            "data_fingerprint": store_meta.get("source_fingerprint"),
            # a store combined of datasets (pruner-train merge): which, so that evaluate knows each again
            **({"data_parts": [{k: p.get(k) for k in ("dataset", "source_fingerprint", "records")}
                               for p in store_meta["combined_from"]]} if "combined_from" in store_meta else {}),
            "devices": {k: v for k, v in store_meta.get("devices", {}).items() if k in kinds},
            "train_records": int(len(dm.train_rows)), "test_records": int(len(dm.test_rows)),
            "train_seconds": round(seconds, 2)}


def recipe_configs(model: str, extra: Sequence[Path] = ()) -> list[Path]:
    return [recipe(n) for n in model_spec(model).recipes] + list(extra)


def check_resumable(ckpt: Path) -> None:
    """Refuse a checkpoint Lightning could not resume from, before any training starts."""
    try:
        torch.load(ckpt, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - unpickling errors come in many types
        raise ModelFileError(f"{ckpt}: cannot resume from it ({why_not_loaded(exc)}); "
                             "delete it to train from the start") from None


def check_recipes(paths: Sequence[Path]) -> None:
    """Refuse a recipe file that is missing or not a YAML mapping, naming it: LightningCLI's own
    message for a YAML error says neither which of the layered files it is in nor anything but
    its usage text, ~60 lines."""
    for path in paths:
        try:
            loaded = yaml.safe_load(Path(path).read_text())
        except OSError as exc:
            raise BadInput(f"{path}: cannot read the recipe ({exc.strerror or exc})") from None
        except yaml.YAMLError as exc:
            mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None) or str(exc)
            where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
            column = f"column {mark.column + 1}: " if mark is not None else ""
            raise BadInput(f"{where}: not a YAML recipe ({column}{' '.join(problem.split())})") from None
        if not isinstance(loaded, dict):  # empty: LightningCLI said only "Unexpected config:"
            raise BadInput(f"{path}: a recipe is a YAML mapping of sections (model:, data:, trainer:), "
                           f"not {'an empty file' if loaded is None else 'a ' + type(loaded).__name__}")


def make_cli(args: list[str]) -> CostModelCLI:
    """The LightningCLI of a run. A recipe value the parser refuses (an unknown key, a wrong
    type) is the user's to fix, said in one line instead of the parser's usage text."""
    try:
        return CostModelCLI(CostModelModule, StoreDataModule, run=False, args=args,
                            save_config_kwargs={"overwrite": True}, auto_configure_optimizers=False,
                            parser_kwargs={"exit_on_error": False})
    except argparse.ArgumentError as exc:
        raise BadInput(f"recipe: {' '.join(str(exc).split())} (the keys: python -m "
                       "pruner_offline.training.lightning_cli fit --help)") from None


def check_trainer_flags(flags: dict[str, Optional[object]]) -> None:
    """Refuse Trainer settings Lightning cannot use (an unknown strategy, an accelerator this
    machine lacks, devices it does not have), before any data is read; Lightning raised them from
    inside the LightningCLI as assorted exceptions."""
    from lightning import Trainer
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    given = {k: v for k, v in flags.items() if v is not None}
    if not given:
        return
    try:
        with lightning_voice(True):
            Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False, **given)
    except (ValueError, TypeError, ImportError, MisconfigurationException) as exc:
        options = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in given.items())
        raise BadInput(f"{options}: {' '.join(str(exc).split())[:300]}") from None


@contextmanager
def interrupts_told(trainer) -> Iterator[None]:
    """A fit that was stopped raises the interrupt (KeyboardInterrupt, or interrupts.Terminated for
    SIGTERM) instead of returning as if done. Lightning ends a fit interrupted by Ctrl-C with
    sys.exit(1) after its own shutdown, leaving SIGINT ignored; and where it handles SIGTERM itself
    (no handler installed before it, as the CLI installs one), it stops training early and returns.
    The model written then would be an unfinished one, and the exit code that of a success."""
    sigint = signal.getsignal(signal.SIGINT)
    try:
        yield
    except SystemExit as exc:
        if not trainer.interrupted:
            raise
        raise (Terminated() if trainer.received_sigterm else KeyboardInterrupt()) from None
    finally:
        if sigint is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, sigint)
    if trainer.received_sigterm:
        raise Terminated()


def pretrain(store: Path, model: str, split: str, out_dir: Path, *, max_epochs: Optional[int] = None,
             seed: int = 0, accelerator: Optional[str] = None, devices: Optional[str] = None,
             strategy: Optional[str] = None, num_nodes: Optional[int] = None, batch_size: Optional[int] = None, extra_configs: Sequence[Path] = (),
             progress: bool = True, quiet: bool = False, feature_schema: str = "") -> Optional[PretrainResult]:
    """Train ``model`` on ``store`` and write ``out_dir/<model>.pt``. In a multi-process run
    (``strategy="ddp"``) every rank trains and only rank 0 evaluates and writes the model file;
    the other ranks return None. ``quiet``: no model summary nor Lightning's start-up report.
    """
    configs = recipe_configs(model, extra_configs)
    check_recipes(configs)
    check_trainer_flags({"accelerator": accelerator, "devices": devices, "strategy": strategy, "num_nodes": num_nodes})
    run_dir = out_dir / model
    args = [a for c in configs for a in ("--config", str(c))]
    args += ["--model.model", model, "--model.feature_schema", feature_schema,
             "--data.store", str(store), "--data.split", split, "--seed_everything", str(seed),
             "--trainer.logger.init_args.save_dir", str(run_dir),
             "--trainer.enable_progress_bar", str(progress).lower()]
    if quiet:
        args += ["--trainer.enable_model_summary", "false"]
    for flag, value in (("max_epochs", max_epochs), ("accelerator", accelerator), ("devices", devices),
                        ("strategy", strategy), ("num_nodes", num_nodes)):
        if value is not None:
            args += [f"--trainer.{flag}", str(value)]
    if batch_size is not None:
        args += ["--data.batch_size", str(batch_size)]
    last = run_dir / "run" / "checkpoints" / "last.ckpt"
    if last.is_file():
        check_resumable(last)
    with lightning_voice(quiet):
        cli = make_cli(args)
        start = time.perf_counter()
        with interrupts_told(cli.trainer):
            cli.trainer.fit(cli.model, datamodule=cli.datamodule, ckpt_path=str(last) if last.is_file() else None)
        seconds = time.perf_counter() - start
        if not cli.trainer.is_global_zero:
            return None
        best = cli.trainer.checkpoint_callback.best_model_path if cli.trainer.checkpoint_callback else ""
        module = CostModelModule.load_from_checkpoint(best, weights_only=True) if best else cli.model
        dm = cli.datamodule
        evaluation = evaluate_module(module, dm)
    meta = {**training_meta(store, split, seed, evaluation, dm, seconds), "epochs": int(cli.trainer.current_epoch)}
    model_file = export_model(module, out_dir / f"{model}.pt", meta)
    (out_dir / f"{model}.json").write_text(dumps(meta, indent=1, sort_keys=True))
    return PretrainResult(model, model_file, evaluation, seconds, int(cli.trainer.current_epoch),
                          lambda: reference_metrics(dm, dm.test_rows, seed))

"""Settings of online adaptation (no torch import: the command line is built from them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class MethodSpec:
    name: str
    tune_name: Optional[str]  # as `tune --online-method` offers it; None: not in tuning runs


# "guarded" first: the default (docs/adaptation.md says why). In tuning runs, plain fine-tuning is
# "retrain"; scratch throws the pretrained model away and frozen adapts nothing, so neither is offered.
METHOD_SPECS = (MethodSpec("guarded", "guarded"), MethodSpec("moa", "moa"), MethodSpec("finetune", "retrain"),
                MethodSpec("scratch", None), MethodSpec("frozen", None))
METHODS = tuple(m.name for m in METHOD_SPECS)
ONLINE_METHODS = {m.tune_name: m.name for m in METHOD_SPECS if m.tune_name}  # tune's name -> method


@dataclass(frozen=True)
class AdaptConfig:
    momentum: float = field(default=0.99, metadata={"help": "moa: weight of the momentum copy in each update",
                                                    "min": 0.0, "max": 1.0})
    round_size: int = field(default=10, metadata={"help": "programs measured per round", "flag": "--round", "min": 1})
    retrain_every: int = field(default=4, metadata={"help": "rounds between retrains", "min": 1})
    epochs: int = field(default=30, metadata={"help": "passes over the online records per retrain", "min": 1})
    lr: float = field(default=7e-4, metadata={"help": "learning rate of the retrains", "above": 0.0})
    batch_size: int = field(default=512, metadata={"help": "online records per gradient step", "min": 2})
    seed: int = field(default=0, metadata={"help": "seed of the retrains' shuffling and initialisation", "min": 0})
    evidence: float = field(default=3.0, metadata={
        "help": "guarded: how many standard errors above 0 some candidate's mean gain over the pretrained model, "
                "on records it had not seen, must be before guarded first leaves the pretrained model; the same "
                "margin above chance for the pretrained model's own ranking of the online records, without which "
                "guarded follows its running fine-tune from then on", "min": 0.0})
    mix_records: int = field(default=250, metadata={
        "help": "guarded: once it has left the pretrained model, it predicts with the mix "
                "(1-w)*pretrained + w*tuned of the weights, w = n / (n + this), n the records measured",
        "min": 1})
    # not an option: set from the model file (its recorded target kinds), by whoever loads it
    cross_target: bool = field(default=False, metadata={
        "help": "guarded: the pretrained model was trained on no program of the adapted target kind, so there "
                "is nothing of this device to guard and it fine-tunes from the first retrain"})

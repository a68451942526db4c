"""How a pretrained model follows the records measured on a new device.

- ``frozen``: the pretrained model, never updated.
- ``scratch``: at every retrain, a freshly initialised network trained on the online records.
- ``finetune``: the pretrained network, trained further on the online records at every retrain.
- ``moa``: momentum online adaptation (Pruner). A momentum copy θ_s starts as the pretrained
  weights; at every retrain a network initialised from θ_s is trained on all online records and
  becomes the predictor, then θ_s ← m·θ_s + (1−m)·θ. Starting each fine-tune from the slowly
  moving copy keeps what pretraining learned while the few first rounds cannot pull it far.
  BatchNorm statistics are not averaged: θ_s keeps its own.
"""

from __future__ import annotations

import copy
import numpy as np
import torch

from ..training.data import gather_batch
from ..training.module import CostModelModule
from .config import AdaptConfig
from .online import OnlineRecords

def train_online(module: CostModelModule, online: OnlineRecords, cfg: AdaptConfig, seed: int) -> None:
    """A few epochs of the module's own loss on every online record (in-process: a tuning run
    cannot afford a Trainer per retrain)."""
    data = online.data()
    n = len(online)
    if n < 2:
        return
    gen = np.random.default_rng(seed)
    torch.manual_seed(seed)
    opt = torch.optim.Adam(module.parameters(), lr=cfg.lr, weight_decay=module.hparams.weight_decay)
    module.train()
    for _ in range(cfg.epochs):
        order = gen.permutation(n)
        for i in range(0, n, cfg.batch_size):
            rows = order[i:i + cfg.batch_size]
            if len(rows) < 2:  # BatchNorm needs two programs
                continue
            b = gather_batch(data, rows)
            loss = module.loss_fn(module(b), b.y)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), 0.5)
            opt.step()
    module.eval()


class Method:
    """A predictor that may change after each round of measurements."""

    name = "frozen"

    def __init__(self, pretrained: CostModelModule, cfg: AdaptConfig):
        self.cfg = cfg
        self.predictor = copy.deepcopy(pretrained).eval()
        self.retrains = 0

    def after_round(self, online: OnlineRecords, rounds: int) -> bool:
        """Called after every round; returns whether the predictor changed."""
        if rounds % self.cfg.retrain_every or len(online) < 2:
            return False
        self.retrain(online)
        self.retrains += 1
        return True

    def retrain(self, online: OnlineRecords) -> None:
        pass

    def state(self) -> dict[str, dict]:
        """Weights to save for a restart."""
        return {"predictor": self.predictor.state_dict()}

    def load_state(self, state: dict[str, dict]) -> None:
        self.predictor.load_state_dict(state["predictor"])


class Frozen(Method):
    name = "frozen"

    def after_round(self, online: OnlineRecords, rounds: int) -> bool:
        return False


class FineTune(Method):
    name = "finetune"

    def retrain(self, online: OnlineRecords) -> None:
        train_online(self.predictor, online, self.cfg, self.cfg.seed + self.retrains)


class Scratch(Method):
    name = "scratch"

    def retrain(self, online: OnlineRecords) -> None:
        torch.manual_seed(self.cfg.seed + self.retrains)
        fresh = CostModelModule(**self.predictor.hparams)
        # the scales are part of the feature definition, not of what is learned
        fresh.load_state_dict({k: v for k, v in self.predictor.state_dict().items() if k.startswith("scale_")},
                              strict=False)
        train_online(fresh, online, self.cfg, self.cfg.seed + self.retrains)
        self.predictor = fresh


class MoA(Method):
    name = "moa"

    def __init__(self, pretrained: CostModelModule, cfg: AdaptConfig):
        super().__init__(pretrained, cfg)
        self.momentum = copy.deepcopy(pretrained).eval()

    def retrain(self, online: OnlineRecords) -> None:
        fresh = copy.deepcopy(self.momentum)
        train_online(fresh, online, self.cfg, self.cfg.seed + self.retrains)
        self.predictor = fresh
        m = self.cfg.momentum
        with torch.no_grad():
            for slow, fast in zip(self.momentum.parameters(), fresh.parameters()):
                slow.mul_(m).add_(fast, alpha=1.0 - m)

    def state(self) -> dict[str, dict]:
        return {"predictor": self.predictor.state_dict(), "momentum": self.momentum.state_dict()}

    def load_state(self, state: dict[str, dict]) -> None:
        super().load_state(state)
        self.momentum.load_state_dict(state["momentum"])


def make_method(name: str, pretrained: CostModelModule, cfg: AdaptConfig) -> Method:
    classes = {"moa": MoA, "finetune": FineTune, "scratch": Scratch, "frozen": Frozen}
    try:
        return classes[name](pretrained, cfg)
    except KeyError:
        raise ValueError(f"unknown adaptation method {name!r}; choose from {', '.join(METHODS)}") from None

"""How a pretrained model follows the records measured on a new device.

- ``frozen``: the pretrained model, never updated.
- ``scratch``: at every retrain, a freshly initialised network trained on the online records.
- ``finetune``: the pretrained network, trained further on the online records at every retrain.
- ``guarded`` (the default): never trusts a retrain it has not checked. Every retrain fine-tunes a
  copy of the *pretrained* weights on the older online records; the newest records (which it did
  not see) then judge the weight-space mixes θ_w = (1−w)·θ_pretrained + w·θ_tuned for
  w ∈ {0, ¼, ½, ¾, 1}: a mix replaces the pretrained model (w = 0) only when its within-task
  pairwise accuracy on the fresh records beats the pretrained model's by more than ``evidence``
  standard errors (0.5/√n_fresh: the noise of so few records), and the best such mix predicts
  (ties go to the smaller w). So
  adaptation only moves away from pretraining when measurements on programs the tuned copy was
  not trained on say clearly that it ranks better. Mixing weights rather than scores keeps the predictor
  an ordinary model (it is saved and loaded like any other); fine-tuned weights lie close to the
  pretrained ones, where such mixes are known to keep what both know (robust fine-tuning, WiSE-FT).
- ``moa``: momentum online adaptation (Pruner), as published. A momentum copy θ_s starts as the
  pretrained weights; at every retrain a network initialised from θ_s is trained on all online
  records and becomes the predictor, then θ_s ← m·θ_s + (1−m)·θ. Starting each fine-tune from the
  slowly moving copy keeps what pretraining learned while the few first rounds cannot pull it far.
  BatchNorm statistics are not averaged: θ_s keeps its own.
"""

from __future__ import annotations

import copy
from typing import Optional

import numpy as np
import torch

from ..training.data import gather_batch
from ..training.module import CostModelModule
from .config import AdaptConfig
from .online import OnlineRecords

def train_online(module: CostModelModule, online: OnlineRecords, cfg: AdaptConfig, seed: int,
                 rows: Optional[np.ndarray] = None) -> None:
    """A few epochs of the module's own loss on the online records (all, or ``rows``), in-process:
    a tuning run cannot afford a Trainer per retrain."""
    data = online.data()
    rows = np.arange(len(online)) if rows is None else np.asarray(rows)
    n = len(rows)
    if n < 2:
        return
    gen = np.random.default_rng(seed)
    torch.manual_seed(seed)
    opt = torch.optim.Adam(module.parameters(), lr=cfg.lr, weight_decay=module.hparams.weight_decay)
    module.train()
    for _ in range(cfg.epochs):
        order = rows[gen.permutation(n)]
        for i in range(0, n, cfg.batch_size):
            rows_b = order[i:i + cfg.batch_size]
            if len(rows_b) < 2:  # BatchNorm needs two programs
                continue
            b = gather_batch(data, rows_b)
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


MIXES = (0.0, 0.25, 0.5, 0.75, 1.0)


def mixed(a: CostModelModule, b: CostModelModule, w: float) -> CostModelModule:
    """(1−w)·a + w·b, parameters and floating buffers (BatchNorm statistics) alike."""
    out = copy.deepcopy(a)
    sb = b.state_dict()
    out.load_state_dict({k: torch.lerp(v, sb[k], w) if v.is_floating_point() else v
                         for k, v in a.state_dict().items()})
    return out.eval()


def fresh_pair_accuracy(pred: np.ndarray, y: np.ndarray, task: np.ndarray, fresh: np.ndarray) -> float:
    """Within-task pairwise accuracy over the pairs with at least one fresh (unseen) record."""
    right = total = 0
    for t in np.unique(task[fresh]):
        rows = np.flatnonzero(task == t)
        dy = np.sign(y[rows][:, None] - y[rows][None, :])
        dp = np.sign(pred[rows][:, None] - pred[rows][None, :])
        new = fresh[rows]
        mask = np.triu((dy != 0) & (new[:, None] | new[None, :]), 1)
        right += int((dy[mask] == dp[mask]).sum())
        total += int(mask.sum())
    return right / total if total else float("nan")


class Guarded(Method):
    name = "guarded"

    def __init__(self, pretrained: CostModelModule, cfg: AdaptConfig):
        super().__init__(pretrained, cfg)
        self.pretrained = copy.deepcopy(pretrained).eval()
        self.mix = 0.0  # the weight of the tuned model in the predictor, for reports

    def retrain(self, online: OnlineRecords) -> None:
        n = len(online)
        n_fresh = max(self.cfg.round_size, int(round(n * self.cfg.fresh_fraction)))
        if n - n_fresh < 2:
            return
        tuned = copy.deepcopy(self.pretrained)
        train_online(tuned, online, self.cfg, self.cfg.seed + self.retrains, rows=np.arange(n - n_fresh))
        data = online.data()
        fresh = np.arange(n) >= n - n_fresh  # the online set keeps arrival order
        rows = np.arange(n)
        scores = {}
        for w in MIXES:
            pred = mixed(self.pretrained, tuned, w).predict_rows(lambda r: gather_batch(data, r), rows)
            scores[w] = fresh_pair_accuracy(pred, data.records["label"], data.records["task_id"], fresh)
        # Moving away from the pretrained model needs evidence beyond the noise of a few fresh records:
        # an accuracy gain of `evidence` standard errors of an accuracy over n_fresh records (0.5/√n).
        # Ties stay nearer the pretrained model.
        margin = self.cfg.evidence * 0.5 / np.sqrt(n_fresh)
        best = 0.0
        for w in MIXES[1:]:
            if np.isfinite(scores[w]) and scores[w] > scores[0.0] + margin and scores[w] >= scores[best] + 1e-9:
                best = w
        self.mix = best
        self.predictor = mixed(self.pretrained, tuned, best)

    def state(self) -> dict[str, dict]:
        return {"predictor": self.predictor.state_dict(), "pretrained": self.pretrained.state_dict()}

    def load_state(self, state: dict[str, dict]) -> None:
        super().load_state(state)
        self.pretrained.load_state_dict(state["pretrained"])


def make_method(name: str, pretrained: CostModelModule, cfg: AdaptConfig) -> Method:
    classes = {"guarded": Guarded, "moa": MoA, "finetune": FineTune, "scratch": Scratch, "frozen": Frozen}
    try:
        return classes[name](pretrained, cfg)
    except KeyError:
        raise ValueError(f"unknown adaptation method {name!r}; choose from {', '.join(METHODS)}") from None

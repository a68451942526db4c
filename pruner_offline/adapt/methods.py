"""How a pretrained model follows the records measured on a new device.

- ``frozen``: the pretrained model, never updated.
- ``scratch``: at every retrain, a freshly initialised network trained on the online records.
- ``finetune``: the pretrained network, trained further on the online records at every retrain.
- ``guarded`` (the default): moves away from the pretrained model only as far as records it had not
  trained on show that it should. Every retrain fine-tunes a copy of the *pretrained* weights on all
  online records; the weight-space mixes θ_w = (1−w)·θ_pretrained + w·θ_tuned, w ∈ {¼, ½, ¾, 1},
  are then scored prequentially: every record measured after that retrain is, before the next one,
  a record none of them saw, and each mix's gain over the pretrained model on it (good-pair ranking
  accuracy, ``good_pair_scores``) joins one tally kept over the whole run. The mix with the largest
  mean gain predicts once that mean is ``evidence`` standard errors above 0 (a one-sided paired test
  over every record judged so far); until then, the pretrained model. Evidence piles up across
  rounds instead of being judged afresh on each small batch, so a clear disagreement moves it
  within a few rounds while noise does not. Mixing weights rather than scores keeps the predictor
  an ordinary model (it is saved and loaded like any other); fine-tuned weights lie close to the
  pretrained ones, where such mixes keep what both know (robust fine-tuning, WiSE-FT).
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
            loss = module.loss_fn(module(b), b.y, b.task)
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


def good_pair_scores(preds: list[np.ndarray], y: np.ndarray, task: np.ndarray, fresh: np.ndarray) -> np.ndarray:
    """[len(preds), m]: for each of the m fresh records that has one, the share of its good pairs that
    each prediction orders right. A good pair: two records of one task with different labels, both at
    least the task's median label so far (a tuner only has to order the good programs; pairs with a
    bad one are easy and would drown them)."""
    out = []
    for t in np.unique(task[fresh]):
        rows = np.flatnonzero(task == t)
        good = rows[y[rows] >= np.median(y[rows])]
        dy = np.sign(y[good][:, None] - y[good][None, :])
        pair = dy != 0
        for i in np.flatnonzero(fresh[good] & pair.any(1)):
            out.append([np.mean(np.sign(p[good[i]] - p[good][pair[i]]) == dy[i][pair[i]]) for p in preds])
    return np.array(out, dtype=np.float64).T.reshape(len(preds), -1)


class Guarded(Method):
    name = "guarded"

    def __init__(self, pretrained: CostModelModule, cfg: AdaptConfig):
        super().__init__(pretrained, cfg)
        self.pretrained = copy.deepcopy(pretrained).eval()
        self.mixes: list[CostModelModule] = []  # the mixes w = MIXES[1:] of the latest tuned copy
        self.scored = 0  # online records the latest tuned copy was trained on, or scored since
        self.gains = np.zeros((len(MIXES) - 1, 0))  # per mix, per judged record: its gain over w = 0
        self.mix = 0.0  # the weight of the tuned copy in the predictor

    def after_round(self, online: OnlineRecords, rounds: int) -> bool:
        if self.mixes and len(online) > self.scored:
            self.judge(online)
        retrain = rounds % self.cfg.retrain_every == 0 and len(online) >= 2
        if retrain:
            tuned = copy.deepcopy(self.pretrained)
            train_online(tuned, online, self.cfg, self.cfg.seed + self.retrains)
            self.mixes = [mixed(self.pretrained, tuned, w) for w in MIXES[1:]]
            self.scored = len(online)
            self.retrains += 1
        w = self.choose()
        if w == self.mix and not (retrain and w > 0):
            return False
        self.mix = w
        self.predictor = self.mixes[MIXES.index(w) - 1] if w else copy.deepcopy(self.pretrained)
        return True

    def judge(self, online: OnlineRecords) -> None:
        """Score the records that arrived since the latest retrain (which it never saw), with labels
        from the whole online set, and add each mix's gain over the pretrained model to the tally."""
        data = online.data()
        rows = np.arange(len(online))
        preds = [m.predict_rows(lambda r: gather_batch(data, r), rows) for m in [self.pretrained, *self.mixes]]
        s = good_pair_scores(preds, data.records["label"], data.records["task_id"], rows >= self.scored)
        self.gains = np.concatenate([self.gains, s[1:] - s[0]], axis=1)
        self.scored = len(online)

    def choose(self) -> float:
        """The mix with the largest mean gain, among those whose gain is ``evidence`` standard errors
        above 0 (a one-sided paired test over every record judged so far); else 0."""
        n = self.gains.shape[1]
        if n < max(self.cfg.round_size, 2):
            return 0.0
        mean = self.gains.mean(1)
        se = self.gains.std(1, ddof=1) / np.sqrt(n)
        ok = (mean > 0) & (mean > self.cfg.evidence * se)
        return float(MIXES[1 + int(np.argmax(np.where(ok, mean, -np.inf)))]) if ok.any() else 0.0

    def state(self) -> dict[str, dict]:
        tuned = {"tuned": self.mixes[-1].state_dict()} if self.mixes else {}
        return {"predictor": self.predictor.state_dict(), "pretrained": self.pretrained.state_dict(),
                "tally": {"gains": torch.from_numpy(self.gains), "scored": self.scored, "mix": self.mix,
                          "retrains": self.retrains}, **tuned}

    def load_state(self, state: dict[str, dict]) -> None:
        super().load_state(state)
        self.pretrained.load_state_dict(state["pretrained"])
        tally = state["tally"]
        self.gains = tally["gains"].numpy()
        self.scored, self.mix, self.retrains = int(tally["scored"]), float(tally["mix"]), int(tally["retrains"])
        if "tuned" in state:
            tuned = copy.deepcopy(self.pretrained)
            tuned.load_state_dict(state["tuned"])
            self.mixes = [mixed(self.pretrained, tuned, w) for w in MIXES[1:]]


def make_method(name: str, pretrained: CostModelModule, cfg: AdaptConfig) -> Method:
    classes = {"guarded": Guarded, "moa": MoA, "finetune": FineTune, "scratch": Scratch, "frozen": Frozen}
    try:
        return classes[name](pretrained, cfg)
    except KeyError:
        raise ValueError(f"unknown adaptation method {name!r}; choose from {', '.join(METHODS)}") from None

"""How a pretrained model follows the records measured on a new device.

- ``frozen``: the pretrained model, never updated.
- ``scratch``: at every retrain, a freshly initialised network trained on the online records.
- ``finetune``: the pretrained network, trained further on the online records at every retrain.
- ``guarded`` (the default): moves away from the pretrained model only once records it had not
  trained on show that it should, then predicts with a mix of the pretrained weights and a fine-tuned
  copy whose weight grows with the records measured. Every retrain fine-tunes a copy of the
  *pretrained* weights on all online records (θ_t); until the first move it also trains a running
  fine-tune further (θ_f: ``finetune``'s records and seeds). Both keep the pretrained model's
  correction scale (see ``train_online``), where ``finetune`` scores it whole. The guard's
  candidates are the weight-space mixes θ_w = (1−w)·θ_pretrained + w·θ_t, w ∈ {¼, ½, ¾, 1}, and
  θ_f. They are scored prequentially: every record measured after a retrain is, before the next
  one, a record none of them saw, and each candidate's gain over the pretrained model on it
  (good-pair ranking accuracy, ``good_pair_scores``) joins one tally kept over the run. The
  pretrained model predicts until some candidate's mean gain is ``evidence`` standard errors above
  0 (a one-sided paired test over every record judged so far). From that first move on the
  predictor is θ_w with w = n / (n + ``mix_records``), n the online records, set again at every
  retrain: the records decided *whether* to move; how far is what their number can carry. Which
  candidate led does not set it: on held-out records, following the tally's leader swung with the few
  records each leader was chosen on, and a fine-tune that replaces the pretrained weights (w = 1)
  forgets what they knew until hundreds of records have been measured (docs/adaptation.md §8). The
  guard is only for a pretrained model that knows something about the device: it never trained on
  any online record, so all of them test whether it orders their good pairs better than a coin. The
  first time it is not ``evidence`` standard errors better (before it was ever left), there is
  nothing to guard: from then on the running fine-tune predicts, and θ_t, which would only be mixed
  with a model that does not know the device, is no longer trained. A model whose file says it was
  trained on other target kinds only (``cross_target``: a CPU model adapted to a GPU) starts so: the
  coin test estimates what the file states, and on one fold's first H200 records it found the CPU
  model as sure as the H200-pretrained ones, which kept the CPU model 0.2-0.4 below fine-tuning for
  100 records (docs/adaptation.md §8).
  Mixing weights rather than scores keeps the predictor an ordinary model (it is saved and loaded
  like any other); fine-tuned weights lie close to the pretrained ones, where such mixes keep what
  both know (robust fine-tuning, WiSE-FT).
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
from .config import METHODS, AdaptConfig
from .online import OnlineRecords

def train_online(module: CostModelModule, online: OnlineRecords, cfg: AdaptConfig, seed: int,
                 rows: Optional[np.ndarray] = None, keep_scale: bool = False) -> None:
    """A few epochs of the module's own loss on the online records (all, or ``rows``), in-process:
    a tuning run cannot afford a Trainer per retrain. The correction is then scored whole, unless
    ``keep_scale`` (a copy to be mixed with the pretrained weights)."""
    data = online.data()
    rows = np.arange(len(online)) if rows is None else np.asarray(rows)
    n = len(rows)
    if n < 2:
        return
    gen = np.random.default_rng(seed)
    torch.manual_seed(seed)
    # fused: one kernel for all parameters, a third of the per-parameter loop's time on a CPU
    opt = module.optimizer(lr=cfg.lr, fused=True)
    module.train()
    for _ in range(cfg.epochs):
        order = rows[gen.permutation(n)]
        for i in range(0, n, cfg.batch_size):
            rows_b = order[i:i + cfg.batch_size]
            if len(rows_b) < 2:  # BatchNorm needs two programs
                continue
            b = gather_batch(data, rows_b)
            loss = module.loss_fn(module.fitted(b), b.y, b.task)
            opt.zero_grad()
            loss.backward()
            module.clip_gradient_norm()
            opt.step()
    # the pretrained correction is shrunk because it was fitted to other workloads
    # (training.module); fitted to this device's own records, it is trusted whole. Guarded keeps the
    # shrunk scale: measured, a fine-tune that resets it forgets more of what the pretrained weights
    # knew, alone or mixed with them (docs/adaptation.md §8, "K" variants)
    if not keep_scale:
        module.correction_scale.fill_(1.0)
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


MIXES = (0.25, 0.5, 0.75, 1.0)  # weights of the fresh tuned copy in guarded's mixed candidates
# guarded's candidates: the pretrained model (0), the mixes (1-4), the running fine-tune (5)
CANDIDATES = ("pretrained", *(f"mix {w:g}" for w in MIXES), "finetune")


def mixed(a: CostModelModule, b: CostModelModule, w: float,
          out: Optional[CostModelModule] = None) -> CostModelModule:
    """(1−w)·a + w·b, parameters and floating buffers (BatchNorm statistics, the scale each scores
    its correction at) alike; written into ``out`` (a module of the same shape, whose own weights
    are replaced) when given, which saves copying the module at every retrain."""
    out = copy.deepcopy(a) if out is None else out
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


def better_than_chance(pred: np.ndarray, y: np.ndarray, task: np.ndarray, evidence: float, min_records: int) -> bool:
    """Whether ``pred`` orders the good pairs of the records (``good_pair_scores``, every record judged)
    better than a coin, by ``evidence`` standard errors of its mean score; with fewer than
    ``min_records`` records judged there is no telling, and the answer is yes."""
    s = good_pair_scores([pred], y, task, np.ones(len(y), dtype=bool))[0] - 0.5
    if len(s) < max(min_records, 2):
        return True
    return bool(s.mean() > evidence * s.std(ddof=1) / np.sqrt(len(s)))


def guard_lifted(gains: np.ndarray, evidence: float, min_records: int) -> bool:
    """Guarded's guard over the tally ``gains`` [candidates − 1, records judged] of gains over the
    pretrained model: whether some candidate's mean gain is ``evidence`` standard errors above 0 (a
    paired test on the same records); never while fewer than ``min_records`` records are judged."""
    n = gains.shape[1]
    if n < max(min_records, 2):
        return False
    mean = gains.mean(1)
    return bool(((mean > 0) & (mean > evidence * gains.std(1, ddof=1) / np.sqrt(n))).any())


class Guarded(Method):
    name = "guarded"

    def __init__(self, pretrained: CostModelModule, cfg: AdaptConfig):
        super().__init__(pretrained, cfg)
        self.pretrained = copy.deepcopy(pretrained).eval()
        self.finetuned = copy.deepcopy(pretrained).eval()  # θ_f: trained further at every retrain until the move
        self.tuned: Optional[CostModelModule] = None  # θ_t of the latest retrain
        # CANDIDATES[1:] as of the latest retrain, while the guard stands (neither moved nor uninformed)
        self.candidates: list[CostModelModule] = []
        self.scored = 0  # online records the latest candidates were trained on, or scored since
        self.gains = np.zeros((len(CANDIDATES) - 1, 0))  # per candidate, per judged record: gain over 0
        self.moved = False  # whether the predictor has left the pretrained model (for good)
        # the pretrained model ranks the device like a coin, or never saw its target kind: θ_f alone
        self.uninformed = cfg.cross_target
        self.weight = 0.0  # once moved: the weight of θ_t in the predicting mix
        self._pretrained_pred: tuple[object, np.ndarray] = (None, np.zeros(0))  # (online data, its scores)

    def after_round(self, online: OnlineRecords, rounds: int) -> bool:
        if self.candidates and len(online) > self.scored:
            self.judge(online)
        retrain = rounds % self.cfg.retrain_every == 0 and len(online) >= 2
        if retrain:
            self.retrain_all(online)
        if self.retrains == 0:  # θ₀ predicts until the first retrain (under a guard it sets θ_t, then judging)
            return False
        if not (self.uninformed or self.moved):  # the guard stands until one of these, for good
            # a pretrained model that ranks this device no better than a coin has nothing to guard,
            # and mixes with it only pull towards a model that does not know the device
            if not self.pretrained_ranks(online):
                self.uninformed = True
            elif guard_lifted(self.gains, self.cfg.evidence, self.cfg.round_size):
                self.moved = True
            else:
                return False
            self.candidates = []
        elif not retrain:
            return False
        if self.uninformed:
            # a copy: the running fine-tune is trained in place at the next retrain
            self.predictor = copy.deepcopy(self.finetuned).eval()
        else:
            n = len(online)
            self.weight = n / (n + self.cfg.mix_records)
            self.predictor = mixed(self.pretrained, self.tuned, self.weight)  # new: a tuning run holds the old one
        return True

    def retrain_all(self, online: OnlineRecords) -> None:
        """Train what the predictor is, or may become: the running fine-tune while it can still be
        chosen, θ_t while a mix with the pretrained model can; both keep the pretrained scale."""
        seed = self.cfg.seed + self.retrains
        if not self.moved:
            train_online(self.finetuned, online, self.cfg, seed, keep_scale=True)
        if not self.uninformed:
            if self.retrains == 0:
                # the running fine-tune started from the pretrained weights with this seed and these
                # records: it is θ_t
                self.tuned = copy.deepcopy(self.finetuned)
            else:
                self.tuned = copy.deepcopy(self.pretrained)
                train_online(self.tuned, online, self.cfg, seed, keep_scale=True)
            if not self.moved:
                self.set_candidates()
        self.scored = len(online)
        self.retrains += 1

    def set_candidates(self) -> None:
        old = self.candidates[:len(MIXES)] or [None] * len(MIXES)
        self.candidates = [*(mixed(self.pretrained, self.tuned, w, out) for w, out in zip(MIXES, old)),
                           self.finetuned]

    @property
    def chosen(self) -> str:
        if self.uninformed and self.retrains:  # a cross-target model predicts itself until then
            return "finetune"
        return f"mix {self.weight:.3f}" if self.moved else "pretrained"

    def pretrained_scores(self, online: OnlineRecords) -> np.ndarray:
        """The pretrained model's scores of every online record; judging and the coin test both need
        them in a round, and they are computed once for the round's records."""
        data = online.data()
        if self._pretrained_pred[0] is not data:
            pred = self.pretrained.predict_rows(lambda r: gather_batch(data, r), np.arange(len(online)))
            self._pretrained_pred = (data, pred)
        return self._pretrained_pred[1]

    def pretrained_ranks(self, online: OnlineRecords) -> bool:
        """Whether the pretrained model ranks this device's records better than a coin: it never
        trained on any of them, so every online record is honest evidence of that."""
        data = online.data()
        return better_than_chance(self.pretrained_scores(online), data.records["label"], data.records["task_id"],
                                  self.cfg.evidence, self.cfg.round_size)

    def judge(self, online: OnlineRecords) -> None:
        """Score the records that arrived since the latest retrain (which no candidate saw), with labels
        from the whole online set, and add each candidate's gain over the pretrained model to the tally."""
        data = online.data()
        rows = np.arange(len(online))
        preds = [self.pretrained_scores(online),
                 *(m.predict_rows(lambda r: gather_batch(data, r), rows) for m in self.candidates)]
        s = good_pair_scores(preds, data.records["label"], data.records["task_id"], rows >= self.scored)
        self.gains = np.concatenate([self.gains, s[1:] - s[0]], axis=1)
        self.scored = len(online)

    def state(self) -> dict[str, dict]:
        tuned = {"tuned": self.tuned.state_dict()} if self.tuned is not None else {}
        return {"predictor": self.predictor.state_dict(), "pretrained": self.pretrained.state_dict(),
                "finetuned": self.finetuned.state_dict(),
                "tally": {"gains": torch.from_numpy(self.gains), "scored": self.scored, "weight": self.weight,
                          "moved": self.moved, "uninformed": self.uninformed, "retrains": self.retrains},
                **tuned}

    def load_state(self, state: dict[str, dict]) -> None:
        super().load_state(state)
        self.pretrained.load_state_dict(state["pretrained"])
        self.finetuned.load_state_dict(state["finetuned"])
        self._pretrained_pred = (None, np.zeros(0))  # scores of the weights replaced
        tally = state["tally"]
        self.gains = tally["gains"].numpy()
        self.scored, self.retrains, self.weight = int(tally["scored"]), int(tally["retrains"]), float(tally["weight"])
        self.moved, self.uninformed = bool(tally["moved"]), bool(tally["uninformed"])
        if "tuned" in state:
            self.tuned = copy.deepcopy(self.pretrained)
            self.tuned.load_state_dict(state["tuned"])
            if not (self.moved or self.uninformed):
                self.set_candidates()


_CLASSES = {cls.name: cls for cls in (Guarded, MoA, FineTune, Scratch, Frozen)}
if set(_CLASSES) != set(METHODS):  # config.METHODS names them for the command line, without torch
    raise ImportError(f"adapt.config.METHODS {METHODS} and the method classes {tuple(_CLASSES)} disagree")


def make_method(name: str, pretrained: CostModelModule, cfg: AdaptConfig) -> Method:
    try:
        return _CLASSES[name](pretrained, cfg)
    except KeyError:
        raise ValueError(f"unknown adaptation method {name!r}; choose from {', '.join(METHODS)}") from None

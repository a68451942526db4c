"""One LightningModule for every neural cost model: shared training step, metrics, scaling."""

from __future__ import annotations

from typing import Optional

import lightning as L
import numpy as np
import torch

from ..errors import BadInput
from ..models.batch import Batch
from ..models.losses import LOSSES
from ..models.metrics import ranking_report
from ..models.registry import build_model, model_spec
from ..tenset.step_vectors import STEP_DIM
from .across_ranks import whole_batch
from .normalize import Scales, log_scale


class TrainingDiverged(BadInput):
    """NaN or infinite numbers in training: the run stops, and no model file is written."""


class CostModelModule(L.LightningModule):
    """``model``: pacm | mlp | draft | tlp; ``loss``: a name in ``models.losses.LOSSES``;
    ``draft_prior``: PaCM and the draft model add the analytic draft score to their output (see
    ``models.pacm``). ``correction_scale``: PaCM with the prior scores programs with its learned
    correction times this (the recipe: ¼); the loss, in pretraining, validation and online training,
    fits the correction at scale 1 (``fitted``). Fitted to the training workloads, the correction is
    too sure of itself on others: ¼ ranked unseen CPU networks, unseen CPU operators and unseen H200
    workloads better than 1 (README, Generalization). Online training on a device's own records
    sets the scale to 1. Files without it score at 1, as they always did. ``width``: the hidden
    layers that many times as wide as the network's defaults (more data may carry a wider model;
    bench/generalize.py measures it). Hyper-parameters are
    plain values so that the checkpoint loads with ``torch.load(weights_only=True)``."""

    def __init__(self, model: str = "pacm", loss: str = "lambdarank", lr: float = 7e-4,
                 weight_decay: float = 1e-6, stmt_dim: int = 174, symbol_dim: int = 11, flow_dim: int = 23,
                 step_dim: int = STEP_DIM, feature_schema: str = "", draft_prior: bool = False,
                 correction_scale: float = 1.0, gradient_clip: float = 0.5, width: float = 1.0):
        super().__init__()
        # a recipe's values (YAML, --config): the user's to fix, so BadInput, not a crash report
        if loss not in LOSSES:
            raise BadInput(f"model.loss: unknown loss {loss!r}; choose from {', '.join(LOSSES)}")
        for name, value in (("lr", lr), ("gradient_clip", gradient_clip)):
            if not value > 0:
                raise BadInput(f"model.{name} must be above 0, not {value}")
        if not 0 < width <= 16:
            raise BadInput(f"model.width must be in (0, 16], not {width}")
        if not weight_decay >= 0:
            raise BadInput(f"model.weight_decay must be at least 0, not {weight_decay}")
        # the recipe sets it for every model; a model file says what its model really reads
        spec = model_spec(model)
        draft_prior = draft_prior and spec.draft_prior
        if not 0.0 <= correction_scale <= 1.0:
            raise BadInput(f"model.correction_scale must be in [0, 1], not {correction_scale}")
        # measured for PaCM only; the learned draft model keeps its correction whole
        correction_scale = float(correction_scale) if spec.scaled_correction and draft_prior else 1.0
        self.save_hyperparameters()
        self.net = build_model(model, {"stmt": stmt_dim, "flow": flow_dim, "symbol": symbol_dim, "step": step_dim},
                               draft_prior, width)
        self.loss_fn = LOSSES[loss]
        for name, dim in (("statements", stmt_dim), ("symbols", symbol_dim), ("dataflow", flow_dim),
                          ("steps", step_dim), ("draft_score", 1)):
            self.register_buffer(f"scale_{name}", torch.ones(dim))
        # a buffer, not only a hyper-parameter: it changes when the model is trained on a device's own
        # records (adapt.methods.train_online), and a state dict (a restart, a weight mix) carries it
        self.register_buffer("correction_scale", torch.tensor(correction_scale))
        self._val: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def set_scales(self, scales: Scales) -> None:
        for name in ("statements", "symbols", "dataflow", "steps", "draft_score"):
            getattr(self, f"scale_{name}").copy_(torch.as_tensor(getattr(scales, name)))

    def normalized(self, b: Batch) -> Batch:
        return Batch(
            statements=b.statements / self.scale_statements,
            symbols=log_scale(b.symbols) / self.scale_symbols,
            segment=b.segment,
            dataflow=b.dataflow / self.scale_dataflow,
            steps=b.steps / self.scale_steps,
            draft_score=log_scale(b.draft_score) / self.scale_draft_score,
            y=b.y, task=b.task,
        )

    def forward(self, b: Batch) -> torch.Tensor:
        """The model's scores (higher: faster)."""
        return self._scores(b, float(self.correction_scale))

    def fitted(self, b: Batch) -> torch.Tensor:
        """The scores the loss trains: PaCM's correction at scale 1."""
        return self._scores(b, 1.0)

    def _scores(self, b: Batch, correction_scale: float) -> torch.Tensor:
        x = self.normalized(b)
        return self.net(x, correction_scale) if correction_scale != 1.0 else self.net(x)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        # a run checkpoint from before the buffer: its model scored its correction whole
        checkpoint["state_dict"].setdefault("correction_scale", torch.tensor(1.0))

    def on_fit_start(self) -> None:
        # Scales come from the training split; a resumed run already has them in its state.
        dm = getattr(self.trainer, "datamodule", None)
        if dm is not None and hasattr(dm, "scales") and self.trainer.ckpt_path is None:
            self.set_scales(dm.scales)

    def _check_finite(self, loss: torch.Tensor, what: str, batch_idx: int) -> None:
        if not torch.isfinite(loss):
            raise TrainingDiverged(
                f"training diverged: the {self.hparams.model} {what} is {loss.item()} at epoch {self.current_epoch}, "
                f"batch {batch_idx} (learning rate {self.hparams.lr}); no model written: lower the learning rate")

    def training_step(self, b: Batch, batch_idx: int) -> torch.Tensor:
        pred, y, task, factor = whole_batch(self.fitted(b), b.y, b.task)
        loss = self.loss_fn(pred, y, task)
        self._check_finite(loss, "loss", batch_idx)
        self.log("train_loss", loss, prog_bar=True, batch_size=len(y))
        return loss * factor

    def validation_step(self, b: Batch, batch_idx: int) -> None:
        pred = self.fitted(b)  # the checkpoint is chosen on what the loss trains
        loss = self.loss_fn(pred, b.y, b.task)
        # the recipe keeps the checkpoint by this loss: a NaN here would end training quietly
        # (EarlyStopping stops on a non-finite score) and leave a diverged model to be written
        self._check_finite(loss, "validation loss", batch_idx)
        self.log("val_loss", loss, batch_size=b.size, sync_dist=True)
        self._val.append((pred.detach().cpu().numpy(), b.y.cpu().numpy(), b.task.cpu().numpy()))

    def on_validation_epoch_end(self) -> None:
        if not self._val:
            return
        pred, y, task = (np.concatenate(x) for x in zip(*self._val))
        self._val.clear()
        report = ranking_report(pred, y, 1.0 / np.maximum(y, 1e-12), task)
        # every rank scores the whole validation split: the mean over ranks is each rank's value
        self.log("val_peak@1", report["peak@1"], prog_bar=True, sync_dist=True)
        self.log("val_peak@5", report["peak@5"], sync_dist=True)
        self.log("val_pairwise", report["pairwise_acc"], sync_dist=True)

    def optimizer(self, lr: Optional[float] = None, fused: bool = False) -> torch.optim.Optimizer:
        """The recipe's optimizer; online training (adapt.methods.train_online) takes it with its own
        learning rate."""
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr if lr is None else lr,
                                weight_decay=self.hparams.weight_decay, fused=fused)

    def configure_optimizers(self):
        return self.optimizer()

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None) -> None:
        # the model's own setting, so that training outside a Trainer clips the same way
        self.clip_gradients(optimizer, gradient_clip_val=self.hparams.gradient_clip, gradient_clip_algorithm="norm")

    def clip_gradient_norm(self) -> None:
        """What configure_gradient_clipping does, for training outside a Trainer."""
        torch.nn.utils.clip_grad_norm_(self.parameters(), self.hparams.gradient_clip)

    def predict_step(self, b: Batch, batch_idx: int) -> torch.Tensor:
        return self(b)

    def predict_rows(self, gather, rows: np.ndarray, batch_size: int = 4096,
                     device: Optional[torch.device] = None) -> np.ndarray:
        """Scores for store rows, in eval mode, without gradients. For scoring inside a tuning or
        adaptation loop, batch after batch, where a Trainer per call would cost more than the
        scores; evaluation goes through the Trainer's predict loop (training.evaluate.predict)."""
        self.eval()
        out = []
        with torch.no_grad():
            for i in range(0, len(rows), batch_size):
                b = gather(rows[i:i + batch_size])
                out.append(self(b.to(device) if device else b).cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0, np.float32)

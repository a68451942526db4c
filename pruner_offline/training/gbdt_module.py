"""The gradient-boosted trees baseline behind the interface of the neural cost models: it scores a
Batch, so evaluate, compare and tuning runs use it like any other model file."""

from __future__ import annotations

import lightning as L
import numpy as np
import torch

from ..models.batch import Batch
from ..models.gbdt import TreeEnsemble, pooled_features
from .module import CostModelModule


class GBDTModule(L.LightningModule):
    """Trained outside Lightning (scikit-learn fits the trees); a LightningModule so that evaluation
    scores it through the Trainer's predict loop like the others."""

    def __init__(self, ensemble: TreeEnsemble, feature_schema: str):
        super().__init__()
        self.ensemble = ensemble
        self.save_hyperparameters({"model": "gbdt", "feature_schema": feature_schema})

    def forward(self, b: Batch) -> torch.Tensor:
        counts = torch.bincount(b.segment, minlength=b.size).numpy()
        pooled = pooled_features(b.statements.numpy(), counts)
        return torch.from_numpy(self.ensemble.predict(pooled).astype(np.float32))

    # scoring store rows is the same loop for every model: the trees need no other
    predict_rows = CostModelModule.predict_rows
    predict_step = CostModelModule.predict_step

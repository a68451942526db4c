"""``python -m pruner_offline.training.lightning_cli fit --config training/pretrain.yaml --data.store S.h5``:
the plain LightningCLI over the same module and data, for users who drive Lightning directly."""

from lightning.pytorch.cli import LightningCLI

from ..models.registry import model_spec
from .data import StoreDataModule
from .module import CostModelModule


def _reads_steps(model: str) -> bool:
    return model_spec(model).reads_steps


class CostModelCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        parser.link_arguments("model.model", "data.with_steps", compute_fn=_reads_steps)


def main() -> None:
    CostModelCLI(CostModelModule, StoreDataModule, auto_configure_optimizers=False)


if __name__ == "__main__":
    main()

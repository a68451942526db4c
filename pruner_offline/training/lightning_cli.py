"""``python -m pruner_offline.training.lightning_cli fit --config training/pretrain.yaml --data.store S.h5``:
the plain LightningCLI over the same module and data, for users who drive Lightning directly."""

from lightning.pytorch.cli import LightningCLI

from .data import StoreDataModule
from .module import CostModelModule


def main() -> None:
    LightningCLI(CostModelModule, StoreDataModule, auto_configure_optimizers=False)


if __name__ == "__main__":
    main()

"""``python -m pruner_offline.training.lightning_cli fit --config training/pretrain.yaml --data.store S.h5``:
the plain LightningCLI over the same module and data, for users who drive Lightning directly."""

from lightning.pytorch.cli import LightningCLI

from .data import StoreDataModule
from .module import CostModelModule


def _reads_steps(model: str) -> bool:
    return model == "tlp"


class CostModelCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        # the step vectors are most of a store's bytes and only TLP reads them
        parser.link_arguments("model.model", "data.with_steps", compute_fn=_reads_steps)


def main() -> None:
    CostModelCLI(CostModelModule, StoreDataModule, auto_configure_optimizers=False)


if __name__ == "__main__":
    main()

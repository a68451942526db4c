"""pruner-offline: train Pruner's cost models on TenSet data and use them in today's TVM."""

__version__ = "0.1.0"

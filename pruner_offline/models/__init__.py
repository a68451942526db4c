"""Cost models (PaCM, the learned draft model, baselines), their losses and ranking metrics."""

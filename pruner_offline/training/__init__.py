"""Lightning training of the cost models: data from the feature store, one shared training step."""

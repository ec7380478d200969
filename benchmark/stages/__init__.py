"""What every DVC stage shares: the method registry, params.yaml as the stages read it, a suite's images, the
per-model stage functions (data, train, logits, cost) and the stage scripts' entry."""

"""How a network learns: the training loop, the optimizer, distribution and input pipelines."""

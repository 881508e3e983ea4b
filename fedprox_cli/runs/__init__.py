"""A run's life: set up, train, checkpoint, resume, write its outputs under a lock; seed-batched
runs share the same modules."""

"""A run's life: build, train, checkpoint, resume, write its outputs under a lock; seed-batched runs share the same lifecycle."""

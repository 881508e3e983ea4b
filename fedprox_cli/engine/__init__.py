"""The gradient oracle and what it stands on: devices, models as flat vectors, the loop/vmap
engines and their choice, memory plans, evaluation metrics."""

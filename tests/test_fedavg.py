import torch

from fedprox_cli.config.compose import compose
from fedprox_cli.runs.experiment import build


def test_k1_full_batch_is_gradient_descent():
    """K=1, B=full, h=0: z+ = z + alpha mean_i(-beta grad f_i(z)) = z - alpha beta grad f(z)."""
    exp = build(
        compose(
            [
                "dataset=digits",
                "model=linear",
                "dtype=float64",
                "n=4",
                "K=1",
                "B=full",
                "algorithm=fedavg",
                "regularizer=none",
                "algorithm.alpha=2",
                "algorithm.beta=0.25",
            ]
        )
    )
    state = exp.alg.init(exp.flat.flat(), exp.cfg.n)
    x = exp.flat.flat()
    for t in range(5):
        exp.env.start_round(t)
        state = exp.alg.round(state, exp.env, t)
        x = x - 0.5 * exp.oracle.full(x)[1]
        torch.testing.assert_close(state["z"], x, rtol=1e-10, atol=1e-12)

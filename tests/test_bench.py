"""The benchmark's accounting (fedprox_cli/bench.py): the roofline replays exactly the step's
products, and the sweep estimate counts rounds and evaluations."""

import torch

from fedprox_cli import bench


def test_roofline_replays_the_steps_products():
    w = bench.custom_workload("mlp", ["fedcanon"], "digits", n=3, K=2, B=8)
    setup = bench.Setup(w, torch.device("cpu"))
    step = bench.count_flops(setup.client_step)
    # forward 2*B*(64*200 + 200*200 + 200*10); backward: weight grads (same) + input grads of
    # the two upper layers
    assert step == 2 * 8 * (2 * (64 * 200 + 200 * 200 + 200 * 10) + 200 * 200 + 200 * 10)
    assert bench.Roofline(setup.client_step, times=6).flops == 6 * step


def test_fig2_estimate_counts_rounds_and_evaluations():
    # T=200, every 10 rounds: evaluations at 0, 10, ..., 200 = 21
    assert bench.fig2_estimate(1.0, 2.0, 10, runs=1, T=200) == (200 + 21 * 2) / 60
    # every 3: 0, 3, ..., 198, and the last round 200
    assert bench.fig2_estimate(1.0, 2.0, 3, runs=12, T=200, parallel=2) == 12 * (200 + 68 * 2) / 2 / 60

"""The papers' models: parameter counts, no buffers, and one FedCanon round on both engines."""

import pytest
import torch
from hydra import compose, initialize_config_dir

from fedprox_cli.common.errors import UserError
from fedprox_cli.common.package import CONF_DIR
from fedprox_cli.engine import models
from fedprox_cli.runs import experiment

pytestmark = pytest.mark.usefixtures("one_torch_thread")


ALL = ["linear", "mlp", "cnn", "cnn4", "mnist_cnn", "sigmoid_mlp", "resnet18", "mobilenetv3_small"]


def count(name, shape, classes=10):
    return sum(p.numel() for p in models.build(name, shape, classes).parameters())


@pytest.mark.parametrize(
    "name, shape, paper",
    [
        ("cnn4", (3, 32, 32), 4.4e6),  # FedCEF Sec. V-A: "approx. 4.4M parameters"
        ("mnist_cnn", (1, 28, 28), 0.4e6),  # FedCEF Sec. V-A: "approx. 0.4M parameters"
        ("resnet18", (3, 32, 32), 11.2e6),  # He et al. 2016 (CIFAR-10 variant)
        ("mobilenetv3_small", (3, 32, 32), 1.5e6),  # Howard et al. 2019, 10-class head
    ],
)
def test_parameter_counts_match_papers(name, shape, paper):
    assert abs(count(name, shape) - paper) <= 0.1 * paper


def test_small_models_have_the_documented_shape():
    d = 28 * 28
    assert count("sigmoid_mlp", (1, 28, 28)) == d * 200 + 200 + 200 * 10 + 10
    # cnn: 5x5 convs 1->32->64 with "same" padding, two 2x2 pools, linear head on 64 x 7 x 7
    assert count("cnn", (1, 28, 28)) == (25 * 32 + 32) + (25 * 32 * 64 + 64) + (64 * 49 * 10 + 10)


@pytest.mark.parametrize("name", ["cnn", "cnn4", "mnist_cnn", "resnet18", "mobilenetv3_small"])
def test_conv_models_refuse_tabular_inputs(name):
    with pytest.raises(UserError, match=f"model {name} needs images"):
        models.build(name, (30,), 2)


def one_round(model):
    """The model and z before / after one FedCanon round (n=2, K=1, B=2) on digits (8x8 grey
    images), computed by each gradient engine from the same start."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                "dataset=digits",
                f"model={model}",
                "partition=iid",
                "regularizer=l1",
                "n=2",
                "K=1",
                "B=2",
                "T=1",
                "engine=loop",
                "device=cpu",
                "seed=0",
            ],
        )
    exp = experiment.build(cfg)
    z0 = exp.flat.flat()
    z = {}
    for engine in ("loop", "vmap"):
        exp.oracle.engine = exp.oracle.engines[engine]
        state = exp.alg.init(z0, exp.cfg.n)
        exp.env.start_round(0)
        z[engine] = exp.alg.round(state, exp.env, 0)["z"]
    return exp.flat.module, z0, z["loop"], z["vmap"]


@pytest.mark.parametrize("model", ALL)
def test_one_fedcanon_round_same_on_both_engines_no_buffers(model):
    module, z0, z_loop, z_vmap = one_round(model)
    assert list(module.buffers()) == []  # FlatModel/functional_call/vmap see parameters only
    assert not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in module.modules())
    assert torch.isfinite(z_loop).all() and not torch.equal(z_loop, z0)
    assert torch.allclose(z_loop, z_vmap, atol=1e-5 * max(1.0, z_loop.abs().max().item()))

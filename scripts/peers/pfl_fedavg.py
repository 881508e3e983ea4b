"""FedAvg in pfl-research 0.6 (its PyTorch quickstart's API: ``FederatedDataset.from_slices``,
``SimulatedBackend``, ``FederatedAveraging`` with ``local_num_steps=K``, a ``PyTorchModel``
with a central SGD optimizer of rate 1, i.e. plain averaging), set up for one CPU as pfl's "Fast
distributed simulations" guide says: one process (no ``PFL_WORKER_*``, no ``torchrun``), the
clients' data in RAM as pfl ``Dataset`` slices (the fastest where the data fit in memory), no
central evaluation during the rounds. Each user's ``simulate_one_user`` (its client call) is
timed into ``PEER_CALL_LOG``. Usage: pfl_fedavg.py N K T B LR PARTICIPATION; prints one JSON
line: training seconds (pfl's ``StopwatchCallback``: the sum of its central iterations),
client-steps, the final model's metrics (``common.final_metrics``: fedrun's round-T row)."""

import json
import sys

import torch
from common import final_metrics, fmnist, iid, mlp, timed_call
from pfl.aggregate.simulate import SimulatedBackend
from pfl.algorithm import FederatedAveraging, NNAlgorithmParams
from pfl.callback.stopwatch import StopwatchCallback
from pfl.data.federated_dataset import FederatedDataset
from pfl.data.sampling import get_user_sampler
from pfl.hyperparam import NNEvalHyperParams, NNTrainHyperParams
from pfl.model.pytorch import PyTorchModel

N, K, T, B = map(int, sys.argv[1:5])
LR, PARTICIPATION = map(float, sys.argv[5:7])
torch.set_num_threads(1)
torch.manual_seed(0)


class MLP(torch.nn.Module):
    """fedrun's MLP with the ``loss`` and ``metrics`` a pfl PyTorch model needs."""

    def __init__(self):
        super().__init__()
        self.net = mlp()

    def forward(self, x):
        return self.net(x)

    def loss(self, x, y, eval=False):
        self.eval() if eval else self.train()
        return torch.nn.functional.cross_entropy(self(x), y.long())

    @torch.no_grad()
    def metrics(self, x, y, eval=True):
        from pfl.metrics import Weighted

        loss = torch.nn.functional.cross_entropy(self(x), y.long(), reduction="sum")
        return {"loss": Weighted(loss.item(), len(y))}


class TimedFederatedAveraging(FederatedAveraging):
    """pfl's FedAvg, each user's simulation (its client call) timed into ``PEER_CALL_LOG``."""

    def simulate_one_user(self, model, user_dataset, central_context):
        with timed_call():
            return super().simulate_one_user(model, user_dataset, central_context)


x, y = fmnist()
parts = {i: [x[p], y[p]] for i, p in enumerate(iid(N))}
data = FederatedDataset.from_slices(parts, get_user_sampler("minimize_reuse", list(parts)))
module = MLP()
model = PyTorchModel(
    module,
    local_optimizer_create=torch.optim.SGD,
    central_optimizer=torch.optim.SGD(module.parameters(), lr=1.0),
)
m = max(1, round(PARTICIPATION * N))
stopwatch = StopwatchCallback()
TimedFederatedAveraging().run(
    algorithm_params=NNAlgorithmParams(
        central_num_iterations=T, evaluation_frequency=T + 1, train_cohort_size=m, val_cohort_size=0
    ),
    backend=SimulatedBackend(training_data=data, val_data=None),
    model=model,
    model_train_params=NNTrainHyperParams(
        local_num_epochs=None, local_learning_rate=LR, local_batch_size=B, local_num_steps=K
    ),
    model_eval_params=NNEvalHyperParams(local_batch_size=4096),
    callbacks=[stopwatch],
)
print(
    json.dumps(
        {
            "train_s": sum(stopwatch._laps),
            "client_steps": T * m * K,
            **final_metrics(module),
        }
    )
)

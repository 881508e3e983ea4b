"""FedAvg in Flower 1.42 (its PyTorch quickstart's Message API: a ClientApp with ``@app.train``,
a ServerApp running ``flwr.serverapp.strategy.FedAvg``), simulated with ``run_simulation``
(Ray, one CPU per client actor). Usage: flower_fedavg.py N K T B LR PARTICIPATION; prints one
JSON line: training seconds (the strategy's rounds, as Flower's "Strategy execution finished"
times them), client-steps, the final model's train loss."""

import json
import sys
import time

import torch
from common import fmnist, iid, mlp, timed_call, train_loss
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from flwr.simulation import run_simulation
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

N, K, T, B = map(int, sys.argv[1:5])
LR, PARTICIPATION = map(float, sys.argv[5:7])
torch.set_num_threads(1)
_data: dict = {}

client = ClientApp()


@client.train()
def train(msg: Message, context: Context) -> Message:
    """K SGD steps on mini-batches of B drawn with replacement from this client's samples."""
    with timed_call():
        return _train(msg, context)


def _train(msg: Message, context: Context) -> Message:
    torch.set_num_threads(1)
    if "x" not in _data:
        _data["x"], _data["y"] = fmnist()
    part = iid(N)[int(context.node_config["partition-id"])]
    data = TensorDataset(torch.from_numpy(_data["x"][part]), torch.from_numpy(_data["y"][part]))
    model = mlp()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    opt = torch.optim.SGD(model.parameters(), lr=msg.content["config"]["lr"])
    loader = DataLoader(data, batch_size=B, sampler=RandomSampler(data, replacement=True, num_samples=K * B))
    losses = []
    for xb, yb in loader:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    metrics = MetricRecord({"train_loss": sum(losses) / len(losses), "num-examples": len(part)})
    return Message(content=RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics}), reply_to=msg)


server = ServerApp()


@server.main()
def main(grid: Grid, context: Context) -> None:
    torch.manual_seed(0)
    m = max(1, round(PARTICIPATION * N))
    strategy = FedAvg(fraction_train=PARTICIPATION, fraction_evaluate=0.0, min_train_nodes=m,
                      min_available_nodes=N)
    start = time.perf_counter()
    result = strategy.start(grid=grid, initial_arrays=ArrayRecord(mlp().state_dict()), num_rounds=T,
                            train_config=ConfigRecord({"lr": LR}))
    train_s = time.perf_counter() - start
    model = mlp()
    model.load_state_dict(result.arrays.to_torch_state_dict())
    print(json.dumps({"train_s": train_s, "client_steps": T * m * K, "train_loss": train_loss(model, *fmnist())}))


run_simulation(server_app=server, client_app=client, num_supernodes=N,
               backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                               "init_args": {"num_cpus": 1, "num_gpus": 0}})

"""FedAvg in Flower 1.42 (its PyTorch quickstart's Message API: a ClientApp with ``@app.train``,
in ``flower_client.py``; a ServerApp running ``flwr.serverapp.strategy.FedAvg``), simulated with
``run_simulation`` on one CPU as Flower's "Run simulations" guide sets it: one CPU per
``ClientApp`` (``client_resources``) and one CPU exposed to the simulation (``init_args``), so one
Ray worker runs the calls one after another. Usage: flower_fedavg.py N K T B LR PARTICIPATION;
prints one JSON line: training seconds (the strategy's rounds, as Flower's "Strategy execution
finished" times them), client-steps, the final model's metrics (``common.final_metrics``:
fedrun's round-T row)."""

import json
import sys
import time

import torch
from common import final_metrics, mlp
from flower_client import app as client
from flwr.app import ArrayRecord, ConfigRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from flwr.simulation import run_simulation

N, K, T, B = map(int, sys.argv[1:5])
LR, PARTICIPATION = map(float, sys.argv[5:7])
torch.set_num_threads(1)

server = ServerApp()


@server.main()
def main(grid: Grid, context: Context) -> None:
    torch.manual_seed(0)
    m = max(1, round(PARTICIPATION * N))
    strategy = FedAvg(
        fraction_train=PARTICIPATION,
        fraction_evaluate=0.0,
        min_train_nodes=m,
        min_available_nodes=N,
    )
    start = time.perf_counter()
    result = strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord(mlp().state_dict()),
        num_rounds=T,
        train_config=ConfigRecord({"lr": LR, "local-steps": K, "batch-size": B}),
    )
    train_s = time.perf_counter() - start
    model = mlp()
    model.load_state_dict(result.arrays.to_torch_state_dict())
    print(
        json.dumps(
            {
                "train_s": train_s,
                "client_steps": T * m * K,
                **final_metrics(model),
            }
        )
    )


run_simulation(
    server_app=server,
    client_app=client,
    num_supernodes=N,
    backend_config={
        "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
        "init_args": {"num_cpus": 1, "num_gpus": 0},
    },
)

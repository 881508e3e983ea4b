"""The ``ClientApp`` of ``flower_fedavg.py``, in a module of its own as in Flower's app layout
(the PyTorch quickstart's ``client_app.py`` beside its ``task.py``): a Ray worker imports it once
and keeps it, so each message carries a reference to the app, not the app and its module by
value. A call reads its settings from the message (``lr``, ``local-steps``, ``batch-size``) and
its partition from the node's config; the data and the model come from ``common``'s per-process
caches."""

import torch
from common import client_data, timed_call, worker_mlp
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset

torch.set_num_threads(1)
app = ClientApp()


@app.train()
def train(msg: Message, context: Context) -> Message:
    """K SGD steps on mini-batches of B drawn with replacement from this client's samples."""
    with timed_call():
        config = msg.content["config"]
        K, B = int(config["local-steps"]), int(config["batch-size"])
        x, y = client_data(
            int(context.node_config["num-partitions"]), int(context.node_config["partition-id"])
        )
        data = TensorDataset(x, y)
        # each batch one gather of B indices (a batch sampler, no per-sample collation)
        loader = DataLoader(
            data,
            batch_size=None,
            sampler=BatchSampler(
                RandomSampler(data, replacement=True, num_samples=K * B), B, drop_last=False
            ),
        )
        model = worker_mlp()
        model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
        opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
        total = 0.0
        for xb, yb in loader:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item()
        metrics = MetricRecord({"train_loss": total / K, "num-examples": len(x)})
        return Message(
            content=RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics}),
            reply_to=msg,
        )

"""The clients' training data on the compute device: the samples and each client's ids."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class ClientData:
    """The training set on the compute device, and the clients' index table."""

    x: torch.Tensor  # (N, *input_shape)
    y: torch.Tensor  # (N,)
    index: torch.Tensor  # (n, m_max) int64, row i = client i's sample ids, padded with its first
    sizes: torch.Tensor  # (n,) int64

    @classmethod
    def build(
        cls, x: torch.Tensor, y: torch.Tensor, clients: list[np.ndarray], device: torch.device
    ) -> ClientData:
        sizes = torch.tensor([len(c) for c in clients], dtype=torch.int64)
        index = torch.zeros(len(clients), int(sizes.max()), dtype=torch.int64)
        for i, c in enumerate(clients):
            index[i] = torch.as_tensor(np.resize(c, index.shape[1]))
        return cls(x.to(device), y.to(device), index.to(device), sizes.to(device))

    @property
    def n(self) -> int:
        return len(self.sizes)

    def sample_weights(
        self, samples: int | None = None, seed: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, w) with f = sum_s w_s l_s: every assigned sample id with weight 1/(n |D_i|); or,
        with ``samples`` < N, a fixed subset drawn without replacement and stratified by client
        (m_i = max(1, round(samples |D_i| / N)) ids of client i, weight 1/(n m_i)), on which
        sum_s w_s l_s is an unbiased estimate of f."""
        sizes = self.sizes
        if samples is None or samples >= int(sizes.sum()):
            m, order = sizes, self.index
        else:
            m = (samples * sizes / sizes.sum()).round().long().clamp(1)
            m = torch.minimum(m, sizes)
            gen = torch.Generator(device="cpu").manual_seed(seed)
            keys = torch.rand(self.index.shape, generator=gen).to(self.index.device)
            pos = torch.arange(self.index.shape[1], device=self.index.device)
            keys[pos >= sizes[:, None]] = 2.0  # padding sorts last
            order = self.index.gather(1, keys.argsort(dim=1))
        mask = torch.arange(self.index.shape[1], device=self.index.device) < m[:, None]
        w = (1.0 / (self.n * m.to(self.x.dtype)))[:, None].expand_as(self.index)[mask]
        return order[mask], w

    def samples(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and targets of the sample ids (any shape), gathered in one call each."""
        flat = ids.reshape(-1)
        x = self.x.index_select(0, flat).view(*ids.shape, *self.x.shape[1:])
        return x, self.y.index_select(0, flat).view(ids.shape)

"""SCAFFOLD, option I (Karimireddy et al., SCAFFOLD, Alg. 1 line 12: c_i+ = g_i(x)); h = 0 only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from .base import Env, register
from .scaffold import Scaffold


@register
@dataclass(kw_only=True)
class Scaffold1(Scaffold):
    """SCAFFOLD (option II's rounds, :class:`Scaffold`) with option I's control variates:

        c_i+ = g_i(z)   a fresh mini-batch gradient at the server model z (step index K of
                        round t, a batch none of the K local steps drew)

    instead of option II's c_i - c + (z - x_i)/(K beta), which is formed from the round's own
    path and so feeds the previous round's correction back into the next. One extra gradient
    per client per round; messages and bytes as option II."""

    name: ClassVar[str] = "scaffold1"
    display_name: ClassVar[str] = "SCAFFOLD (option I)"

    def control_delta(
        self,
        env: Env,
        t: int,
        z: torch.Tensor,
        X: torch.Tensor,
        c: torch.Tensor,
        Ci: torch.Tensor,
        out: torch.Tensor,
    ) -> torch.Tensor:
        """dc_i = g_i(z) - c_i, written into ``out``."""
        return torch.sub(env.grad(z.expand_as(X).contiguous(), t, env.K), Ci, out=out)

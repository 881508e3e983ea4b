"""The lives of started runs (:class:`Start`), written once for one run and for a seed batch's
R runs: each run's folder records its start (:func:`run_folder.begin`), its rounds are trained
(:class:`training.Training`) -- a batch's in lockstep, every local step of all their clients
one vmap call (:func:`seeds.join`) -- and each run is concluded on its own
(:func:`ending.conclude`): a run that diverges or fails ends with its own status while the
others go on; a first signal stops every run after its round, a second at once. The exit code
is the worst of the runs'."""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass

from ..common import signals
from ..common.errors import EXIT
from ..common.signals import StopAfterRound
from ..engine.lockstep import Lockstep
from . import checkpoint, code_record, ending, run_folder, seeds, training
from .experiment import Experiment
from .outputs import Summary, provenance


@dataclass
class Start:
    """A run ready to train: built, its folder as read when it started, with the checkpoint it
    continues from (None: round 0)."""

    exp: Experiment
    held: run_folder.Held
    ckpt: checkpoint.Checkpoint | None


def train(
    starts: list[Start],
    progress: bool,
    command: str,
    hydra_record: dict[str, str] | None,
    plot: ending.Plot | None,
) -> int:
    """Begin, train and conclude the runs ``starts`` (a seed batch's: ``seeds`` > 1, joined in
    lockstep, however many are left; a progress bar for a single run only); the worst exit
    code."""
    batch = starts[0].exp.cfg.seeds > 1
    lives = _Lives(starts, seeds.join([st.exp for st in starts]) if batch else None, command, plot)
    stopped = lives.begin(hydra_record, progress and not batch)
    if stopped is not None:
        return stopped
    lives.rounds()
    return max(lives.codes)


class _Lives:
    """The runs in training: each run's folder records its own end (:meth:`end`), its exit code
    in :attr:`codes`. ``lockstep``: the batch's joined calls (None: one run alone)."""

    def __init__(
        self, starts: list[Start], lockstep: Lockstep | None, command: str, plot: ending.Plot | None
    ) -> None:
        self.exps = [st.exp for st in starts]
        self.held, self.ckpts = [st.held for st in starts], [st.ckpt for st in starts]
        self.outs = [h.path for h in self.held]
        self.lockstep, self.plot = lockstep, plot
        self.codes: list[int] = []
        self.live: dict[int, training.Training] = {}
        self.summaries = [
            Summary(f, **provenance(command), T=e.cfg.T, code=code_record.of_config(e.cfg))
            for f, e in zip(self.outs, self.exps)
        ]

    def end(self, r: int, error: BaseException | None) -> None:
        """Conclude run ``r`` (``error``: what stopped it; None: finished). A stopped run's end
        is recorded whatever signal follows (:func:`signals.stopping`)."""
        stopped = isinstance(error, (training.Interrupted, KeyboardInterrupt))
        with signals.stopping() if stopped else nullcontext():
            run = self.live.pop(r, None)
            if run is not None:
                run.close()
            rows = run.rows if run is not None else None
            self.codes.append(
                ending.conclude(
                    self.exps[r], self.outs[r], self.summaries[r], error, rows, self.plot
                )
            )

    def stop(self, e: KeyboardInterrupt) -> None:
        """Conclude every live run, stopped by ``e`` (whatever signal follows)."""
        with signals.stopping():
            for r in list(self.live):
                self.end(r, e)

    def begin(self, hydra_record: dict[str, str] | None, progress: bool) -> int | None:
        """Each run's folder records its start; a signal before training stops every run (those
        not begun are left as they were) and returns the exit code; None: all began."""
        for r, exp in enumerate(self.exps):
            try:
                run_folder.begin(exp, self.held[r], self.ckpts[r], self.summaries[r], hydra_record)
                self.live[r] = training.Training(
                    exp,
                    self.outs[r],
                    progress=progress,
                    ckpt=self.ckpts[r],
                    summary=self.summaries[r],
                    label=f"seed {exp.cfg.seed}: " if self.lockstep is not None else "",
                )
                if self.live[r].done:
                    self.end(r, None)
            except KeyboardInterrupt as e:
                with signals.stopping():
                    self.end(r, e)
                    self.stop(e)
                return max(self.codes + [EXIT["interrupted"]])
            except BaseException as e:  # noqa: BLE001
                self.end(r, e)
        return None

    def rounds(self) -> None:
        """The rounds of the live runs until each has ended; a second signal stops every run at
        once."""
        with StopAfterRound() as stop:
            try:
                while self.live:
                    start = time.perf_counter()
                    failed = self._round()
                    self.after(failed, time.perf_counter() - start, stop)
            except KeyboardInterrupt as e:
                self.stop(e)

    def _round(self) -> dict[int, BaseException]:
        """One round of every live run (the batch's joined: :meth:`Lockstep.rounds`), the device's
        work awaited where its results are read next; the exception of each run whose round
        raised one."""
        device = self.exps[0].cfg.torch_device
        if self.lockstep is not None:
            failed = self.lockstep.rounds({r: run.round for r, run in self.live.items()})
            training.sync(device)
            return failed
        ((r, run),) = self.live.items()
        try:
            run.round()
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 (the run's own failure)
            return {r: e}
        if run.evaluates():  # the evaluation reads the device's results
            training.sync(device)
        return {}

    def after(self, failed: dict[int, BaseException], seconds: float, stop: StopAfterRound) -> None:
        """Each live run after a round of ``seconds``: failed, finished or going on."""
        for r in list(self.live):
            try:
                if r in failed:
                    raise failed[r]
                self.live[r].after(seconds, stop.signum)
                if self.live[r].done:
                    self.end(r, None)
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # noqa: BLE001
                self.end(r, e)

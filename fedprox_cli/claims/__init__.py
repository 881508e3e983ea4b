"""The papers' figures and tables as claims: declarations (``<paper>.yaml``, :mod:`.declare`),
their evidence from the run folders (:mod:`.evidence`), the word by one rule (:mod:`.verdict`),
the report, README and docs tables (:mod:`.render`), ``check``'s differences (:mod:`.compare`)
and the runs still to make (:mod:`.plan`). The command is ``fedrun-reproduce``
(:mod:`fedprox_cli.cli.reproduce`); from Python::

    from pathlib import Path
    from fedprox_cli.claims import declare, evidence, sources, verdict
    claim = declare.select(sources.claims(), ["fednmap-fig4"])[0]
    ev = evidence.gather(claim, claim.ran[0], Path("results/reproduction"), print)
    verdict.of(claim, ev).word          # 'partly'
    [(u.label, u.value, u.holds) for u in ev.outcomes[0].units]
"""

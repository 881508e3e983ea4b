"""fedprox_cli's Hydra launchers (``hydra/launcher=slurm`` and ``local``); the code is in
:mod:`fedprox_cli.cluster.launchers`. Hydra instantiates launcher plugins only from hydra_plugins, and
imports every module here at start-up: without the ``cluster`` extra (hydra-submitit-launcher)
this module defines no launcher, and choosing one is refused by :mod:`fedprox_cli.config.extras`."""

from fedprox_cli.config.extras import installed

if installed("hydra_plugins.hydra_submitit_launcher"):
    from hydra_plugins.hydra_submitit_launcher import submitit_launcher as plugin

    from fedprox_cli.cluster.launchers import LocalSide, SlurmSide

    class SlurmLauncher(SlurmSide, plugin.SlurmLauncher):
        pass

    class LocalLauncher(LocalSide, plugin.LocalLauncher):
        pass

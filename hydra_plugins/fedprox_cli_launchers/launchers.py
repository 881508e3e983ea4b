"""fedprox_cli's Hydra launchers (``hydra/launcher=slurm``, ``local`` and ``ray``); the code is in
:mod:`fedprox_cli.cluster.launchers` and :mod:`fedprox_cli.cluster.ray_jobs`. Hydra instantiates
launcher plugins only from hydra_plugins, and imports every module here at start-up: without
the ``cluster`` (hydra-submitit-launcher) or ``ray`` (hydra-ray-launcher) extra this module
defines no such launcher, and choosing one is refused by :mod:`fedprox_cli.config.extras`.
Neither submitit nor ray is imported here: the plugins' launcher modules import them when
launching."""

from fedprox_cli.config.extras import installed

if installed("hydra_plugins.hydra_submitit_launcher"):
    from hydra_plugins.hydra_submitit_launcher import submitit_launcher as plugin

    from fedprox_cli.cluster.launchers import LocalSide, SlurmSide

    class SlurmLauncher(SlurmSide, plugin.SlurmLauncher):
        pass

    class LocalLauncher(LocalSide, plugin.LocalLauncher):
        pass


if installed("hydra_plugins.hydra_ray_launcher"):
    from hydra.core.config_store import ConfigStore
    from hydra_plugins.hydra_ray_launcher import _config, ray_launcher  # noqa: F401 -- _config stores its configs

    # hydra/launcher=ray is conf/hydra/launcher/ray.yaml; the plugin's own config of that name
    # (stored by _config) would be merged under it as a schema, which Hydra warns is deprecated
    ConfigStore.instance().repo.get("hydra", {}).get("launcher", {}).pop("ray.yaml", None)

    from fedprox_cli.cluster.ray_jobs import RaySide

    class RayLauncher(RaySide, ray_launcher.RayLauncher):
        pass

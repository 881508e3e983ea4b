"""Adds the plugin's config groups (``algorithm/fedprox_server.yaml``) to fedrun's config
search path, so ``fedrun algorithm=fedprox_server`` works once the package is installed."""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class FedProxServerSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="fedprox_server", path="pkg://fedprox_server")

"""The configuration: validation of a composed config, run-control keys, OmegaConf resolvers."""

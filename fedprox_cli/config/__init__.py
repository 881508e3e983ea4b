"""The configuration: its typed schema (Hydra structured configs), the check that types a composed
config once, run-control keys, OmegaConf resolvers, job folder names."""

"""Running elsewhere: Hydra launchers (SLURM, local) and experiment trackers."""

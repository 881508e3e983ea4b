"""Running elsewhere: Hydra launchers (SLURM, local, Ray)."""

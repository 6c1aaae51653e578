"""Polos (Wada et al. 2024): head artifact, official-checkpoint converter, scorer and M2LHF trainer."""

"""CLIP-S / RefCLIP-S (Hessel et al. 2021) and PAC-S / RefPAC-S (Sarto et al. 2023): weights, converters, scorer."""

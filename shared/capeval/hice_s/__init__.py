"""HICE-S / RefHICE-S (Zeng et al. 2024): Alpha-CLIP, SAM/MobileSAM and FACTUAL weights, phrases, scorer, report."""

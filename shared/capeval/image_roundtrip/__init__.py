"""Image round-trip (Huang et al. 2024): text-to-image pipeline, image features, scorer."""

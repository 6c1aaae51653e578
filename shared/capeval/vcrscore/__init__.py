"""VCRScore (Ruiz et al. 2024): ViLT, detectors, MCIP, the official regressor (JSON trees), scorer and retraining."""

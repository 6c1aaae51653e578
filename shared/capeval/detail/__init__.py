"""Detailed-caption metrics on FACTUAL scene graphs: CAPTURE (``capture``), and FactualSceneGraph's SPICE and
Soft-SPICE (``spice_factual``, ``soft_spice``: not the SPICE jar), sharing one parser load and one parse per text."""

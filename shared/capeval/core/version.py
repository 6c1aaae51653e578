"""The installed capeval version (read by setup.cfg and written into every artifact's provenance)."""

__version__ = "0.1.0"

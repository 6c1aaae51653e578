"""Hooks that plug capeval metrics into other libraries' training and evaluation loops."""

"""Exceptions raised by capeval."""


class InputError(ValueError):
    """Bad user input: mismatched lengths, empty captions, unreadable images, ..."""


class ModelNotAvailableError(OSError):
    """Weights could not be found locally and could not be downloaded."""

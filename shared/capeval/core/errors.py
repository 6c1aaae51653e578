"""Exceptions raised by capeval."""


class InputError(ValueError):
    """Bad user input: mismatched lengths, empty captions, unreadable images, ..."""


class ModelNotAvailableError(OSError):
    """Weights could not be found locally and could not be downloaded."""


class ConversionError(ValueError):
    """An official checkpoint was refused by a converter (malformed, unsafe or of the wrong kind)."""


class ScoredThenFailedError(RuntimeError):
    """A stage after scoring failed; the message says which and where the per-image scores were saved first."""


class TruncationWarning(UserWarning):
    """Texts were longer than an encoder's token limit and were truncated (as the official code does)."""

"""The one error of the converter, apart from the package's other errors so that every part of
``convert/`` (reading, mapping, building, writing) can raise it without importing another part."""


class ConversionError(ValueError):
    """A directory or checkpoint that cannot be converted; the message says what to do."""

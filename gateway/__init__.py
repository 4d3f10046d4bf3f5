"""The gateway package: a fast AI gateway served as a raw ASGI app by Granian."""

__version__ = "0.1.0"

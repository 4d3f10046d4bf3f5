"""Endpoint handlers, one module per endpoint family."""

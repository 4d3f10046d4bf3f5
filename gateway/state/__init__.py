"""Shared state behind one interface: in-memory now, Redis and SQLite implementations beside it."""

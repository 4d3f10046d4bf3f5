"""Test support: starting the real gateway and mock under Granian on free loopback ports, and raw HTTP."""

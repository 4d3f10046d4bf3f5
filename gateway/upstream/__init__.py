"""Talking to upstreams: the shared aiohttp session and its pools, and the SSRF guard that pins addresses."""

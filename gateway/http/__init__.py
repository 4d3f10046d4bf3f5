"""ASGI edge: request context, body reading, responses, SSE and the one error format."""

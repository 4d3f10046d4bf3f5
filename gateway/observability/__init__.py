"""Observability: request records, logs with masking, Prometheus metrics, tracing."""

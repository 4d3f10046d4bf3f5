"""Long-running resources: gateway-stored files, batches the gateway runs (lease, resume) and provider passthrough."""

"""What every inference request runs through: admit (key, body, config, policies), run (routing, steps, upstream
attempts), respond (JSON or a relayed stream), then the log record. ``api/`` mounts it; ``gateway.runtime`` builds
what it uses."""

"""Usage-limit and rate-limit policies enforced before any upstream call (records live in gateway/controlplane)."""

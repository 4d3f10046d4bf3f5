"""Request logs and their rollups in PostgreSQL (``GATEWAY_LOG_STORE_URL``), shared by every instance: schema
migrations, the batched writer with its spool, and the reads behind ``/v1/logs``, its stream and aggregates.

Only ``url`` is imported without the setting (it checks the URL at start without loading asyncpg)."""

"""Routing: config -> ordered attempts: strategies, conditions, retries, breaker, param rewriting."""

"""The config object: schema (schema.py), parsing + validation + parse cache (validate.py), inheritance (inherit.py)."""

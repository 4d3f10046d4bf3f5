"""Control-plane records: gateway keys now; saved configs, provider slugs, prompts and policies later."""

"""The faithful local provider mock behind ``gateway mock-upstream``: one module per provider wire format."""

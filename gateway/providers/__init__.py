"""Provider adapters: unified (vendorA) requests to each provider's wire format and back."""

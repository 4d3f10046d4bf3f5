"""msgspec Structs for the unified (vendorA) wire bodies, one module per endpoint family."""

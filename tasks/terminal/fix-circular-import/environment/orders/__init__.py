"""Orders and their validation."""

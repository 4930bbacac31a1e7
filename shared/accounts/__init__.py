"""Reading the caller's accounts."""

"""The worker function."""

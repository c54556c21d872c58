"""The sweeper function."""

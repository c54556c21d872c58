"""The drive function."""

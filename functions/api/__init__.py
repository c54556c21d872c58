"""The api function."""

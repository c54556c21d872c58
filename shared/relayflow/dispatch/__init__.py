"""Dispatchers that deliver step requests to step hosts (inline, Lambda, HTTP) and signing."""

"""Adapters of the ports: in memory (tests, local runs) and AWS."""

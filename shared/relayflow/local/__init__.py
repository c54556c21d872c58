"""The local development stack: moto, the API on a port, a local scheduler."""

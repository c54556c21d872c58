"""The orchestrator core: run record, pure transitions and their effects; no I/O."""

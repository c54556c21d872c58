"""Operating runs: pause and resume, redrive, rerun from a step, bulk actions, the audit log."""

"""The work of the drive and sweeper functions: alarms, hand-offs, schedule firings, sweeps."""

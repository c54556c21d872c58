"""relayflow's benchmarks: each module measures one figure; ``python -m bench`` prints them all."""

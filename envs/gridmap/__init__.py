"""clew.envs.gridmap: partially observed grid map with a hidden task DAG (spec_000)."""

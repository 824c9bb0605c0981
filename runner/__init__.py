"""clew.runner: agents play suites into run directories: the episode runner, the agent registry
and presets, the run config, ``clew eval`` / ``clew search``, shard merging, provenance."""

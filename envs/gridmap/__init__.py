"""clew.envs.gridmap: partially observed grid map with a hidden task DAG (docs/methods/envs.md#grid-map-with-task-dag)."""

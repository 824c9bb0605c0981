"""The grid map with a hidden task DAG, as registered (docs/methods/envs.md#grid-map-with-task-dag)."""

from clew.envs.family import EnvEntry, Family, FamilyMetric

FAMILY = Family(
    "gridmap",
    envs={"gridmap": EnvEntry("clew.envs.gridmap.env:GridMapEnv",
                              "clew.envs.gridmap.generator:generate_task",
                              trace="clew.envs.gridmap.trace:trace",
                              levels=("presets.exploration_level", "presets.dag_level",
                                      "presets.exploitation_demand", "presets.density"))},
    metrics=(
        FamilyMetric(
            "explore_exploit_error", "clew.envs.gridmap.metrics:episode_metrics",
            "docs/methods/metric-explore-exploit-error.md: per-step error labels, normalised "
            "exploration and exploitation errors"),
    ),
    suites={
        "gridmap-v2": "clew.envs.gridmap.suites:gridmap_v2",
        "gridmap-v1": "clew.envs.gridmap.suites:gridmap_v1",
        "gridmap-mini": "clew.envs.gridmap.suites:gridmap_mini",
        "gridmap-semantic": "clew.envs.gridmap.suites:gridmap_semantic",
    },
    superseded={"gridmap-v1": "gridmap-v2"},
)

#: the grid map where going back matters (docs/methods/envs.md#pits): the same maps with two
#: hidden pits each; its tasks are grid-map tasks under this env's name (suites
#: ``exploration-v1-gridmap-pits-xl``, ``exploration-v1-wide-pits``,
#: ``exploration-v1-wide-test-pits``). The exploration metrics do not know pits: none here.
PITS_FAMILY = Family(
    "gridmap-pits",
    envs={"gridmap-pits": EnvEntry("clew.envs.gridmap.env:PitsGridMapEnv",
                                   "clew.envs.gridmap.generator:generate_pits_task",
                                   levels=("presets.exploration_level", "presets.dag_level"))},
)

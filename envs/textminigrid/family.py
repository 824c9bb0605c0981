"""TextMiniGrid on BabyAI levels, as registered (docs/methods/envs.md#textminigrid)."""

from clew.envs.family import EnvEntry, Family, FamilyMetric

FAMILY = Family(
    "textminigrid",
    envs={"textminigrid": EnvEntry("clew.envs.textminigrid.env:TextMiniGridEnv",
                                   "clew.envs.textminigrid.generator:generate_task",
                                   trace="clew.envs.textminigrid.trace:trace",
                                   levels=("difficulty", "rooms", "density"))},
    metrics=(
        FamilyMetric(
            "textminigrid", "clew.envs.textminigrid.metrics:episode_metrics",
            "docs/methods/metric-textminigrid.md#success-and-steps: success, atomic steps, "
            "decision steps, actions per decision step, L* and per-difficulty success (sr_*); "
            "docs/methods/metric-optimal-exploitation-gap.md extensions ext_* (revisits, "
            "coverage, no-ops, format)"),
    ),
    suites={
        "textminigrid-45": "clew.envs.textminigrid.suites:textminigrid_45",
        "textminigrid-v1": "clew.envs.textminigrid.suites:textminigrid_v1",
    },
)

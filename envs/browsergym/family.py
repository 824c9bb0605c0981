"""BrowserGym's web tasks, as registered (docs/web.md)."""

from clew.envs.family import EnvEntry, Family, FamilyMetric

FAMILY = Family(
    "browsergym",
    envs={"browsergym": EnvEntry("clew.envs.browsergym.env:BrowserGymEnv",
                                 "clew.envs.browsergym.tasks:generate_task", levels=("group",))},
    metrics=(
        FamilyMetric(
            "web", "clew.envs.browsergym.metrics:episode_metrics",
            "docs/web.md: success, steps, distinct page states (executed, with simulation), "
            "simulated vs executed steps, replays (reset + replayed prefix) and their cost per "
            "simulated step",
            keys=("page_states",)),
    ),
    suites={"miniwob-v1": "clew.envs.browsergym.suites:miniwob_v1"},
)

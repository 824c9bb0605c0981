"""HillSearch, TreeSearch and MaxSatSearch, as registered (docs/methods/envs.md#oracle-search-tasks)."""

from clew.envs.family import EnvEntry, Family, FamilyMetric

_TRACE = "clew.envs.oracle_search.trace:trace"

FAMILY = Family(
    "oracle_search",
    envs={
        "hillsearch": EnvEntry("clew.envs.oracle_search.hill:HillSearchEnv",
                               "clew.envs.oracle_search.hill:generate_task", trace=_TRACE),
        "treesearch": EnvEntry("clew.envs.oracle_search.treesearch:TreeSearchEnv",
                               "clew.envs.oracle_search.treesearch:generate_task", trace=_TRACE),
        "maxsatsearch": EnvEntry("clew.envs.oracle_search.maxsat:MaxSatSearchEnv",
                                 "clew.envs.oracle_search.maxsat:generate_task", trace=_TRACE),
    },
    metrics=(
        FamilyMetric(
            "best_found", "clew.envs.oracle_search.metrics:episode_metrics",
            "docs/methods/metric-best-found.md#normalised-reward: normalised best-found reward "
            "R/OPT, protocol counts, key-structure found"),
    ),
    suites={
        "paper-003-main": "clew.envs.oracle_search.suites:paper_003_main",
        "paper-003-additional": "clew.envs.oracle_search.suites:paper_003_additional",
        "paper-003-main-v1": "clew.envs.oracle_search.suites:paper_003_main_v1",
        "paper-003-additional-v1": "clew.envs.oracle_search.suites:paper_003_additional_v1",
        "paper-003-general": "clew.envs.oracle_search.suites:paper_003_general",
        "paper-003-difficulty": "clew.envs.oracle_search.suites:paper_003_difficulty",
    },
    superseded={
        "paper-003-main-v1": "paper-003-main",
        "paper-003-additional-v1": "paper-003-additional",
    },
)

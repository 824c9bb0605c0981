"""Dark Treasure Rooms, as registered (docs/methods/envs.md#dark-treasure-rooms)."""

from clew.envs.family import EnvEntry, Family, FamilyMetric

FAMILY = Family(
    "rooms",
    envs={"rooms": EnvEntry("clew.envs.rooms.env:RoomsEnv",
                            "clew.envs.rooms.generator:generate_task", levels=("layout.size",))},
    metrics=(
        FamilyMetric(
            "optimal_exploitation_gap", "clew.envs.rooms.metrics:rooms_gap_metrics",
            "docs/methods/metric-optimal-exploitation-gap.md#gap-decomposition: R^max, "
            "R^exploit, agent return, normalised total/exploration/exploitation gaps and shares "
            "(last episode and mean over episodes)",
            keys=("gap_total", "gap_exploration", "gap_exploitation")),
        FamilyMetric(
            "rooms_exploration", "clew.envs.rooms.metrics:rooms_exploration_metrics",
            "docs/methods/metric-optimal-exploitation-gap.md#rooms-exploration-statistics: "
            "state/room/object coverage, redundancy, sample efficiency, invalid rate",
            keys=("coverage", "redundancy")),
    ),
    suites={
        "rooms-v3": "clew.envs.rooms.suites:rooms_v3",
        "rooms-v3-4x4": "clew.envs.rooms.suites:rooms_v3_4x4",
        "rooms-v3-5x5": "clew.envs.rooms.suites:rooms_v3_5x5",
        "rooms-v3-7x7": "clew.envs.rooms.suites:rooms_v3_7x7",
        "rooms-v3-7x7-exploit": "clew.envs.rooms.suites:rooms_v3_7x7_exploit",
        "rooms-v3-7x7-explore": "clew.envs.rooms.suites:rooms_v3_7x7_explore",
        "rooms-v2": "clew.envs.rooms.suites:rooms_v2",
        "rooms-v2-4x4": "clew.envs.rooms.suites:rooms_v2_4x4",
        "rooms-v2-5x5": "clew.envs.rooms.suites:rooms_v2_5x5",
        "rooms-v2-7x7": "clew.envs.rooms.suites:rooms_v2_7x7",
        "rooms-v2-7x7-exploit": "clew.envs.rooms.suites:rooms_v2_7x7_exploit",
        "rooms-v2-7x7-explore": "clew.envs.rooms.suites:rooms_v2_7x7_explore",
        "rooms-v1": "clew.envs.rooms.suites:rooms_v1",
        "rooms-4x4": "clew.envs.rooms.suites:rooms_4x4",
        "rooms-5x5": "clew.envs.rooms.suites:rooms_5x5",
        "rooms-7x7": "clew.envs.rooms.suites:rooms_7x7",
        "rooms-7x7-exploit": "clew.envs.rooms.suites:rooms_7x7_exploit",
        "rooms-7x7-explore": "clew.envs.rooms.suites:rooms_7x7_explore",
    },
    superseded={
        "rooms-v1": "rooms-v2",
        "rooms-4x4": "rooms-v2-4x4",
        "rooms-5x5": "rooms-v2-5x5",
        "rooms-7x7": "rooms-v2-7x7",
        "rooms-7x7-exploit": "rooms-v2-7x7-exploit",
        "rooms-7x7-explore": "rooms-v2-7x7-explore",
        "rooms-v2": "rooms-v3",
        "rooms-v2-4x4": "rooms-v3-4x4",
        "rooms-v2-5x5": "rooms-v3-5x5",
        "rooms-v2-7x7": "rooms-v3-7x7",
        "rooms-v2-7x7-exploit": "rooms-v3-7x7-exploit",
        "rooms-v2-7x7-explore": "rooms-v3-7x7-explore",
    },
)

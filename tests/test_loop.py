"""`clew loop`: config checks, rounds as run directories, resume by stage, expert iteration, the
report, and the smoke version of the CPU experiment (docs/methods/loop.md)."""

import gzip
import json
from pathlib import Path

import pytest
import yaml
from clew.agents.window import ChatWindow
from clew.cli.main import main
from clew.loop.pipeline import (
    AgentSpec,
    Loop,
    LoopConfig,
    fill,
    report,
    run_loop,
    standard_errors_apart,
    with_window,
)
from clew.records import RunDir
from clew.runner.config import ConfigError, load_config

TINY_TRAIN = ["train.sft.max_steps=2", "train.sft.logging_steps=1"]
SHORT = ["limit_train=1", "limit_test=1", "limit_repeats=1", "limit_test_steps=6"]


def _cfg(tmp_path, name="demo", extra=()):
    return load_config(LoopConfig, name, [*SHORT, *TINY_TRAIN, *extra],
                       base={"out": str(tmp_path / "loop")}, presets="loop")


def test_presets_validate_and_name_bad_fields(tmp_path):
    for name in ("demo", "cpu-experiment", "cpu-experiment-one-model", "cpu-experiment-history",
                 "cpu-experiment-one-turn", "cpu-experiment-oracle-free"):
        assert load_config(LoopConfig, name, [], presets="loop").families
    with pytest.raises(ConfigError, match=r"familes: unknown field; did you mean families"):
        load_config(LoopConfig, "demo", ["familes=[]"], presets="loop")
    with pytest.raises(ConfigError, match="rounds"):
        load_config(LoopConfig, "demo", ["rounds=0"], presets="loop")


def test_an_env_in_two_families_or_in_none_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="'gridmap' is in both"):
        load_config(LoopConfig, "demo", [], presets="loop",
                    base={"families": [{"name": "a", "envs": ["gridmap"]},
                                       {"name": "b", "envs": ["gridmap", "rooms"]}]})
    cfg = _cfg(tmp_path).model_copy(update={"families": _cfg(tmp_path).families[:2]})
    with pytest.raises(ConfigError, match="no family names"):
        run_loop(cfg, say=lambda s: None, html=False)
    assert not (tmp_path / "loop").exists()  # nothing written: the fixed config starts clean


def test_placeholders_are_filled_in_nested_options():
    opts = {"model": "hf:{el}", "x": [{"y": "{out}/m"}], "n": 3}
    assert fill(opts, {"el": "/r/el", "out": "/o"}) == {"model": "hf:/r/el",
                                                        "x": [{"y": "/o/m"}], "n": 3}


def test_a_family_window_sets_the_prompts_of_every_agent_that_asks_a_trained_model():
    w = ChatWindow(keep_first_pairs=1, keep_last_pairs=3, keep_system=False)
    sent = {"window": {"keep_first_pairs": 1, "keep_last_pairs": 3, "keep_system": False,
                       "trail": False}}
    assert with_window({"model": "hf:m", "window": {"keep_last_pairs": 1}}, "distilled", w) == {
        "model": "hf:m", **sent}
    mcts = {"roles": "heuristic", "distilled_policy": {"model": "hf:m", "window": {}}}
    assert with_window(mcts, "mcts", w) == {"roles": "heuristic",
                                            "distilled_policy": {"model": "hf:m", **sent}}
    assert mcts["distilled_policy"] == {"model": "hf:m", "window": {}}  # not changed
    assert with_window({"roles": "heuristic"}, "mcts", w) == {"roles": "heuristic"}
    assert with_window({}, "random", w) == {}
    fams = [{"name": "g", "envs": ["gridmap"],
             "window": {"keep_first_pairs": 0, "keep_last_pairs": 0}}]
    with pytest.raises(ConfigError, match=r"families\.0\.window\.keep_last_pairs"):
        load_config(LoopConfig, "demo", [], presets="loop", base={"families": fams})


def test_a_familys_own_distill_names_kinds_the_loop_trains():
    fams = [{"name": "g", "envs": ["gridmap"], "distill": ["value"]}]
    with pytest.raises(ConfigError, match=r"families\.0\.distill: \['value'\] names a kind"):
        load_config(LoopConfig, "demo", ["model_per_family=true", "distill=[el]"],
                    presets="loop", base={"families": fams})


def test_family_train_options_need_a_model_per_family_and_are_checked_up_front(tmp_path):
    fams = [{"name": "g", "envs": ["gridmap"], "train": {"sft": {"max_steps": 5}}}]
    with pytest.raises(ConfigError, match=r"families\.0\.train: read only with model_per_family"):
        load_config(LoopConfig, "demo", [], presets="loop", base={"families": fams})
    cfg = _cfg(tmp_path, extra=["model_per_family=true"])
    fams = [f.model_copy(update={"train": {"max_step": 5}}) if f.name == "rooms" else f
            for f in cfg.families]
    with pytest.raises(ConfigError, match=r"max_step: unknown field.*\(in families \(rooms\)"
                                          r"\.train\)"):
        run_loop(cfg.model_copy(update={"families": fams}), say=lambda s: None, html=False)
    assert not (tmp_path / "loop").exists()  # refused before the first search


def test_train_seeds_need_a_model_per_family():
    fams = [{"name": "g", "envs": ["gridmap"], "train_seeds": 2}]
    with pytest.raises(ConfigError, match=r"families\.0\.train_seeds: read only with "
                                          r"model_per_family"):
        load_config(LoopConfig, "demo", [], presets="loop", base={"families": fams})


def test_train_seeds_give_an_evaluation_per_model_and_every_row_the_same_episodes(
        tmp_path, monkeypatch):
    """A family with train_seeds 3: each model-using agent plays once per seed's model, the
    baselines three times the repeats, and the report pools each row and shows it per model."""
    played = []

    def fake_evaluate(cfg, progress):   # an episode per task and repeat; the seed-2 model wins
        played.append(cfg)
        model = str(cfg.agent_options.get("model", ""))
        tasks = Path(cfg.suite).read_text().splitlines()
        rows = [{"key": f"{i}#{k}", "agent": cfg.agent_options.get("label", cfg.agent),
                 "agent_kind": "learned", "outcome": {"success": model.endswith("-seed2")}}
                for i in range(len(tasks)) for k in range(cfg.repeats)]
        Path(cfg.out).mkdir(parents=True, exist_ok=True)
        (Path(cfg.out) / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    monkeypatch.setattr("clew.loop.pipeline.evaluate", fake_evaluate)
    cfg = load_config(LoopConfig, "cpu-experiment-oracle-free", ["limit_test=2", "eval_jobs=1"],
                      base={"out": str(tmp_path / "loop")}, presets="loop")   # a fake evaluate
    # grid map, grid map with pits, rooms, oracle-query, TextMiniGrid
    assert [f.train_seeds for f in cfg.families] == [3, 3, 1, 1, 3]
    loop = Loop(cfg, say=lambda s: None)
    loop.open(resume=False)
    loop.evaluate_all(None, cfg.baselines, {})
    loop.evaluate_all(1, cfg.round_agents[:1], {f.name: ["el", "il"] for f in cfg.families})
    runs = {str(Path(c.out).relative_to(tmp_path / "loop")): c for c in played}
    models = tmp_path / "loop" / "round-1" / "models" / "gridmap"
    for seed, tail in enumerate(("", "-seed1", "-seed2")):
        c = runs[f"round-1/eval/el-distilled/gridmap{tail}"]
        assert (c.agent_options["model"], c.repeats) == (f"hf:{models / ('el' + tail)}", 1)
    assert runs["baselines/eval/random/gridmap"].repeats == 3    # as many as the three models
    assert runs["baselines/eval/random/rooms"].repeats == 1
    assert runs["baselines/eval/random/gridmap-pits"].repeats == 6   # twice a task, 3 models
    assert runs["baselines/eval/random/textminigrid"].repeats == 3
    assert "round-1/eval/el-distilled/rooms-seed1" not in runs
    rows = loop.rows()
    assert [len(r) for _, r in rows["gridmap"]] == [1, 3]
    assert [len(r) for _, r in rows["rooms"]] == [1, 1]
    text = report(loop)
    assert "r1 el-distilled by model seed (success): 0.000, 0.000, 1.000; across the 3 models " \
           "0.333 ± 0.333" in text
    rooms = text.split("## rooms")[1].split("## oracle-query")[0]
    assert "by model seed" not in rooms                          # one model: no such line
    assert "r1 el-distilled +0.333" in text                      # pooled: 20 of 60 episodes


def test_the_gate_keeps_new_models_only_if_they_play_the_gate_tasks_better(tmp_path,
                                                                            monkeypatch):
    """From round 2 on a round's models of each kind play the gate tasks (the loop's train
    suite: not the family's own search tasks, not the test tasks) beside the models they would
    replace, pooled over the seeds; where they do worse, the round's agents and the next round's
    search use the old ones (a tie too)."""
    played = []
    wins = {"round-1/models/gridmap/el-seed1", "round-2/models/gridmap/el",
            "round-2/models/gridmap/el-seed1", "round-1/models/gridmap/il",
            "round-1/models/gridmap/il-seed1", "round-2/models/gridmap/il-seed1",
            "round-3/models/gridmap/il", "round-3/models/gridmap/il-seed1"}

    def fake_evaluate(cfg, progress):   # a model in `wins` solves every task, the others none
        played.append(cfg)
        model = str(cfg.agent_options.get("model", ""))
        won = any(model.endswith(w) for w in wins)
        rows = [{"key": f"{i}#{k}", "agent": "a", "agent_kind": "learned",
                 "outcome": {"success": won}}
                for i in range(len(Path(cfg.suite).read_text().splitlines()))
                for k in range(cfg.repeats)]
        Path(cfg.out).mkdir(parents=True, exist_ok=True)
        (Path(cfg.out) / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    monkeypatch.setattr("clew.loop.pipeline.evaluate", fake_evaluate)
    cfg = load_config(LoopConfig, "cpu-experiment-oracle-free",
                      ["rounds=3", "gate.limit=4", "gate.repeats=2", "eval_jobs=1",
                       "search_jobs=1"],
                      base={"out": str(tmp_path / "loop")}, presets="loop")
    gridmap = cfg.families[0].model_copy(update={"train_seeds": 2})
    cfg = cfg.model_copy(update={"families": [gridmap], "train_suite": "gridmap-v1:train",
                                 "test_suite": "gridmap-mini:test"})
    loop = Loop(cfg, say=lambda s: None)
    loop.open(resume=False)
    gate = [json.loads(line) for line in (tmp_path / "loop" / "tasks" / "gridmap-gate.jsonl")
            .read_text().splitlines()]
    train = (tmp_path / "loop" / "tasks" / "gridmap-train.jsonl").read_text()
    test = (tmp_path / "loop" / "tasks" / "gridmap-test.jsonl").read_text()
    assert len(gate) == 4 and all(t["env"] == "gridmap" for t in gate)
    assert not any(t["id"] in train or t["id"] in test for t in gate)
    out = tmp_path / "loop"
    for r in (1, 2, 3):
        for name in ("el", "el-seed1", "il", "il-seed1"):
            (out / f"round-{r}" / "models" / "gridmap" / name).mkdir(parents=True)
            (out / f"round-{r}" / "models" / "gridmap" / name / "config.json").write_text("{}")
    models = str(out / "round-{}" / "models" / "gridmap" / "{}")
    trained = {"gridmap": ["el", "il"]}
    loop.gate(1, trained)
    assert played == []                                          # round 1 has nothing to replace
    loop.gate(2, trained)
    # EL: round 2 solves 16 of 16 gate episodes, round 1 8: the new models, both seeds
    assert [loop.kept(2, gridmap, s)["el"] for s in (0, 1)] == [models.format(2, "el"),
                                                                 models.format(2, "el-seed1")]
    # IL: round 2 solves 8, round 1 16: round 1's models stay, both seeds
    assert [loop.kept(2, gridmap, s)["il"] for s in (0, 1)] == [models.format(1, "il"),
                                                                 models.format(1, "il-seed1")]
    assert {c.repeats for c in played} == {2} and len(played) == 8
    assert all(c.suite.endswith("gridmap-gate.jsonl") for c in played)
    # the round's agents play the models kept
    played.clear()
    loop.evaluate_all(2, cfg.round_agents[1:], trained)
    assert [c.agent_options["model"] for c in played] == [f"hf:{models.format(1, 'il')}",
                                                          f"hf:{models.format(1, 'il-seed1')}"]
    # round 3 is judged against what round 2 kept; gate runs are not played twice
    played.clear()
    loop.gate(3, trained)
    assert len(played) == 4                                      # round 3's four models only
    assert loop.kept(3, gridmap, 1)["el"] == models.format(2, "el-seed1")   # 0 of 16: worse
    assert loop.kept(3, gridmap, 0)["il"] == models.format(1, "il")         # a tie: the old
    # the round after searches with the EL model kept (round 2's), not round 3's own
    played.clear()
    loop.search(4)
    assert played[0].agent_options["distilled_policy"]["model"] == f"hf:{models.format(2, 'el')}"
    text = report(loop)
    rule = "; new models replace old ones only if ahead by more than 1 SE of the difference"
    assert ("Round 2's gate (success over 16 gate episodes a kind, every seed's model; the r2 "
            f"rows play the models kept{rule}): EL 1.000 against r1's 0.500 (+3.9 SE): r2's kept; IL "
            "0.500 against r1's 1.000 (-3.9 SE): r1's kept") in text
    assert ("Round 3's gate (success over 16 gate episodes a kind, every seed's model; the r3 "
            f"rows play the models kept{rule}): EL 0.000 against r2's 1.000: r2's kept; IL 1.000 "
            "against r1's 1.000: r1's kept") in text
    # the gate's time is its runs' (12: four models of each round), the decisions add none
    for entry in loop.state["done"].values():
        entry["seconds"] = 1.0
    assert "gate 12 s" in report(loop)
    # with a margin of 0.6 round 2's EL models (1.000 against 0.500) do not replace round 1's;
    # the decision is made again from the gate runs, none played again
    loop.cfg.gate.margin = 0.6
    del loop.state["done"]["r2/gate/gridmap/el"]
    played.clear()
    loop.gate(2, trained)
    assert played == [] and loop.kept(2, gridmap, 1)["el"] == models.format(1, "el-seed1")
    # in standard errors of the difference: 0.500 is 3.9 of them (round 1's 8 of 16 give
    # 0.129, round 2's 16 of 16 none), so a bar of 4 keeps round 1's models and one of 3 not
    loop.cfg.gate.margin = 0.0
    for margin_se, kept in ((4.0, 1), (3.0, 2)):
        loop.cfg.gate.margin_se = margin_se
        del loop.state["done"]["r2/gate/gridmap/el"]
        loop.gate(2, trained)
        assert loop.kept(2, gridmap, 0)["el"] == models.format(kept, "el")
    assert "only if ahead by more than 3 SE of the difference" in report(loop)


def test_a_gate_needs_a_model_per_family_and_tasks_of_each_family(tmp_path):
    with pytest.raises(ConfigError, match="gate: read only with model_per_family"):
        load_config(LoopConfig, "demo", ["gate.repeats=1"], presets="loop")
    cfg = load_config(LoopConfig, "cpu-experiment-oracle-free", ["gate.suite=gridmap-mini:test"],
                      base={"out": str(tmp_path / "loop")}, presets="loop")
    with pytest.raises(ConfigError, match="gate: 'gridmap-pits' has no task in "
                                          "gridmap-mini:test"):
        Loop(cfg).open(resume=False)
    assert not (tmp_path / "loop").exists()                      # refused before any write


def test_standard_errors_apart():
    a = {"mean": {"success": 0.5}, "stderr": {"success": 0.1}}
    b = {"mean": {"success": 0.2}, "stderr": {"success": 0.0}}
    assert standard_errors_apart(a, b, "success") == pytest.approx(3.0)


@pytest.mark.slow
def test_loop_rounds_resume_and_expert_iteration(tmp_path, capsys):
    """One round of the demo at its smallest, then --resume with rounds=2 whose search uses the
    round-1 EL model as the MCTS policy: round 1 is not redone, round 2 has its own folder."""
    out = tmp_path / "loop"
    said: list[str] = []
    cfg = _cfg(tmp_path, extra=["train_jobs=2"])
    loop = run_loop(cfg, say=said.append, html=False)
    assert any("2 models, 2 at once" in s for s in said)  # EL and IL, a spawned process each
    r1 = out / "round-1"
    for fam in ("gridmap", "rooms", "oracle-query", "textminigrid"):
        assert list((r1 / "search" / fam / "trees").glob("*/*.json.gz")), fam
        # the demo's models learn the grid maps; the other families name no model (distill: [])
        for agent in ("el-distilled", "il-distilled"):
            assert (r1 / "eval" / agent / fam / "episodes.jsonl").exists() == (fam == "gridmap")
        assert (out / "baselines" / "eval" / "random" / fam / "episodes.jsonl").exists()
    trained = json.loads((r1 / "models" / "el" / "clew_train.json").read_text())
    assert trained["config"]["envs"] == ["gridmap"]      # the one model learns the grid maps
    for kind in ("el", "il"):
        assert (r1 / "models" / kind / "config.json").exists()
    tiny = json.loads((out / "models" / "tiny" / "clew_tiny.json").read_text())
    assert tiny["corpus"] == "given"  # the tokenizer learned the env's own text
    report = (out / "report.md").read_text()
    assert "## gridmap" in report and "## oracle-query" in report
    assert "| r1 el-distilled | el-distilled | learned |" in report
    assert "Against random (success)" in report and "Against random (normalized_reward)" in report
    assert "no distilled agent plays it" in report              # rooms, oracle-query, TMG
    state = json.loads((out / "state.json").read_text())
    assert "r1/train/el" in state["done"] and "r1/data" in state["done"]
    # the EL model's evaluation records backtracks used (an agent that may backtrack)
    rec = json.loads((r1 / "eval" / "el-distilled" / "gridmap" / "episodes.jsonl")
                     .read_text().splitlines()[0])
    assert "backtracks" in rec["outcome"]
    assert len(rec["steps"]) <= 6  # limit_test_steps
    search = yaml.safe_load((r1 / "search" / "textminigrid" / "config.yaml").read_text())
    assert search["max_episode_steps"] == 40  # the search that makes the data keeps its cap
    stamp = (r1 / "models" / "el" / "config.json").stat().st_mtime_ns

    # a second round, searching with the round-1 EL model as the MCTS policy
    nxt = {"label": "mcts-el-policy", "agent": "mcts", "agent_options": {
        "roles": "heuristic", "search": {"n_simulations": 2, "branching_factor": 2},
        "distilled_policy": {"model": "hf:{el}", "format": "el", "n_samples": 2,
                             "max_tokens": 16}}}
    # train_jobs (like concurrency) only changes the speed: a resume may change it
    cfg2 = cfg.model_copy(update={"rounds": 2, "next_search": None, "train_jobs": 1})
    with pytest.raises(ConfigError, match="differs"):  # next_search changed: refused
        run_loop(cfg2.model_copy(update={"next_search": AgentSpec(**nxt)}), resume=True,
                 say=said.append,
                 html=False)
    said.clear()
    loop = run_loop(cfg2, resume=True, say=said.append, html=False)
    assert any("round 1 search" in s and "skipped" in s for s in said)
    assert (r1 / "models" / "el" / "config.json").stat().st_mtime_ns == stamp
    assert (out / "round-2" / "models" / "el" / "config.json").exists()
    assert "r2 el-distilled" in (out / "report.md").read_text()
    assert len(loop.rows()["gridmap"]) == 2 + 2 * 2
    # without --resume an existing loop is refused, naming --resume
    with pytest.raises(ConfigError, match="--resume"):
        run_loop(cfg2, say=said.append, html=False)


@pytest.mark.slow
@pytest.mark.parametrize("per_family", [False, True], ids=["one-model", "model-per-family"])
def test_expert_iteration_searches_with_the_previous_model(tmp_path, per_family):
    """next_search with {el}: round 2's trees come from MCTS whose policy is round 1's model (with
    model_per_family, the family's)."""
    nxt = {"label": "mcts-el-policy", "agent": "mcts", "agent_options": {
        "roles": "heuristic", "search": {"n_simulations": 2, "branching_factor": 2},
        "distilled_policy": {"model": "hf:{el}", "format": "el", "n_samples": 2,
                             "max_tokens": 16}}}
    cfg = _cfg(tmp_path, extra=["rounds=2", "distill=[el]", "round_agents=[]",
                                "limit_repeats=2", "search.agent_options.value.noise=0.0",
                                "search.agent_options.policy.prior=oracle",
                                f"model_per_family={str(per_family).lower()}"])
    cfg = cfg.model_copy(update={"next_search": AgentSpec(**nxt), "baselines": [],
                                 "families": [f for f in cfg.families
                                              if f.name in ("gridmap", "textminigrid")]})
    # round 1 searches with the oracle prior above, not the demo's grid-map walks; the family's
    # own search setting reaches both rounds' searches
    gridmap = cfg.families[0].model_copy(update={"search_options": {"search": {
        "max_depth_actions": 3}}})
    cfg = cfg.model_copy(update={"train_suite": "gridmap-mini:train",
                                 "test_suite": "gridmap-mini:test", "families": [gridmap]})
    run_loop(cfg, say=lambda s: None, html=False)
    rec = json.loads((tmp_path / "loop" / "round-2" / "search" / "gridmap" / "episodes.jsonl")
                     .read_text().splitlines()[0])
    assert rec["agent"] == "mcts-el-policy" and rec["agent_kind"] == "learned+search"
    cfg_run = (tmp_path / "loop" / "round-2" / "search" / "gridmap" / "config.yaml").read_text()
    models = tmp_path / "loop" / "round-1" / "models"
    assert f"hf:{models / 'gridmap' / 'el' if per_family else models / 'el'}\n" in cfg_run
    for r in (1, 2):
        search = yaml.safe_load((tmp_path / "loop" / f"round-{r}" / "search" / "gridmap" /
                                 "config.yaml").read_text())["agent_options"]["search"]
        assert search["max_depth_actions"] == 3
    assert search["n_simulations"] == 2 and search["branching_factor"] == 2  # next_search's own


@pytest.mark.slow
def test_cpu_experiment_smoke(tmp_path, capsys):
    """The oracle-free CPU experiment's config at its smallest, through the command line: an EL
    and an IL model per family where its search gave chats, made from hindsight paths;
    TextMiniGrid with a family history of two turns and the trail, so that its samples and its
    prompts are checked to keep them; and no oracle in any tree of the teacher."""
    preset = load_config(LoopConfig, "cpu-experiment-oracle-free", [], presets="loop")
    assert preset.model_per_family and preset.distill == ["el", "il"]
    assert (preset.data["il_path"], preset.data["el_traversals"]) == ("shortcut", "detours")
    families = [f.model_dump() for f in preset.families]
    tg = [f["name"] for f in families].index("textminigrid")
    assert families[tg]["train"]["sft"]["max_steps"] > 2
    families[tg]["window"] = {"keep_first_pairs": 0, "keep_last_pairs": 2, "keep_system": False,
                             "trail": True}
    families[tg]["train"] = {"sft": {"max_steps": 3}}   # the family's own steps, over the loop's 2
    # longer walks on a task they solve: the one smoke task must be solved for TextMiniGrid to
    # have chats
    families[tg]["search_options"]["value"].update(horizon=20, rollouts=4)
    families[tg]["train_suite"] = None
    config = tmp_path / "cpu-experiment-history2.yaml"
    config.write_text(yaml.safe_dump({**preset.model_dump(), "families": families}))
    rc = main(["loop", "--config", str(config), "--out", str(tmp_path / "x"), *SHORT,
               *TINY_TRAIN])
    assert rc == 0
    text = capsys.readouterr().out
    assert "r1 el-distilled" in text and "r1 il-distilled" in text
    # a model per family and kind that had chats, each trained on its own env's chats and steps
    models = tmp_path / "x" / "round-1" / "models"
    for fam, envs, steps in (("gridmap", ["gridmap"], 2), ("textminigrid", ["textminigrid"], 3)):
        for kind in ("el", "il"):
            run = json.loads((models / fam / kind / "clew_train.json").read_text())
            assert (run["config"]["envs"], run["config"]["sft"]["max_steps"]) == (envs, steps)
            assert run["config"]["model"].endswith("models/tiny")     # one shared base model
    # three models a kind on the grid map, trained alike but for the seed, each evaluated
    for seed, tail in enumerate(("", "-seed1", "-seed2")):
        run = json.loads((models / "gridmap" / f"el{tail}" / "clew_train.json").read_text())
        assert (run["config"]["sft"]["seed"], run["config"]["output_dir"]) == (
            seed, str(models / "gridmap" / f"el{tail}"))
        assert (tmp_path / "x" / "round-1" / "eval" / "el-distilled" / f"gridmap{tail}" /
                "episodes.jsonl").exists()
    assert "r1 el-distilled by model seed (success): " in text
    # a family whose search gave no chats says so instead of showing rows
    for fam in ("rooms", "oracle-query"):
        assert (models / fam / "el").exists() or "trained no" in text, fam
    # TextMiniGrid keeps its family's history and the trail in its samples and in every
    # distilled prompt; the grid map the data's one turn, without the trail
    cfg = LoopConfig(**yaml.safe_load((tmp_path / "x" / "loop.yaml").read_text()))
    assert cfg.families[tg].name == "textminigrid"
    r1 = tmp_path / "x" / "round-1"
    for fam, pairs, trail in (("textminigrid", 2, True), ("gridmap", 1, False)):
        opts = yaml.safe_load((r1 / "eval" / "el-distilled" / fam / "config.yaml").read_text())
        opts = opts["agent_options"]
        assert (opts["window"]["keep_last_pairs"], opts["window"]["trail"]) == (pairs, trail)
        assert opts["model"] == f"hf:{models / fam / 'el'}"        # the family's own model
    rows = [json.loads(line) for line in (r1 / "data" / "el.jsonl").read_text().splitlines()]
    users = {env: [sum(m["role"] == "user" for m in r["messages"]) for r in rows
                   if r["meta"]["env"] == env] for env in ("gridmap", "textminigrid")}
    assert set(users["gridmap"]) == {1} and set(users["textminigrid"]) == {1, 2}
    for r in rows:
        trail = "PATH: S0" in r["messages"][-2]["content"]
        assert trail == (r["meta"]["env"] == "textminigrid"), r["meta"]["env"]
    # the grid-map chats follow hindsight shortcuts
    report = json.loads((r1 / "data" / "export_report.json").read_text())
    assert report["counts"]["hindsight_shortcuts"] >= 1
    # no oracle in the teacher's trees
    trees = list(r1.glob("search/*/trees/*/*.json.gz"))
    assert trees
    for path in trees:
        with gzip.open(path, "rt") as f:
            assert json.load(f)["meta"]["uses_oracle"] is False, path
    # per-family report pages with plots, as clew report writes them
    for fam in ("gridmap", "textminigrid"):
        assert (tmp_path / "x" / "report" / fam / "report.html").exists()
        assert list((tmp_path / "x" / "report" / fam / "plots").glob("*.png")), fam


def test_a_search_in_shards_makes_the_trees_of_one_process(tmp_path):
    """search_jobs: each family's train tasks in shards played by processes at once, merged
    into the family's search run: the same episodes and trees as one process, and a resumed
    round finds the merged runs done (docs/methods/loop.md#config)."""
    def untimed(record):   # every field but the times measured
        if isinstance(record, dict):
            return {k: untimed(v) for k, v in record.items() if k not in ("wall_s", "seconds")}
        return [untimed(v) for v in record] if isinstance(record, list) else record

    def searched(n: int) -> dict[str, dict[str, str]]:
        cfg = load_config(LoopConfig, "cpu-experiment-oracle-free",
                          ["limit_train=3", f"search_jobs={n}",
                           "train_suite=exploration-v1-gridmap-pits-xl:train",
                           "test_suite=exploration-v1-gridmap-pits-xl:test"],
                          base={"out": str(tmp_path / f"jobs{n}")}, presets="loop")
        cfg = cfg.model_copy(update={"families": [cfg.families[1]], "gate": None})
        loop = Loop(cfg, say=lambda s: None)
        loop.open(resume=False)
        runs = loop.search(1)
        assert runs == [str(tmp_path / f"jobs{n}" / "round-1" / "search" / "gridmap-pits")]
        out = {}
        for run in map(Path, runs):
            episodes = [json.loads(line)
                        for line in (run / "episodes.jsonl").read_text().splitlines()]
            assert len(episodes) == 3
            out[run.name] = {"episodes": untimed(sorted(episodes, key=lambda e: e["key"]))}
            for tree in sorted(run.glob("trees/*/*.json.gz")):
                out[run.name][str(tree.relative_to(run))] = untimed(json.loads(
                    gzip.decompress(tree.read_bytes())))
        if n > 1:
            shards = sorted(p.name for p in (tmp_path / f"jobs{n}" / "round-1" / "search" /
                                             "shards" / "gridmap-pits").iterdir())
            assert shards == ["0-of-2", "1-of-2"]
            assert loop.search(1) == runs   # done before: nothing is played or merged again
        return out

    one, two = searched(1), searched(2)
    assert one.keys() == two.keys() and len(one["gridmap-pits"]) > 3
    assert one == two


def test_test_runs_in_processes_play_the_episodes_of_one(tmp_path):
    """eval_jobs: the test runs of every family at once in processes, each its own stage, the
    same episodes as one after the other (docs/methods/loop.md#config)."""
    played = {}
    for n in (1, 2):
        cfg = load_config(LoopConfig, "cpu-experiment-oracle-free",
                          ["limit_test=2", f"eval_jobs={n}"],
                          base={"out": str(tmp_path / f"jobs{n}")}, presets="loop")
        loop = Loop(cfg, say=lambda s: None)
        loop.open(resume=False)
        loop.evaluate_all(None, cfg.baselines, {})
        keys = [k for k in loop.state["done"] if k.startswith("baselines/eval/")]
        assert keys == [f"baselines/eval/random/{f.name}" for f in cfg.families]
        played[n] = {k: sorted((e["key"], e["actions"], e["outcome"]) for e in
                               RunDir(Path(loop.state["done"][k]["result"])).episodes())
                     for k in keys}
    assert played[1] == played[2] and all(played[1].values())

"""User errors without tracebacks, and the smaller CLI findings (issue 19 items 5-8): each user
error is one `error: ...` line naming the thing, exit 2 (`--debug` adds the traceback); agents
declare the env families they play and their need of a model, checked before any work; a run's
own config.yaml, presets by name, `--resume` reading the run; SIGTERM, a closed pipe, `--version`,
help texts, did-you-mean, a model spec with ': ', key=value anywhere; umask-respecting files."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from clew.cli.main import main
from clew.runner.config import PRESETS
from toyenv import line_task, register

register()
TESTS = Path(__file__).parent
SUITE = "gridmap-mini:test"


def one_error(capsys, args: list[str], *needles: str) -> str:
    """``clew ARGS`` fails with exit 2 and a single ``error:`` line holding every needle."""
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = [x for x in err.splitlines() if x.strip() and "episodes:" not in x]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def finished(cwd, capsys):
    """A finished two-episode run of the frontier agent in ``runs/f``."""
    assert main(["eval", "--agent", "frontier", "--suite", SUITE, "--limit", "2",
                 "--out", "runs/f"]) == 0
    capsys.readouterr()
    return cwd / "runs" / "f"


# --- item 6: one line per user error ---------------------------------------------------------

def test_missing_model_folder_is_named(cwd, capsys):
    one_error(capsys, ["eval", "--agent", "react", "--model", "hf:/nonexistent", "--suite",
                       SUITE], "hf:/nonexistent", "/nonexistent does not exist")
    assert not (cwd / "runs").exists()   # refused before any work


def test_vllm_backend_without_vllm(cwd, capsys):
    pytest.importorskip("importlib")
    from importlib.util import find_spec

    if find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    one_error(capsys, ["eval", "--agent", "react", "--model", "vllm:Qwen/Qwen2.5-0.5B",
                       "--suite", SUITE], "vllm package is not installed")


def test_agent_that_needs_a_model_without_one(cwd, capsys):
    one_error(capsys, ["eval", "--agent", "react", "--suite", SUITE],
              "agent 'react' needs a model", "--model")


def test_option_of_the_wrong_type(cwd, capsys):
    one_error(capsys, ["search", "--agent", "mcts", "--suite", SUITE,
                       "agent_options.search.n_simulations=x"],
              "search.n_simulations", "integer")


def test_corrupt_config_file(cwd, capsys):
    (cwd / "bad.yaml").write_text("agent: [\n")
    one_error(capsys, ["eval", "--config", "bad.yaml", "--suite", SUITE], "bad.yaml", "YAML")


def test_resume_with_another_agent_or_suite(finished, capsys):
    one_error(capsys, ["eval", "--agent", "random", "--suite", SUITE, "--out", "runs/f",
                       "--resume"], "cannot resume", "'agent'", "'frontier'", "'random'")
    one_error(capsys, ["eval", "--agent", "frontier", "--suite", "gridmap-v1:test", "--out",
                       "runs/f", "--resume"], "cannot resume", "'suite'")
    assert len((finished / "episodes.jsonl").read_text().splitlines()) == 2  # what was kept


def test_corrupt_episodes_file_on_resume(finished, capsys):
    episodes = finished / "episodes.jsonl"
    good = episodes.read_text().splitlines()
    episodes.write_text(good[0] + "\nnot json\n" + good[1] + "\n")
    one_error(capsys, ["eval", "--out", "runs/f", "--resume"],
              "episodes.jsonl:2", "corrupt line")
    assert episodes.read_text().splitlines()[1] == "not json"   # nothing was changed


def test_damaged_input_to_clew_data(finished, capsys):
    episodes = finished / "episodes.jsonl"
    good = episodes.read_text().splitlines()
    episodes.write_text("{broken\n" + good[1] + "\n")
    one_error(capsys, ["data", "--out", "data", "runs/f"], "episodes.jsonl:1", "corrupt line")
    one_error(capsys, ["data", "--out", "data", "runs/none"], "runs/none",
              "not a run directory")
    (finished / "config.yaml").write_text("- a list\n")
    one_error(capsys, ["report", "runs/f"], "config.yaml", "mapping")


def test_debug_shows_the_traceback(cwd, capsys):
    assert main(["eval", "--agent", "react", "--suite", SUITE, "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "error: agent 'react' needs a model" in err


# --- every command that takes a model checks it before any work --------------------------------

@pytest.fixture
def folders(cwd):
    """A folder holding only a LoRA adapter, and one holding neither a model nor an adapter."""
    adapter, empty = cwd / "el-lora", cwd / "empty"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps(
        {"base_model_name_or_path": "runs/models/tiny", "r": 8}))
    empty.mkdir()
    return adapter, empty


@pytest.mark.parametrize("command, agent, model, needles", [
    ("eval", "distilled", "hf:/no/such/folder", ["agent_options.model",
                                                 "/no/such/folder does not exist"]),
    ("eval", "react", "nope:Qwen/Qwen2.5-0.5B", ["unknown backend 'nope'"]),
    ("eval", "distilled", "hf:el-lora", ["LoRA adapter without its base", "hf:BASE+lora:el-lora",
                                         "runs/models/tiny"]),
    ("eval", "distilled", "vllm:empty", ["empty holds no model"]),
    ("eval", "react", "hf:tiny:m+lora:empty", ["empty holds no LoRA adapter"]),
    ("eval", "policy-only", "hf:/no/such/folder", ["/no/such/folder does not exist"]),
    ("search", "rmcts", "hf:/no/such/folder", ["agent_options.model", "does not exist"]),
    ("search", "mcts", "hf:el-lora", ["LoRA adapter without its base"]),
])
def test_a_bad_model_is_refused_up_front(folders, cwd, capsys, command, agent, model, needles):
    one_error(capsys, [command, "--agent", agent, "--model", model, "--suite", SUITE,
                       "--out", "runs/x"], *needles)
    assert not (cwd / "runs").exists()


@pytest.mark.parametrize("override, needles", [
    ("agent_options.distilled_policy.model=hf:/no/such/folder",
     ["agent_options.distilled_policy.model", "does not exist"]),
    ("agent_options.distilled_value.model=hf:/no/such/folder",
     ["agent_options.distilled_value.model", "does not exist"]),
    ("agent_options.role_models.value=hf:el-lora", ["agent_options.role_models.value",
                                                    "LoRA adapter without its base"]),
])
def test_nested_models_of_search_agents_are_checked(folders, cwd, capsys, override, needles):
    agent = ("mcts-distilled-policy" if "distilled_policy" in override else
             "mcts-learned" if "distilled_value" in override else "rmcts")
    args = ["search", "--agent", agent, "--suite", SUITE, "--out", "runs/x", override]
    if agent == "rmcts":
        args += ["--model", "fake:Next action: up"]
    one_error(capsys, args, *needles)
    assert not (cwd / "runs").exists()


@pytest.mark.parametrize("model, needles", [
    ("/no/such/folder", ["model: '/no/such/folder'", "does not exist"]),
    ("hf:/no/such/folder", ["does not exist"]),
    ("vllm:Qwen/Qwen2.5-0.5B", ["not the 'vllm' backend"]),
    ("el-lora", ["LoRA adapter without its base"]),
    ("hf:tiny:m+lora:el-lora", ["not base+adapter"]),
])
def test_clew_train_checks_its_base_model_up_front(folders, cwd, capsys, model, needles):
    (cwd / "d.jsonl").write_text(json.dumps({"messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "up"}]}) + "\n")
    one_error(capsys, ["train", "--config", "lora-tiny", "--model", model, "--data", "d.jsonl",
                       "--out", "out"], *needles)
    assert not (cwd / "out").exists()


def test_clew_train_merge_only_needs_an_adapter_folder(folders, cwd, capsys):
    one_error(capsys, ["train", "--merge-only", "empty", "--out", "merged"],
              "--merge-only", "not a LoRA adapter folder")
    one_error(capsys, ["train", "--merge-only", "el-lora", "--model", "/no/base", "--out",
                       "merged"], "--model", "does not exist")
    assert not (cwd / "merged").exists()


@pytest.mark.parametrize("where, needles", [
    ("baseline", ["baselines.2.agent_options.model", "/no/such/folder does not exist"]),
    ("round", ["round_agents.0.agent_options.model", "LoRA adapter without its base"]),
    ("train", ["train.model", "/no/base does not exist"]),
])
def test_clew_loop_checks_every_model_before_its_first_stage(folders, cwd, capsys, where,
                                                             needles):
    config = yaml.safe_load((PRESETS / "loop" / "demo.yaml").read_text())
    if where == "baseline":
        config["baselines"].append({"label": "lm", "agent": "react",
                                    "agent_options": {"model": "hf:/no/such/folder"}})
    elif where == "round":
        config["round_agents"][0]["agent_options"]["model"] = "hf:el-lora"
    else:
        config["train"]["model"] = "/no/base"
    (cwd / "loop.yaml").write_text(yaml.safe_dump(config))
    one_error(capsys, ["loop", "--config", "loop.yaml", "--out", "runs/loop"], *needles)
    assert not (cwd / "runs").exists()


# --- item 7: agents declare the families they play and whether they need a model -------------

def test_agent_refuses_a_suite_it_cannot_play_before_any_work(cwd, capsys):
    one_error(capsys, ["eval", "--agent", "frontier", "--suite", "rooms-4x4:test", "--out",
                       "runs/x"], "'frontier'", "gridmap", "rooms")
    assert not (cwd / "runs" / "x").exists()


def test_clew_agents_lists_families_and_model_need_not_import_paths(capsys):
    assert main(["agents"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert rows["frontier"][1:3] == ["-", "gridmap"]
    assert rows["react"][1:3] == ["needed", "all"]
    assert "clew." not in out and ":" not in "".join(r[1] for r in rows.values())


# --- item 8: the smaller ones ------------------------------------------------------------------

def test_a_runs_own_config_is_a_valid_config(finished, capsys):
    assert main(["eval", "--config", "runs/f/config.yaml", "--out", "runs/g", "--limit", "1"]) == 0
    config = yaml.safe_load((finished.parent / "g" / "config.yaml").read_text())
    assert config["agent"] == "frontier" and config["suite"] == SUITE and config["limit"] == 1


def test_resume_reads_agent_and_suite_from_the_run(finished, capsys):
    episodes = finished / "episodes.jsonl"
    episodes.write_text(episodes.read_text().splitlines()[0] + "\n")   # one episode lost
    assert main(["eval", "--out", "runs/f", "--resume"]) == 0
    assert len(episodes.read_text().splitlines()) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_config_takes_a_preset_name(cwd, capsys):
    assert main(["search", "--config", "mcts-heuristic", "--suite", SUITE, "--limit", "1",
                 "--out", "runs/p", "agent_options.search.n_simulations=2"]) == 0
    assert yaml.safe_load((cwd / "runs" / "p" / "config.yaml").read_text())["agent"] \
        == "mcts-heuristic"


def test_unknown_config_field_gets_a_did_you_mean(cwd, capsys):
    (cwd / "typo.yaml").write_text(f"agent: frontier\nsuite: {SUITE}\nmax_step: 3\n")
    one_error(capsys, ["eval", "--config", "typo.yaml"], "max_step", "did you mean max_episode_steps")


def test_model_spec_with_colon_space_is_a_string(cwd, capsys):
    assert main(["eval", "--agent", "react", "--model", "fake:Action: up", "--suite", SUITE,
                 "--limit", "1", "--out", "runs/m"]) == 0
    config = yaml.safe_load((cwd / "runs" / "m" / "config.yaml").read_text())
    assert config["agent_options"]["model"] == "fake:Action: up"


def test_key_value_overrides_anywhere_on_the_line(cwd, capsys):
    assert main(["eval", "--agent", "frontier", "max_episode_steps=5", "--suite", SUITE, "--limit",
                 "1", "--out", "runs/k", "repeats=2"]) == 0
    config = yaml.safe_load((cwd / "runs" / "k" / "config.yaml").read_text())
    assert config["max_episode_steps"] == 5 and config["repeats"] == 2


def test_textminigrid_task_without_a_level_is_refused_by_score(cwd, capsys):
    lines = [{"task": {"env": "textminigrid", "params": {}, "seed": 0, "id": "t"},
              "actions": []},
             {"task": {"env": "textminigrid", "params": {"rooms": "four"}, "seed": 0,
                       "id": "u"}, "actions": []}]
    (cwd / "t.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert main(["score", "t.jsonl"]) == 1
    err = capsys.readouterr().err
    assert "t.jsonl:1: textminigrid task 't': params need 'layout'" in err
    assert "t.jsonl:2:" in err and "rooms" in err.splitlines()[-1]
    assert "Traceback" not in err


def test_files_respect_the_umask(cwd, capsys):
    old = os.umask(0o022)
    try:
        assert main(["eval", "--agent", "frontier", "--suite", SUITE, "--limit", "1",
                     "--out", "runs/u"]) == 0
    finally:
        os.umask(old)
    for name in ("config.yaml", "metrics.json", "summary.md", "episodes.jsonl"):
        assert stat.S_IMODE((cwd / "runs" / "u" / name).stat().st_mode) == 0o644, name


def test_version_and_help_texts(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("clew ")
    helps = {}
    for command in ("", "eval", "search"):
        with pytest.raises(SystemExit):
            main([command, "--help"] if command else ["--help"])
        helps[command] = capsys.readouterr().out
    assert helps["eval"] != helps["search"]
    for command in ("eval", "search"):
        assert "examples:" in helps[command] and "(default: 4)" in helps[command]
        # the server timeout/retry options and their defaults (item 5)
        assert "agent_options.model_options.timeout" in helps[command]
        assert "agent_options.model_options.retries" in helps[command]
    top = helps[""]
    assert "``" not in top and "spec_0" not in top and "DESIGN" not in top
    assert "clew demo --quick" in top


def test_command_help_is_plain_text(capsys):
    from clew.cli.main import EXTRA_COMMANDS

    for command in EXTRA_COMMANDS:
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        assert text.startswith(f"usage: clew {command}")
        for markup in ("``", ":mod:", "spec_0", "(issue "):
            assert markup not in text, (command, markup)


def test_readme_documents_the_server_timeout_and_retry_options():
    readme = (TESTS.parent / "README.md").read_text()
    assert "agent_options.model_options.timeout" in readme
    assert "agent_options.model_options.retries" in readme


# --- signals and pipes (real processes) --------------------------------------------------------

DRIVER = """
import sys
sys.path.insert(0, {tests!r})
import toyenv
toyenv.register()
from clew.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def clew_process(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", DRIVER.format(tests=str(TESTS)), *args],
                            stderr=subprocess.PIPE, text=True, **kw)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("sigint,signals", [("default", 1), ("ignored", 1), ("ignored", 2)])
def test_sigterm_says_what_was_kept(tmp_path, sigint, signals):
    """SIGTERM mid-run: exit 143, one line saying what was kept, no traceback; also when the
    process was started with SIGINT ignored, as a shell starts its background jobs, and when
    the signal comes twice (SLURM signals every process of a job, and the batch script passes
    it on)."""
    suite = tmp_path / "tasks.jsonl"
    suite.write_text("".join(line_task(i, length=2).to_json() + "\n" for i in range(40)))
    out = tmp_path / "x"
    proc = clew_process("eval", "--agent", "toy-scripted", "--suite", str(suite), "--out",
                        str(out), "--concurrency", "1", "agent_options.delay=0.1",
                        stdout=subprocess.DEVNULL,
                        preexec_fn=_ignore_sigint if sigint == "ignored" else None)
    deadline = time.time() + 60
    while time.time() < deadline and not (out / "episodes.jsonl").exists():
        time.sleep(0.05)
    for _ in range(signals):
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.01)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert err.count("terminated (SIGTERM)") == 1, err
    assert "Traceback" not in err
    kept = len((out / "episodes.jsonl").read_text().splitlines())
    assert f"terminated (SIGTERM): stopped; {kept} finished episode(s) are kept in {out}; " \
           f"rerun with --resume" in err


def test_closed_pipe_ends_quietly(tmp_path):
    tasks = [{"task": json.loads(line_task(i).to_json()), "actions": ["right"] * 3}
             for i in range(3000)]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    proc = clew_process("score", str(tmp_path / "t.jsonl"), stdout=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()        # `clew score f | head -1`
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert proc.returncode == 141

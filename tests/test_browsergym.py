"""BrowserGym env pieces that need no browser: action grammar, page text, suite, web heuristics,
and that clew imports no BrowserGym until a web env is used (docs/web.md)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from clew.envs.base import Observation
from clew.envs.browsergym.candidates import candidate_actions, quoted_strings
from clew.envs.browsergym.observation import PageRecord, elements, prune
from clew.envs.registry import generate
from clew.envs.suites import get_suite
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TREE = """RootWebArea 'Enter Text Task', focused, url='file:///x/y/miniwob/enter-text.html'
\t[9] generic
\t\tgeneric
\t\t\tStaticText 'Some words'
\t\t\t\tInlineTextBox 'Some words'
\t\t\t[13] generic, clickable
\t\t\t\tStaticText 'ornare.'
\t\t\tStaticText ''
\t\t\t[14] textbox '' value='Myr', clickable
\t\t\t[15] button 'Submit', clickable
\t\t\t[16] button "it's", clickable
\t\t\t[17] checkbox 'Nb', clickable, checked='true'"""


def test_page_text_drops_empty_lines_and_local_urls():
    text = prune(TREE)
    assert "url='enter-text.html'" in text and "file://" not in text
    assert "InlineTextBox" not in text and "StaticText ''" not in text
    assert "[9] generic" not in text and "\t\tgeneric" not in text
    # a clickable generic (a MiniWoB++ link) and its text stay
    assert "[13] generic, clickable" in text and "StaticText 'ornare.'" in text
    els = {e["bid"]: e for e in elements(text)}
    assert list(els) == ["13", "14", "15", "16", "17"]
    assert els["17"]["checked"] and not els["16"]["checked"]
    assert els["13"]["text"] == "ornare." and els["13"]["name"] == ""
    assert els["14"]["role"] == "textbox" and els["14"]["value"] == "Myr"
    assert els["16"]["name"] == "it's" and all(e["clickable"] for e in els.values())


def test_state_key_ignores_goal_and_error():
    a = PageRecord("goal A", prune(TREE))
    b = PageRecord("goal B", prune(TREE), error="TimeoutError: ...")
    c = PageRecord("goal A", prune(TREE).replace("Submit", "Send"))
    assert a.key == b.key != c.key
    assert "The last action failed: TimeoutError" in b.text and "Goal: goal B" in b.text


@pytest.fixture(scope="module")
def grammar():
    pytest.importorskip("browsergym.core", reason="the web extra is not installed")
    from clew.envs.browsergym.actions import ActionGrammar

    return ActionGrammar(("bid",))


@pytest.mark.parametrize("text, canonical", [
    ("click('13')", "click('13')"),
    ('Next action: ```click("13")```', "click('13')"),
    ("I think I should CLICK(13) now.", "click('13')"),
    ("click('13', button='left')", "click('13')"),
    ("click(bid='13', button='right')", "click('13', 'right')"),
    ("fill('14', \"it's\")", "fill('14', \"it's\")"),
    ("noop()", "noop()"),
    ("first I think (a lot) then fill('14', 'x') and click('15')", "fill('14', 'x')"),
])
def test_actions_parse_tolerantly_to_one_canonical_form(grammar, text, canonical):
    assert grammar.parse(text) == canonical
    assert grammar.parse(canonical) == canonical  # canonical texts are fixed points


@pytest.mark.parametrize("text", ["", "click the submit button", "click()", "explode('13')",
                                  "fill('14')", "click('13', 'left', [], 1, 2, 3)"])
def test_malformed_actions_do_not_parse(grammar, text):
    assert grammar.parse(text) is None


GARBAGE = ["Next action:", "```", "click(", "click('", "')", "fill('14', ", "(", ")" * 5,
           "\x00", "\n", "😀", "[" * 20, "select_option('3', ['a', 'b'])", "noop(", "#"]


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(max_size=200),
                 st.lists(st.sampled_from(GARBAGE), max_size=12).map("".join)))
def test_garbage_parses_to_nothing_or_to_a_fixed_point(grammar, text):
    parsed = grammar.parse(text)
    assert parsed is None or grammar.parse(parsed) == parsed


def test_action_help_lists_the_action_set(grammar):
    help_text = grammar.describe()
    assert "click(bid" in help_text and "fill(bid" in help_text


def test_suite_miniwob_v1_has_documented_tasks_seeds_and_budgets():
    suite = get_suite("miniwob-v1")
    test, train = suite.split("test"), suite.split("train")
    names = {t.params["task"] for t in test}
    assert len(names) == 16 and names == {t.params["task"] for t in train}
    assert all(n.startswith("miniwob.") for n in names)
    assert len(test) == 48 and {t.seed for t in test} == {0, 1, 2}
    assert len(train) == 160 and min(t.seed for t in train) >= 100
    assert len({t.id for t in test + train}) == len(test) + len(train)
    budgets = {t.params["task"]: t.params["max_steps"] for t in test}
    assert budgets["miniwob.click-test"] == 3 and budgets["miniwob.enter-text"] == 6
    assert budgets["miniwob.login-user"] == 10
    assert all(t.env == "browsergym" and t.split == "test" for t in test)
    groups = {t.params["group"] for t in test}
    assert groups == {"one-step", "two-step", "form"}


def test_generator_checks_params():
    task = generate("browsergym", {"task": "miniwob.click-test"}, 7)
    assert task.seed == 7 and task.params == {"task": "miniwob.click-test", "max_steps": 10}
    with pytest.raises(ValueError, match="'task'"):
        generate("browsergym", {}, 0)
    with pytest.raises(ValueError, match="unknown key"):
        generate("browsergym", {"task": "miniwob.click-test", "seed": 3}, 0)


def test_importing_clew_and_the_web_env_imports_no_browsergym():
    code = ("import sys, clew.envs, clew.envs.browsergym.env, clew.envs.browsergym.suites, "
            "clew.agents.heuristics.search_roles, clew.runner.episodes, clew.cli.main\n"
            "from clew.envs.registry import make\n"
            "from clew.envs.suites import get_suite\n"
            "make('browsergym'); get_suite('miniwob-v1')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('browsergym', 'playwright', 'miniwob')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


class _PageEnv:
    """Stands in for a web env: the heuristic policy reads only its observation."""

    name = "browsergym"
    done = False

    def __init__(self, goal: str, tree: str):
        self.obs = Observation("", {"goal": goal, "elements": list(elements(prune(tree)))})

    def observation(self):
        return self.obs


def test_web_policy_fills_quoted_strings_and_puts_named_elements_first():
    assert quoted_strings('Enter "Myron" and “x y”, then "Myron" again') == ["Myron", "x y"]
    env = _PageEnv('Enter "Myron" into the text field and press Submit.', TREE)
    acts = candidate_actions(env)               # the field holds 'Myr': no fill
    assert acts[0] == "click('15')"              # "Submit" is named by the goal
    assert set(acts[1:]) == {"click('13')", "click('14')", "click('16')"}  # 17 is checked
    # a field that holds text is left alone; the action just taken is not proposed again
    env = _PageEnv('Enter "Myron" into the text field.', TREE.replace("value='Myr'", ""))
    assert candidate_actions(env)[0] == "fill('14', 'Myron')"
    assert "fill('14', 'Myron')" not in candidate_actions(env, previous="fill('14', 'Myron')")
    env.done = True
    assert candidate_actions(env) == []

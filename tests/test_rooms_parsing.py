"""Reading messy model replies as one visible object (docs/methods/envs.md#dark-treasure-rooms)."""

import pytest
from clew.envs.rooms.env import RoomsEnv
from clew.envs.rooms.parsing import normalise, parse_reply
from rooms_cases import example_task

VISIBLE = ["dodger_blue door", "tangerine door", "midnight_blue ball"]


@pytest.mark.parametrize("reply, expected", [
    ("<tangerine door>", "tangerine door"),
    ("I will open <Tangerine Door> now.", "tangerine door"),
    ("<dodger blue door>", "dodger_blue door"),
    ("< Dodger-Blue   DOOR. >", "dodger_blue door"),
    ("<dodger_blue_door>", "dodger_blue door"),
    ("**<midnight_blue ball>**", "midnight_blue ball"),
    ("<think>maybe <tangerine door>?</think>\n<midnight_blue ball>", "midnight_blue ball"),
    ("<think>long reasoning</think> <dodger_blue door>", "dodger_blue door"),
    ("tangerine door", "tangerine door"),  # a bare canonical action
    ("  Tangerine door \n", "tangerine door"),
    ("<midnight_blue ball> or <tangerine door>", "midnight_blue ball"),  # the first span
    ("<tangerine door> now; later maybe <midnight_blue ball>", "tangerine door"),
    ("Options: <midnight_blue ball>, <tangerine door>\nAnswer: <tangerine door>",
     "tangerine door"),  # an answer label is read before the whole reply
    ("e.g. <door>. Then <tangerine door>", "tangerine door"),  # the example names nothing
    ("Answer: <tangerine door>\n\nNot <midnight_blue ball>: it is far.", "tangerine door"),
    ("### Answer\n**<Tangerine Door>**", "tangerine door"),
])
def test_valid_replies(reply, expected):
    assert parse_reply(reply, VISIBLE) == expected


@pytest.mark.parametrize("reply", [
    "", "no brackets here tangerine door please", "<door>", "<tangerine ball>",
    "<teal door>",  # not visible
    "<tangerine>",  # bare colour needs lenient
    "<>", "<think><tangerine door></think>",  # only inside the reasoning
    "<think>I will pick <tangerine door>",  # reasoning never closed: no answer
    "<<>>",
])
def test_invalid_replies(reply):
    assert parse_reply(reply, VISIBLE) is None


def test_lenient_accepts_a_unique_bare_colour_only():
    assert parse_reply("<tangerine>", VISIBLE, lenient=True) == "tangerine door"
    assert parse_reply("<Midnight Blue>", VISIBLE, lenient=True) == "midnight_blue ball"
    assert parse_reply("tangerine", VISIBLE, lenient=True) is None  # still needs brackets
    both = ["teal door", "teal ball"]
    assert parse_reply("<teal>", both, lenient=True) is None


def test_normalise():
    assert normalise(" Dodger Blue DOOR. ") == "dodger_blue door"
    assert normalise("ruby") == "ruby"
    assert normalise("ball") == "ball"


def test_env_treats_messy_replies_like_the_parser_and_never_raises():
    env = RoomsEnv()
    env.reset(example_task(1))
    for junk in ["", "???", "<", "<door>", "x" * 500, "<tangerine ball>", None]:
        step = env.step(junk)
        assert not step.valid and step.reward == 0
        assert "Invalid action" in step.obs.text and "You see: " in step.obs.text
    assert env.state.doors_used == 0 and env.state.moves == []
    step = env.step("Let me try <Dodger Blue Door>.")
    assert step.valid and step.info["object"] == "dodger_blue door"
    assert env.canonical("<Cerulean door>!") == "cerulean door"
    assert env.parse_action("<cerulean door>") == "cerulean door"
    assert env.parse_action("<tangerine door>") is None  # not visible in this room

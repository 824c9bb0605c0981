"""Parsing messy model replies into TextMiniGrid actions (docs/methods/envs.md#textminigrid)."""

import pytest
from clew.envs.textminigrid.parsing import ACTIONS, parse_reply
from hypothesis import given
from hypothesis import strategies as st


def test_plain_reply_with_intentions():
    p = parse_reply("<actions>Turn Left,Go Forward,Pick Up</actions>"
                    "<intentions>Explore the left side of the grid</intentions>", 5)
    assert p.actions == ["Turn Left", "Go Forward", "Pick Up"]
    assert p.intention == "Explore the left side of the grid"
    assert p.canonical == "Turn Left,Go Forward,Pick Up"


def test_last_block_wins_over_quoted_tags_in_reasoning():
    reply = ("Let me think. The format is <actions>Turn Left,Go Forward</actions>, as the "
             "example says. The ball is ahead, so\n<actions>Go Forward, Pick Up</actions>\n"
             "<intentions>grab it</intentions>")
    assert parse_reply(reply, 10).actions == ["Go Forward", "Pick Up"]


@pytest.mark.parametrize("reply", [
    "```\n<actions>turn left, GO FORWARD ,pickup</actions>\n```",
    "<ACTIONS> Turn_Left ,\n go-forward,\tPick up </Actions>",
    "Sure!\n<actions>\n1. Turn Left\n2. Go Forward\n3. Pick Up\n</actions>",
    "<actions>`Turn Left`, \"Go Forward\", 'Pick Up'.</actions>",
    "<actions>left,forward,pick_up</actions>",
    "<actions>[Turn Left, Go Forward, Pick Up]</actions>",
])
def test_case_spaces_fences_aliases_and_list_markers(reply):
    assert parse_reply(reply, 10).actions == ["Turn Left", "Go Forward", "Pick Up"]


def test_unknown_pieces_are_skipped_and_reported():
    p = parse_reply("<actions>Turn Left,Jump,Toggle,Dance around</actions>", 10)
    assert p.actions == ["Turn Left", "Toggle"]
    assert p.skipped == ["Jump", "Dance around"]


def test_truncation_to_m():
    p = parse_reply("<actions>" + ",".join(["Go Forward"] * 7) + "</actions>", 5)
    assert p.actions == ["Go Forward"] * 5 and p.truncated == ["Go Forward"] * 2


def test_unclosed_final_block_is_read_to_the_end():
    assert parse_reply("<actions>Turn Right,Go Forward", 5).actions == ["Turn Right", "Go Forward"]
    assert parse_reply("<actions>Toggle<intentions>open it</intentions>", 5).actions == ["Toggle"]


def test_bare_lists_are_accepted_but_prose_is_not_mined():
    assert parse_reply("Turn Left,Go Forward", 5).actions == ["Turn Left", "Go Forward"]
    assert parse_reply("```\nDrop\n```", 5).actions == ["Drop"]
    assert not parse_reply("I will turn left and then go forward to the door.", 5).ok
    assert not parse_reply("", 5).ok
    assert not parse_reply("<actions></actions>", 5).ok
    assert not parse_reply("<actions>wait</actions>", 5).ok


@given(st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=12), st.integers(1, 10),
       st.sampled_from([",", ", ", " , ", ",\n"]), st.booleans())
def test_round_trip_of_rendered_action_lists(actions, m, sep, upper):
    body = sep.join(a.upper() if upper else a for a in actions)
    p = parse_reply(f"some text <actions>{body}</actions> more", m)
    assert p.actions == actions[:m] and p.truncated == actions[m:]

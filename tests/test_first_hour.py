"""An operator's first hour (issue #32 §3): the small defects each of which costs a few minutes of
doubt, each as the operator meets it on the command line."""

from __future__ import annotations

import json

from .conftest import Cli, assert_one_line_error


def test_replay_start_and_invocation_are_two_options(cli: Cli) -> None:
    """two-starts' first invocation id begins with "2": `--invocation 2` is that id, `--start 2`
    the second start, and the note says which start of how many was judged."""
    by_id = cli("replay", "--example", "two-starts", "--invocation", "2", "--json")
    by_no = cli("replay", "--example", "two-starts", "--start", "2", "--json")
    notes = [json.loads(ln)["message"] for r in (by_id, by_no) for ln in r.output.splitlines()
             if '"note"' in ln and "replay " in ln]
    assert "start 1 of 2, invocation 2" in notes[0] and by_id.exit_code == 1, notes
    assert "start 2 of 2" in notes[1] and by_no.exit_code == 0, notes
    assert_one_line_error(cli("replay", "--example", "two-starts", "--start", "1", "--invocation", "2"),
                          "--start N or --invocation ID")
    assert_one_line_error(cli("replay", "--example", "two-starts", "--start", "3"), "no start matches --start 3",
                          "starts in the input: 1 (2")

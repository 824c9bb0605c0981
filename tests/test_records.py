"""clew.records: atomic writes, JSON lines with the torn-last-line rule, the run directory."""

from __future__ import annotations

import gzip
import json
import math
import os

import pytest
from clew.records import RecordError, RunDir, atomic_write_json, dumps, read_jsonl, write_atomic
from clew.records.jsonl import numbered_jsonl


def test_dumps_is_strict_json_with_undefined_as_null():
    assert dumps({"a": math.nan, "b": [math.inf, 1.5], 3: "x"}) == '{"a":null,"b":[null,1.5],"3":"x"}'


def test_torn_last_line_dropped_with_warning_and_cut_only_on_repair(tmp_path, capsys):
    path = tmp_path / "e.jsonl"
    path.write_bytes(b'{"k": 1}\n\n{"k": 2}\n{"k": 3, "t": "caf\xc3')  # torn mid-character
    assert read_jsonl(path) == [{"k": 1}, {"k": 2}]
    assert "e.jsonl:4: dropping a torn last line" in capsys.readouterr().err
    assert path.read_bytes().endswith(b"\xc3")  # reading alone never changes the file
    assert numbered_jsonl(path, repair=True) == [(1, {"k": 1}), (3, {"k": 2})]
    assert path.read_bytes() == b'{"k": 1}\n\n{"k": 2}\n'
    capsys.readouterr()
    assert read_jsonl(path) == [{"k": 1}, {"k": 2}] and capsys.readouterr().err == ""


def test_a_bad_line_before_the_end_is_an_error_naming_file_and_line(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_text('{"k": 1}\n{"k": \n{"k": 3}\n')
    with pytest.raises(ValueError, match=r"e.jsonl:2: corrupt line"):
        read_jsonl(path)
    assert read_jsonl(tmp_path / "missing.jsonl") == []


def test_atomic_write_replaces_whole_files_and_leaves_no_temp_on_failure(tmp_path):
    path = tmp_path / "sub" / "f.bin"
    write_atomic(path, b"old")
    write_atomic(path, (bytes([i]) * 3 for i in range(3)))  # chunks, as the dataset export
    assert path.read_bytes() == b"\x00\x00\x00\x01\x01\x01\x02\x02\x02"

    def chunks():
        yield b"new"
        raise RuntimeError("disk gone")

    with pytest.raises(RuntimeError):
        write_atomic(path, chunks())
    assert path.read_bytes().startswith(b"\x00") and os.listdir(path.parent) == ["f.bin"]
    atomic_write_json(tmp_path / "t.json.gz", {"v": math.nan}, compress=True)
    assert json.loads(gzip.decompress((tmp_path / "t.json.gz").read_bytes())) == {"v": None}


def test_run_dir_resume_repairs_the_torn_line_then_appends_cleanly(tmp_path):
    run = RunDir(tmp_path / "run")
    run.open({"agent": "a"}, resume=False)
    run.append_episodes([{"key": "t0#0"}, {"key": "t1#0"}])
    run.close()
    with open(run.episodes_file, "a") as fh:
        fh.write('{"key": "t2#0", "tas')
    assert run.finished_keys() == {"t0#0", "t1#0"}
    with pytest.raises(FileExistsError, match="--resume"):
        RunDir(run.path).open({"agent": "a"}, resume=False)
    with pytest.raises(ValueError, match="'agent' was 'a', now 'b'"):
        RunDir(run.path).open({"agent": "b"}, resume=True, compare=("agent",))
    RunDir(run.path).open({"agent": "a"}, resume=True, compare=("agent",)).close()
    run.append_episode({"key": "t2#0"})
    assert [r["key"] for r in run.episodes()] == ["t0#0", "t1#0", "t2#0"]


def test_repeated_episode_records_dropped_with_a_warning_different_ones_refused(tmp_path, capsys):
    run = RunDir(tmp_path / "run")
    run.open({"agent": "a"}, resume=False).close()
    recs = [{"key": f"t{i}#0", "actions": ["up"] * i, "wall_s": 0.1} for i in range(3)]
    run.append_episodes(recs)
    run.append_episodes([dict(recs[1], wall_s=0.7), recs[2]])  # two writers, one episode twice
    assert [r["key"] for r in run.episodes()] == ["t0#0", "t1#0", "t2#0"]
    assert "dropping 2 duplicate episode record(s) (line(s) 4, 5)" in capsys.readouterr().err
    assert len(run.episodes_file.read_text().splitlines()) == 5  # readers do not rewrite
    RunDir(run.path).open({"agent": "a"}, resume=True).close()  # the writer does
    assert [json.loads(x)["key"] for x in run.episodes_file.read_text().splitlines()] == \
        ["t0#0", "t1#0", "t2#0"]
    run.append_episode(dict(recs[0], actions=["down"]))
    with pytest.raises(RecordError, match=r"'t0#0' is recorded twice with different contents "
                                          r"\(lines 1 and 4; fields: actions\)"):
        run.episodes()

"""``streamer compact|log-compact|clean|archive``: own help each, readable output, ``--json``."""

from __future__ import annotations

import json

import pytest

from streamer.cli import build_parser, main
from streamer.cli.services_cmd import _archive_lines
from streamer.services.archive import ArchiveOutcome
from tests.support import block_tables as tg

POLICIES = """\
policies:
  compaction: {trigger: {delta_commits: 1000}}
  log_compaction: {min_blocks: 2}
  clean: {retain_commits: 1}
  archive: {min_commits: 2, max_commits: 3}
"""


def _help(command: str) -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices[command].format_help()


def test_each_service_has_its_own_help():
    helps = {c: _help(c) for c in ("compact", "log-compact", "clean", "archive")}
    assert "--force" in helps["compact"] and "compaction trigger" in helps["compact"]
    for other in ("log-compact", "clean", "archive"):
        assert "--force" not in helps[other], other
    assert "Log compaction (RFC-48)" in helps["log-compact"]
    assert "retain_commits" in helps["clean"]
    assert "max_commits" in helps["archive"]
    assert "--schedule" not in helps["archive"] and "--run" not in helps["archive"]
    assert all("--json" in h for h in helps.values())


def test_clean_rejects_force(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["clean", "/nowhere", "--force"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --force" in capsys.readouterr().err


@pytest.fixture
def table(tmp_path) -> tuple[str, str]:
    path = str(tmp_path / "t")
    tg.build(path, 6)
    policies = tmp_path / "policies.yaml"
    policies.write_text(POLICIES)
    return path, str(policies)


def test_readable_output_of_every_service(table, capsys):
    path, policies = table
    assert main(["log-compact", path, "--policies", policies]) == 0
    out = capsys.readouterr().out
    assert "log compaction: scheduled " in out and "file slice(s)" in out
    assert "completed: " in out and " written" in out
    assert "{" not in out

    assert main(["compact", path, "--schedule", "--policies", policies]) == 0
    assert "nothing to schedule" in capsys.readouterr().out
    assert main(["compact", path, "--schedule", "--force", "--policies", policies]) == 0
    assert "compaction: scheduled " in capsys.readouterr().out
    assert main(["compact", path, "--run", "--policies", policies]) == 0
    out = capsys.readouterr().out
    assert out.startswith("compaction ") and "completed: " in out and "file(s)" in out
    assert main(["compact", path, "--run"]) == 0
    assert capsys.readouterr().out == "compaction: no pending plan to run\n"

    # a write after the compaction: the slice it compacted is then no query's to read
    tg.open_writer(path).upsert(tg.Gen(7, key_space=60).upserts(4))
    assert main(["clean", path, "--policies", policies]) == 0
    out = capsys.readouterr().out
    assert out.startswith("clean ") and "deleted " in out and "are kept" in out

    assert main(["archive", path, "--policies", policies]) == 0
    out = capsys.readouterr().out
    assert out.startswith("archive: moved ") and ".hoodie/archived" in out
    assert main(["archive", path, "--policies", policies]) == 0
    assert "nothing to archive" in capsys.readouterr().out


def test_json_output_keeps_the_raw_record(table, capsys):
    path, policies = table
    assert main(["log-compact", path, "--policies", policies, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["service"] == "log-compact" and doc["scheduled"]
    assert doc["executed"][0]["status"] == "completed" and doc["executed"][0]["bytes_written"] > 0
    assert main(["clean", path, "--policies", policies, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["executed"][0]) == {"instant", "files_deleted", "earliest_commit_to_retain"}
    assert main(["archive", path, "--policies", policies, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["executed"][0]) == {"archived", "archive_file", "bound", "merged"}


def test_a_loop_prints_only_rounds_that_did_something(table, capsys):
    path, policies = table
    args = ["compact", path, "--run", "--loop", "--interval", "0", "--duration", "0"]
    assert main(args) == 0
    assert capsys.readouterr().out == ""


def test_archive_lines_say_what_moved_what_merged_and_what_a_rule_kept():
    moved = ArchiveOutcome(archived=["001", "002", "003"], archive_file=".hoodie/archived/h", bound="004",
                           merged=["001_003_1.parquet"])
    assert _archive_lines(moved) == [
        "archive: moved 3 instant(s) (001 .. 003) to .hoodie/archived/h",
        "archive: merged the history's oldest files into 001_003_1.parquet",
        "archive: kept instants from 004 on (a pending table service or the commits a clean retains need them)",
    ]
    assert _archive_lines(ArchiveOutcome([], None, None, skipped="table version 5")) == [
        "archive: not archived: table version 5"]
    assert _archive_lines(ArchiveOutcome([], None, None)) == [
        "archive: nothing to archive (the active timeline is within policy)"]


class _ServedOn(BaseException):
    """Raised by the fake round after a Ctrl-C: the loop did not stop (a BaseException,
    which the loop's "one bad round" handler does not catch)."""


def test_a_ctrl_c_lost_inside_a_finalizer_still_stops_the_loop(tmp_path, monkeypatch, capsys):
    """Python drops an exception raised in a finalizer ("Exception ignored in ..."): a
    SIGINT that lands while garbage collection runs one (a storage client's
    ``weakref.finalize``) raised its KeyboardInterrupt there, and the worker served on -
    the services concurrency campaign's log compactor ignored Ctrl-C for 300 s."""
    import gc
    import signal
    import sys
    import weakref

    from streamer.cli import services_cmd

    rounds = []

    class Client:
        pass

    def ctrl_c_during_finalizer() -> None:
        signal.raise_signal(signal.SIGINT)
        for _ in range(1000):  # the handler runs here, inside the finalizer
            pass

    def fake_round(args, policies):
        rounds.append(1)
        if len(rounds) == 1:
            client = Client()
            weakref.finalize(client, ctrl_c_during_finalizer)
            del client
            gc.collect()
        elif len(rounds) > 3:
            raise _ServedOn("the loop served on after Ctrl-C")
        return services_cmd.Round("log-compact")

    lost: list[type] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: lost.append(u.exc_type))
    monkeypatch.setattr(services_cmd, "one_round", fake_round)
    assert main(["log-compact", str(tmp_path / "t"), "--loop", "--interval", "0.01"]) == 0
    assert lost == [KeyboardInterrupt]  # the Ctrl-C's exception was dropped in the finalizer
    assert len(rounds) == 1 and capsys.readouterr().err == "stopped\n"

"""Issue 39 item 4: inputs of any shape answer with flat memory. A line longer than LINE_MAX is cut
where it is read, and the output says how much; a bundle of any shape is read or refused. The real
shapes: zeros with no newline on stdin, a GB line inside a log, a gzip bomb whose journal.export is
a GiB of zeros, a million tiny members (docs/replay.md, "Lines longer than 64 KiB")."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from svcdiag.ops.offline.replay import replay
from svcdiag.systemd.journal_formats import LINE_MAX, ExportReader, LineBound

EXAMPLES = Path(__file__).resolve().parent.parent / "svcdiag" / "examples"
#: a replay holds a chunk or two of input, never the line: far below the input's hundreds of MB
RSS_LIMIT_MB = 200

#: runs `svcdiag replay ARGS` with stdin from the shell pipeline in argv[1] and prints its output, exit
#: code and peak RSS (this wrapper's children only: the pipeline and svcdiag, nothing of pytest's)
_MEASURE = textwrap.dedent("""
    import json, resource, subprocess, sys
    feed = subprocess.Popen(sys.argv[1], shell=True, stdout=subprocess.PIPE)
    p = subprocess.run([sys.executable, "-m", "svcdiag", "replay", *sys.argv[2:]], stdin=feed.stdout,
                       capture_output=True, text=True)
    feed.stdout.close()
    feed.wait()
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({"rc": p.returncode, "out": p.stdout + p.stderr, "rss_mb": rss}))
""")


def _replay_measured(feed: str, *args: str) -> dict:
    p = subprocess.run([sys.executable, "-c", _MEASURE, feed, *args], capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def test_stdin_of_zeros_with_no_newline_answers_with_flat_memory() -> None:
    r = _replay_measured("head -c 400000000 /dev/zero", "-")
    assert r["rc"] == 4 and r["out"].count("\n") == 1, r  # one line: no start, and what was cut
    assert "no SGLang start found in <stdin>" in r["out"]
    assert f"1 line longer than {LINE_MAX:,} bytes cut to that length ({400_000_000 - LINE_MAX:,} bytes skipped)" \
        in r["out"], r
    assert r["rss_mb"] < RSS_LIMIT_MB, r


def test_a_300_mb_line_inside_a_log_is_cut_and_the_start_still_judged() -> None:
    log = EXAMPLES / "dflash-smoke.log"
    feed = f"(head -n 5 {log}; head -c 300000000 /dev/zero | tr '\\0' x; echo; tail -n +6 {log})"
    r = _replay_measured(feed, "-")
    plain = _replay_measured(f"cat {log}", "-")
    assert r["rc"] == plain["rc"] == 0, r
    assert "1 line longer than 65,536 bytes cut to that length (299,934,464 bytes skipped)" in r["out"], r
    # the verdict and every event are the log's own: only the note differs
    assert r["out"].splitlines()[1:] == plain["out"].splitlines()[1:]
    assert r["rss_mb"] < RSS_LIMIT_MB, r


def _gzip_bomb_tar(path: Path, name: str, size: int, kind: bytes = tarfile.REGTYPE) -> Path:
    """A .tar.gz whose member `name` (of type `kind`) holds `size` zero bytes, made in well under a second:
    concatenated gzip members are one stream to gzip's reader, so one compressed MiB of zeros is repeated."""
    mib = gzip.compress(bytes(1 << 20), compresslevel=9)
    header = tarfile.TarInfo(name)
    header.size, header.type = size, kind
    with path.open("wb") as f:
        f.write(gzip.compress(header.tobuf(format=tarfile.USTAR_FORMAT)))
        for _ in range(size >> 20):
            f.write(mib)
        f.write(gzip.compress(bytes(size & ((1 << 20) - 1)) + bytes(-size % 512) + bytes(1024)))
    return path


def test_a_bundle_whose_journal_is_a_gib_of_zeros_answers_with_flat_memory(tmp_path) -> None:
    bomb = _gzip_bomb_tar(tmp_path / "bomb.tar.gz", "b/journal.export", 1 << 30)
    assert bomb.stat().st_size < 2_000_000  # a GiB of zeros, packed small
    r = _replay_measured("true", str(bomb))
    assert r["rc"] == 4 and r["out"].count("\n") == 1, r
    assert "no SGLang start found" in r["out"] and f"({(1 << 30) - LINE_MAX:,} bytes skipped)" in r["out"], r
    assert r["rss_mb"] < RSS_LIMIT_MB, r


def test_a_bundle_of_a_million_tiny_members_is_refused_in_one_line(tmp_path, cli) -> None:
    path = tmp_path / "many.tar.gz"
    empty = tarfile.TarInfo("b/x")
    one = empty.tobuf(format=tarfile.GNU_FORMAT)  # a header, no data: 512 bytes a member
    with path.open("wb") as f:
        f.write(gzip.compress(one * 1_000_000 + bytes(1024), compresslevel=1))
    r = cli("replay", str(path))
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert "refused: more than 256 members before its journal.export" in r.output


def _tar_gz(path: Path, members: list[tuple[str, bytes]], *, empties: int = 0) -> Path:
    """A .tar.gz of `empties` empty members (512 bytes of header each, no data), then `members`."""
    out = [tarfile.TarInfo("b/x").tobuf(format=tarfile.GNU_FORMAT) * empties]
    for name, data in members:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        out += [info.tobuf(format=tarfile.GNU_FORMAT), data, bytes(-len(data) % 512)]
    path.write_bytes(gzip.compress(b"".join(out) + bytes(1024), compresslevel=1))
    return path


def test_a_journal_after_a_million_tiny_members_is_refused_not_searched_for(tmp_path, cli) -> None:
    path = _tar_gz(tmp_path / "many.tar.gz", [("b/journal.export", _export_entry(b"[2026-01-01 00:00:00] hi"))],
                   empties=1_000_000)
    r = cli("replay", str(path))
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert "refused: more than 256 members before its journal.export" in r.output


#: journals no start writes, each far more lines that are not routine than a bundle may need read one by one:
#: tiny messages (each an entry to judge alone), `KEY=value` lines of no end, names of binary fields with no size,
#: blank lines, short lines (read as a plain log)
_TINY = {
    "messages": b"MESSAGE=x\n\n",
    "one endless entry": b"A=b\n",
    "fields with no size": b"MESSAGE\n\xff\xff\xff\xff\xff\xff\xff\x7f",
    "blank lines": b"\n",
    "short lines": b"a\n",
}


@pytest.mark.parametrize("shape", list(_TINY))
def test_a_bundle_of_tiny_lines_is_refused_in_one_line(tmp_path, cli, monkeypatch, shape) -> None:
    """The bound is BUNDLE_WALK_MAX lines read one by one (200,000: ~3 s here); at 2,000 the test is quick."""
    from svcdiag.ops.offline import bundle_read

    monkeypatch.setattr(bundle_read, "BUNDLE_WALK_MAX", 2_000)
    path = _tar_gz(tmp_path / "tiny.tar.gz", [("b/journal.export", _TINY[shape] * 5_000)])
    r = cli("replay", str(path))
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert (f"{path}: refused: more than 2,000 of its journal's lines would be read one by one" in r.output
            and "replay its journal.export" in r.output), r.output
    # the same journal unpacked is the operator's own file: judged whole, no bound
    journal = tmp_path / "journal.export"
    journal.write_bytes(_TINY[shape] * 5_000)
    assert "refused" not in cli("replay", str(journal)).output


def test_a_bundle_within_the_bound_is_judged(tmp_path, cli, monkeypatch) -> None:
    """Routine lines (decode batches, access lines) go in bulk and do not count: a long healthy start is judged."""
    from svcdiag.ops.offline import bundle_read

    monkeypatch.setattr(bundle_read, "BUNDLE_WALK_MAX", 2_000)
    start = (EXAMPLES / "dflash-smoke.log").read_text().splitlines()
    serving = [f"[2026-05-23 09:50:{i // 100 % 60:02d} TP0] Decode batch. #running-req: 1, #token: {i}, " for i in range(20_000)]
    journal = b"".join(_export_entry(line.encode()) for line in start + serving)
    r = cli("replay", str(_tar_gz(tmp_path / "ok.tar.gz", [("b/journal.export", journal)])))
    assert r.exit_code == 0 and "HEALTHY" in r.output and "refused" not in r.output, r.output


def _export_entry(message: bytes, inv: str = "a" * 32) -> bytes:
    return (b"__REALTIME_TIMESTAMP=1700000000000000\n_SYSTEMD_UNIT=s.service\n_SYSTEMD_INVOCATION_ID="
            + inv.encode() + b"\nMESSAGE=" + message + b"\n\n")


@pytest.mark.parametrize("fast", [True, False])
def test_an_export_field_over_the_limit_is_cut_text_or_binary(fast) -> None:
    ready = b"[2026-01-01 00:00:00] The server is fired up and ready to roll!"
    binary = b"MESSAGE\n" + (3 * LINE_MAX).to_bytes(8, "little") + b"\0" * (3 * LINE_MAX) + b"\n\n"
    data = (_export_entry(b"x" * (5 * LINE_MAX)) + binary.replace(b"MESSAGE\n", b"_SYSTEMD_UNIT=s.service\nMESSAGE\n")
            + _export_entry(ready))
    result = replay(io.BytesIO(data), "j.export", fast=fast)
    # the text line is `MESSAGE=` and 5 * LINE_MAX bytes, the binary field's value 3 * LINE_MAX: each keeps LINE_MAX
    assert (result.cut.lines, result.cut.skipped) == (2, (4 * LINE_MAX + 8) + 2 * LINE_MAX)
    assert "2 lines longer than 65,536 bytes cut to that length (393,224 bytes skipped)" in result.describe()
    assert result.verdict.verdict == "healthy"


def test_export_reader_of_a_gib_with_no_newline_holds_one_line() -> None:
    class Zeros(io.RawIOBase):
        def __init__(self, n: int):
            self.n = n

        def readable(self) -> bool:
            return True

        def readinto(self, b) -> int:  # type: ignore[override]
            k = min(len(b), self.n)
            b[:k] = bytes(k)
            self.n -= k
            return k

    reader = ExportReader(b"MESSAGE=", io.BufferedReader(Zeros(1 << 28), 1 << 20))
    assert reader.entry() is None  # an unended line is no entry, as before
    assert reader.cut.lines == 1 and len(reader.buf) <= 2 * LINE_MAX + (1 << 20)


def test_line_bound_cuts_every_long_line_and_keeps_the_rest_byte_for_byte() -> None:
    lines = [b"a" * 10, b"b" * 100, b"c" * 99, b"", b"d" * 250, b"e" * 100]
    data = b"\n".join(lines) + b"\n"
    for chunk in (1, 7, 64, 1 << 20):
        src = io.BytesIO(data)
        bound = LineBound(src, src.read(5), limit=100)
        out = b""
        while part := bound.read(chunk):
            out += part
        assert out.split(b"\n")[:-1] == [ln[:100] for ln in lines], chunk
        assert (bound.cut.lines, bound.cut.skipped) == (1, 150), chunk


@pytest.mark.parametrize("kind", [tarfile.XHDTYPE, tarfile.GNUTYPE_LONGNAME])
def test_a_bundle_whose_extended_header_is_a_bomb_is_refused_before_it_is_read(tmp_path, cli, kind) -> None:
    # tarfile reads a pax header or a GNU long name whole, before the member: a 512 MiB one took 544 MB and 30 s
    path = _gzip_bomb_tar(tmp_path / "hdr.tar.gz", "b/././@PaxHeader", 64 << 20, kind)
    r = cli("replay", str(path))
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert "refused: a member's extended header would unpack to 67,108,864 bytes, more than 1,048,576" in r.output

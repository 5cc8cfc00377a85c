"""A bundle read back (`svcdiag replay FILE.tar.gz`): its journal slice, bounded, as a stream.

Apart from `bundle` (which writes one, and judges it through `replay`) so that data flows one way:
bundle → replay → bundle_read; replay never imports the writer.
"""

from __future__ import annotations

import tarfile
import zlib
from typing import BinaryIO

from svcdiag.errors import SvcdiagError

JOURNAL = "journal.export"  # the member holding the start's journal slice, in export format


#: the most a bundle may hold, uncompressed, before its journal slice (what a bundle writes is a few
#: small files and the slice), and the slice itself: a start's journal, even a chatty one, is far less.
#: Beyond either, the archive is refused in one line, read no further (a decompression bomb: 1.4 MB of
#: .tar.gz that unpacks to gigabytes).
BUNDLE_BEFORE_MAX = 64 * 1024 * 1024
BUNDLE_JOURNAL_MAX = 2 * 1024 * 1024 * 1024
BUNDLE_MEMBERS_MAX = 256
#: the most lines or entries of a bundle's journal replay may read one by one (the routine ones, decode batches and
#: access lines, go in bulk and do not count): ~16 µs each here, so a bundle of a million tiny messages (a few MB
#: packed) answers within seconds, refused, instead of minutes
BUNDLE_WALK_MAX = 200_000
#: the most a member's extended header may hold (pax, GNU long name: a path, a few fields), which tarfile
#: reads whole into memory before the member (a 1.4 MB .tar.gz whose pax header unpacks to 512 MiB: 544 MB, 30 s)
BUNDLE_HEADER_MAX = 1024 * 1024
_WHOLE_HEADERS = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME,
                  tarfile.GNUTYPE_LONGLINK)


class _BoundedInfo(tarfile.TarInfo):
    """A member header whose extended header tarfile would read whole is refused past BUNDLE_HEADER_MAX."""

    def _proc_member(self, tarfile: tarfile.TarFile) -> tarfile.TarInfo:  # type: ignore[override]
        if self.type in _WHOLE_HEADERS and self.size > BUNDLE_HEADER_MAX:
            raise SvcdiagError(f"{tarfile.name}: refused: a member's extended header would unpack to {self.size:,} "
                               f"bytes, more than {BUNDLE_HEADER_MAX:,}; not a bundle svcdiag wrote")
        return super()._proc_member(tarfile)  # type: ignore[misc]


def open_bundle(path: str) -> BinaryIO | None:
    """The journal slice of a bundle (for `svcdiag replay FILE.tar.gz`), as a stream read as replay reads
    it (memory stays bounded), or None when `path` is not one. Members are walked in order, never all
    listed first, and sizes beyond BUNDLE_*_MAX are refused before anything is decompressed for them."""
    try:
        try:
            # gzip, as `bundle` writes it: bz2 and xz unpack a bomb many times slower
            tar = tarfile.open(path, "r:gz", tarinfo=_BoundedInfo)  # noqa: SIM115 -- open while the slice is read
        except tarfile.ReadError:
            return None  # not a gzipped tar archive (tarfile.is_tarfile, without reading a first header whole)
        before = 0
        for n, m in enumerate(tar):
            if n >= BUNDLE_MEMBERS_MAX:
                raise SvcdiagError(f"{path}: refused: more than {BUNDLE_MEMBERS_MAX} members before its {JOURNAL} "
                                   "(a bundle holds a few files); not a bundle svcdiag wrote")
            if m.isfile() and m.name.rsplit("/", 1)[-1] == JOURNAL:
                if m.size > BUNDLE_JOURNAL_MAX:
                    raise SvcdiagError(f"{path}: refused: its {JOURNAL} would unpack to {m.size:,} bytes, more than "
                                       f"a start's journal ({BUNDLE_JOURNAL_MAX:,}); not a bundle svcdiag wrote")
                f = tar.extractfile(m)
                assert f is not None
                return f
            before += m.size
            if before > BUNDLE_BEFORE_MAX:
                raise SvcdiagError(f"{path}: refused: more than {BUNDLE_BEFORE_MAX:,} bytes unpacked before its "
                                   f"{JOURNAL}; not a bundle svcdiag wrote")
        raise SvcdiagError(f"{path}: a tar archive without {JOURNAL}: not a svcdiag bundle")
    except (OSError, tarfile.TarError, EOFError, zlib.error) as e:
        raise SvcdiagError(f"{path}: cannot read the bundle: {e}") from None

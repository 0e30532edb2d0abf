"""How every input text file is read (:func:`longdoc.data.errors.text_lines`): plain or compressed as
distributed, each error naming the file and line."""

import bz2
import gzip
import lzma
import tarfile
import zipfile

import pytest

from longdoc.data.errors import DataFormatError, text_lines

TEXT = "\ufeffD1\tfirst\r\nD2\tsecond\n" + "".join(f"D{i}\tline {i}\n" for i in range(3, 20_000))


@pytest.mark.parametrize(
    "name,pack",
    [("docs.tsv", bytes), ("docs.tsv.gz", gzip.compress), ("docs.bz2", bz2.compress), ("docs.xz", lzma.compress)],
)
def test_plain_and_compressed_files_read_the_same_lines(tmp_path, name, pack):
    path = tmp_path / name
    path.write_bytes(pack(TEXT.encode()))
    lines = list(text_lines(path))
    assert lines[:2] == [(1, "D1\tfirst"), (2, "D2\tsecond")] and lines[-1] == (19_999, "D19999\tline 19999")


def test_compression_is_known_by_its_bytes_not_its_name(tmp_path):
    path = tmp_path / "msmarco-docs.tsv"  # gunzip -k's name kept, gzip's bytes inside
    path.write_bytes(gzip.compress(b"D1\tu\tt\tb\n"))
    assert list(text_lines(path)) == [(1, "D1\tu\tt\tb")]


def test_a_cut_off_stream_names_the_line_it_reached(tmp_path):
    path = tmp_path / "docs.tsv.gz"
    packed = gzip.compress(TEXT.encode())
    path.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(
        DataFormatError, match=r"docs.tsv.gz, line (\d+): the gzip stream is damaged or cut off after line"
    ) as caught:
        list(text_lines(path))
    assert 1_000 < caught.value.line < 19_999


def test_non_utf8_inside_a_compressed_file_names_its_line(tmp_path):
    path = tmp_path / "docs.tsv.gz"
    path.write_bytes(gzip.compress("ok\ncaf\xe9\n".encode("latin-1")))
    with pytest.raises(DataFormatError, match=r"line 2: byte 0xe9 at column 4 is not UTF-8"):
        list(text_lines(path))


def test_an_archive_of_files_says_to_unpack_it(tmp_path):
    with zipfile.ZipFile(tmp_path / "docs.zip", "w") as archive:
        archive.writestr("docs.tsv", "D1\tx\n")
    (tmp_path / "docs.tsv").write_text("D1\tx\n")
    with tarfile.open(tmp_path / "docs.tar", "w") as archive:
        archive.add(tmp_path / "docs.tsv", "docs.tsv")
    for name, kind in (("docs.zip", "zip"), ("docs.tar", "tar")):
        with pytest.raises(DataFormatError, match=rf"{name}: is a {kind} archive of files, not a text file: unpack it"):
            list(text_lines(tmp_path / name))


def test_a_compressed_archive_says_to_unpack_it_and_a_text_starting_bzh_is_text(tmp_path):
    import io

    (tmp_path / "docs.tsv").write_text("D1\tx\n")
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as archive:
        archive.add(tmp_path / "docs.tsv", "docs.tsv")
    (tmp_path / "docs.tar.gz").write_bytes(packed.getvalue())
    with pytest.raises(DataFormatError, match=r"docs.tar.gz: is a tar archive of files, not a text file"):
        list(text_lines(tmp_path / "docs.tar.gz"))
    (tmp_path / "ids.tsv").write_text("BZh1\tan id that happens to start with bzip2's header\n")
    assert list(text_lines(tmp_path / "ids.tsv")) == [(1, "BZh1\tan id that happens to start with bzip2's header")]

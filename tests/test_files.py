"""``tfcourse.files.replaced_atomically``: the one way the package replaces a file."""

import os

import pytest

from tfcourse.files import replaced_atomically


def test_the_new_file_replaces_the_old_one_only_when_the_block_ends(tmp_path):
    path = tmp_path / "report.txt"
    path.write_text("old")
    with replaced_atomically(path) as temporary:
        temporary.write_text("new")
        assert path.read_text() == "old" and temporary.parent == tmp_path
    assert path.read_text() == "new" and os.listdir(tmp_path) == ["report.txt"]


def test_a_failure_inside_the_block_keeps_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "report.txt"
    path.write_text("old")
    with pytest.raises(KeyboardInterrupt), replaced_atomically(path) as temporary:
        temporary.write_text("half")
        raise KeyboardInterrupt
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["report.txt"]


def test_the_permissions_are_what_open_would_give_unless_asked(tmp_path):
    mask = os.umask(0o027)
    try:
        with replaced_atomically(tmp_path / "a") as temporary:
            temporary.write_text("")
        with replaced_atomically(tmp_path / "b", mode=0o644) as temporary:
            temporary.write_text("")
    finally:
        os.umask(mask)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "b").stat().st_mode & 0o777 == 0o644

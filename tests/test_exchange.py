"""Two paths swapped in one step where the kernel can, and a plain no where it cannot."""

import pytest

from tf_placeto import exchange


def _folder(path, text):
    path.mkdir()
    (path / "which").write_text(text)
    return str(path)


def test_two_folders_are_swapped_whole_or_left_as_they_were(tmp_path):
    a, b = _folder(tmp_path / "a", "a"), _folder(tmp_path / "b", "b")
    swapped = exchange.exchange_paths(a, b)
    assert [(tmp_path / name / "which").read_text() for name in "ab"] == \
        (["b", "a"] if swapped else ["a", "b"])              # no: the caller renames twice


def test_a_missing_path_is_an_error_not_a_no(tmp_path):
    if exchange._renameat2() is None:
        pytest.skip("no renameat2 in this C library")
    with pytest.raises(FileNotFoundError):
        exchange.exchange_paths(str(tmp_path / "missing"), _folder(tmp_path / "b", "b"))

"""Where the cache lives (XDG's convention, TF_PLACETO_CACHE first) and whole-file writes."""

import os

import pytest

from tf_placeto.cache import cache_dir
from tf_placeto.files import write_atomically


def test_the_cache_follows_xdg_cache_home_unless_tf_placeto_cache_is_set(tmp_path, monkeypatch):
    monkeypatch.delenv("TF_PLACETO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir("profiles") == str(tmp_path / "xdg" / "tf_placeto" / "profiles")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")      # the spec: a relative path is ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == str(tmp_path / "home" / ".cache" / "tf_placeto")
    monkeypatch.setenv("TF_PLACETO_CACHE", str(tmp_path / "mine"))
    assert cache_dir("profiles") == str(tmp_path / "mine" / "profiles")


def test_a_file_is_written_whole_or_not_at_all(tmp_path):
    path = tmp_path / "table.csv"
    write_atomically(str(path), lambda file: file.write("old"))

    def killed(file):
        file.write("half of the new")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomically(str(path), killed)
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["table.csv"]           # no temporary left behind

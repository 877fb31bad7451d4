"""Where the cache lives (XDG's convention, TF_PLACETO_CACHE first) and built models."""

import logging
import os

from tf_placeto.cache import build_once, cache_dir


def test_the_cache_follows_xdg_cache_home_unless_tf_placeto_cache_is_set(tmp_path, monkeypatch):
    monkeypatch.delenv("TF_PLACETO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir("profiles") == str(tmp_path / "xdg" / "tf_placeto" / "profiles")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")      # the spec: a relative path is ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == str(tmp_path / "home" / ".cache" / "tf_placeto")
    monkeypatch.setenv("TF_PLACETO_CACHE", str(tmp_path / "mine"))
    assert cache_dir("profiles") == str(tmp_path / "mine" / "profiles")


_BUILDER = """
import os, sys
target = sys.argv[-1]
os.makedirs(target)
with open(os.path.join(target, "saved_model.pb"), "w") as graph:
    graph.write("a graph")
with open(os.path.join(os.path.dirname(__file__), "builds"), "a") as builds:
    builds.write("built\\n")
"""


def test_a_damaged_build_is_named_and_built_again(tmp_path, caplog):
    (tmp_path / "tiny_builder.py").write_text(_BUILDER)
    built = str(tmp_path / "cache" / "examples" / "tiny")

    def build():
        return build_once(built, "tiny_builder", [], "examples:tiny", cwd=str(tmp_path))

    assert build() == built and build() == built           # the second finds it
    assert (tmp_path / "builds").read_text() == "built\n"
    with open(os.path.join(built, "saved_model.pb"), "r+") as graph:
        graph.truncate(3)                                   # cut short on disk
    with caplog.at_level(logging.WARNING, logger="tf_placeto"):
        build()
    assert "examples:tiny" in caplog.text and "building it again" in caplog.text
    assert (tmp_path / "builds").read_text() == "built\n" * 2
    assert open(os.path.join(built, "saved_model.pb")).read() == "a graph"
    assert sorted(os.listdir(tmp_path / "cache" / "examples")) == ["tiny", "tiny.lock"]

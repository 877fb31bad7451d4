"""Writing files without losing any: whole files, locks, staged swaps, sweeps.

Faults are real where they can be: a process killed (SIGKILL) between the two renames of a
swap, a lock held by another process.
"""

import logging
import os
import pathlib
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from tests.helpers import REPO, tree_digest
from tf_placeto import files
from tf_placeto.cache import cache_dir
from tf_placeto.errors import InputError


def test_a_file_is_written_whole_or_not_at_all(tmp_path):
    path = tmp_path / "table.csv"
    files.write_atomically(str(path), lambda file: file.write("old"))

    def killed(file):
        file.write("half of the new")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        files.write_atomically(str(path), killed)
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["table.csv"]           # no temporary left behind


def test_a_private_file_and_its_folders_are_the_users_alone(tmp_path, monkeypatch):
    private = tmp_path / "a" / "b" / "log.json"
    files.write_atomically(str(private), lambda file: file.write("{}"), private=True)
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o700
    root = tmp_path / "cache"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)                                  # as an older version left it
    monkeypatch.setenv("TF_PLACETO_CACHE", str(root))
    cache_dir("profiles")
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700


def _hold_lock_in_another_process(path, seconds):
    code = textwrap.dedent(f"""
        import sys, time
        from tf_placeto.files import FileLock
        with FileLock({path!r}):
            print("held", flush=True)
            time.sleep({seconds})
    """)
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              cwd=REPO, env={**os.environ, "PYTHONPATH": REPO})
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_lock_held_by_another_process_is_waited_for_and_said(tmp_path, caplog):
    path = str(tmp_path / ".lock")
    holder = _hold_lock_in_another_process(path, 1.0)
    lock = files.FileLock(path, "the profile of this graph")
    try:
        assert not lock.acquire(wait=False)
        start = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="tf_placeto"), lock:
            waited = time.monotonic() - start
            with lock:                                     # re-entrant in this process
                pass
    finally:
        holder.wait(timeout=30)
    assert waited > 0.3
    assert f"waiting for the profile of this graph: another tf-placeto process (pid " \
           f"{holder.pid})" in caplog.text


def _folder(path, **contents):
    path.mkdir()
    for name, text in contents.items():
        (path / name).write_text(text)
    return str(path)


def test_a_staged_folder_replaces_the_old_one_and_a_failure_leaves_the_old_whole(tmp_path):
    out = _folder(tmp_path / "out", **{"saved_model.pb": "old"})
    before = tree_digest(out)
    with pytest.raises(RuntimeError):
        with files.Staging(out) as staging:
            os.mkdir(staging.path("model"))
            raise RuntimeError("the write failed half-way")
    assert tree_digest(out) == before
    with files.Staging(out) as staging:
        _folder(pathlib.Path(staging.path("model")), **{"saved_model.pb": "new"})
        staging.replace("model")
    assert (tmp_path / "out" / "saved_model.pb").read_text() == "new"
    assert os.listdir(tmp_path) == ["out"]                 # no staging folder left


# A process that swaps a staged folder in for OUT and is killed (SIGKILL) right after the
# first rename of the two (kernels that cannot exchange), or right after the exchange.
_KILLED_SWAP = """
import os, signal, sys
from tf_placeto import exchange, files
out, exchanges = sys.argv[1], sys.argv[2] == "exchange"
rename, exchanged = os.rename, files.exchange_paths
def killed_after(function):
    def call(*args):
        done = function(*args)
        os.kill(os.getpid(), signal.SIGKILL)
        return done
    return call
if exchanges:
    files.exchange_paths = killed_after(exchanged)
else:
    exchange._renameat2.cache = [None]
    os.rename = killed_after(rename)
with files.Staging(out) as staging:
    os.mkdir(staging.path("model"))
    with open(staging.path("model") + "/saved_model.pb", "w") as f:
        f.write("new")
    staging.replace("model")
"""


@pytest.mark.parametrize("how", ["two renames", "exchange"])
def test_a_kill_during_the_swap_never_loses_the_old_out(tmp_path, how):
    out = _folder(tmp_path / "out", **{"saved_model.pb": "old", "notes": "the user's"})
    before = tree_digest(out)
    killed = subprocess.run([sys.executable, "-c", _KILLED_SWAP, out,
                             "exchange" if how == "exchange" else "renames"], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": REPO}, capture_output=True)
    assert killed.returncode == -9, killed.stderr
    staged = [n for n in os.listdir(tmp_path) if n.startswith(files.STAGING_PREFIX)]
    assert len(staged) == 1                                # left by the killed process
    if how == "two renames":
        assert not os.path.exists(out)                     # killed between the renames
        assert files.sweep_staging(str(tmp_path)) == [out]
        assert tree_digest(out) == before                  # the old OUT, whole
    else:
        assert (tmp_path / "out" / "saved_model.pb").read_text() == "new"
        assert files.sweep_staging(str(tmp_path)) == []
    assert os.listdir(tmp_path) == ["out"]


def test_a_sweep_leaves_a_live_process_staging_and_the_users_folders_alone(tmp_path):
    user = _folder(tmp_path / ".tf-placeto-notes", **{"mine.txt": "keep"})
    legacy = _folder(tmp_path / ".tf-placeto-ab12cd_9", **{"model": "a copy of the weights"})
    old = time.time() - 2 * 3600
    for path in (user, legacy):
        os.utime(path, (old, old))
    with files.Staging(str(tmp_path / "out")) as live:
        assert files.sweep_staging(str(tmp_path)) == []
        assert os.path.isdir(live.folder)                  # its process lives: this one
    assert sorted(os.listdir(tmp_path)) == [".tf-placeto-notes"]   # the legacy one swept


def test_output_paths_are_checked_before_any_work(tmp_path):
    source = _folder(tmp_path / "model", **{"saved_model.pb": "x"})
    with pytest.raises(InputError, match="inside .*which this command reads"):
        files.check_output_file(os.path.join(source, "table.csv"), "--csv", [source])
    with pytest.raises(InputError, match="does not exist"):
        files.check_output_file(str(tmp_path / "missing" / "t.csv"), "--csv")
    with pytest.raises(InputError, match="is a folder"):
        files.check_output_file(source, "--csv")
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(InputError, match="is not a folder"):
        files.check_output_folder(str(tmp_path / "a_file"), "--trace")
    files.check_output_folder(str(tmp_path / "new_traces"), "--trace", [source])
    assert not os.path.exists(tmp_path / "new_traces")     # checked, not made

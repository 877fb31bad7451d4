"""Helpers shared by the tests: fresh interpreters, the CLI, hashes, simple placements."""

import hashlib
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tree_digest(path: str) -> str:
    """A hash of every file under `path` (or of the file): proves a source was not modified."""
    digest = hashlib.sha256()
    paths = [path] if os.path.isfile(path) else sorted(
        os.path.join(root, name) for root, _, names in os.walk(path) for name in names)
    for file in paths:
        digest.update(os.path.relpath(file, path).encode())
        with open(file, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def run_python(code: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (own TensorFlow runtime), repo on the path, with
    the Keras TensorFlow picks by default (the test process itself runs legacy Keras)."""
    env = {**os.environ, "PYTHONPATH": REPO}
    env.pop("TF_USE_LEGACY_KERAS", None)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=timeout, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def run_cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run the tf-placeto command as a user would."""
    env = {**os.environ, "PYTHONPATH": REPO}
    return subprocess.run([sys.executable, "-m", "tf_placeto.cli", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=REPO)


def round_robin(groups, devices=("/device:CPU:0", "/device:CPU:1")) -> dict:
    return groups.placement_for([devices[g % len(devices)] for g in range(len(groups))])

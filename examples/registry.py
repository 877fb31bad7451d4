"""`examples:NAME`: bundled graphs, built once per TensorFlow version and cached as SavedModels.

A SavedModel is what every command reads and writes, so an example's op names are the same in
`inspect`, `apply` and later runs. Building happens in a child process: it starts a Keras
session and the TensorFlow runtime, which the caller may still want to configure (logical
devices must be set before the runtime starts).

Cache: $TF_PLACETO_CACHE, else ~/.cache/tf_placeto.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile

from tf_placeto.cache import cache_dir
from tf_placeto.errors import SourceError

SIGNATURE = "train_step"


@dataclasses.dataclass(frozen=True)
class Example:
    name: str
    builder: str          # function name in examples.models
    description: str
    version: int = 1      # bump when the builder changes: the cache key includes it


EXAMPLES = {e.name: e for e in [
    Example("inception_v3", "inception_v3",
            "Inception-V3 training step, batch 8, 299x299 images, 1000 classes (~4,800 ops)"),
    Example("small_cnn", "small_cnn",
            "two-branch CNN training step, batch 4, 32x32 images (~200 ops)"),
    Example("mlp", "mlp", "two-layer MLP training step, batch 16 (~100 ops)"),
]}


def names() -> list:
    return sorted(EXAMPLES)


def get(name: str) -> Example:
    if name not in EXAMPLES:
        raise SourceError(f"examples:{name}: no such example (examples: {', '.join(names())})")
    return EXAMPLES[name]


def saved_model_path(name: str) -> str:
    """The example's SavedModel, built now if this TensorFlow version has none cached."""
    import tensorflow as tf

    example = get(name)
    path = cache_dir("examples", f"{example.name}-v{example.version}-tf{tf.__version__}")
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if sys.stderr.isatty():
        print(f"tf-placeto: building examples:{name} once (cached in {path})", file=sys.stderr)
    staging = tempfile.mkdtemp(prefix=f".{name}-", dir=os.path.dirname(path))
    target = os.path.join(staging, "model")
    result = subprocess.run([sys.executable, "-m", "examples.registry", name, target],
                            capture_output=True, text=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise SourceError(f"examples:{name}: building it failed: {last}")
    try:
        os.replace(target, path)
    except OSError:
        if not os.path.isfile(os.path.join(path, "saved_model.pb")):  # not a concurrent build
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path


def build_saved_model(name: str, out: str) -> None:
    """Build the example's training step and save it with a `train_step` signature."""
    import tensorflow as tf

    from examples import models

    module = getattr(models, get(name).builder)()
    tf.saved_model.save(module, out,
                        signatures={SIGNATURE: module.train_step.get_concrete_function()})


if __name__ == "__main__":
    build_saved_model(sys.argv[1], sys.argv[2])

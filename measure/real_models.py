"""Real SavedModels the placers were not tuned on, built once and cached (a script, not a test).

    python -m measure.real_models --list          # build what is missing, print names and paths

The models are tf_placeto.examples.held_out's; `inception_v3` is the bundled example, whose
source string the command line takes as it is. The audit set's models
(tf_placeto.examples.audit: families nothing is trained on or chosen by) are named as they
are, and built as measure/build_corpus.py builds them, into its cache.

Cache: cache_dir("real_models"), one folder per model, builder version and TensorFlow version.
A model is built in a child process, as tf_placeto.examples.registry does: the caller keeps a
TensorFlow-free process, and a failed build leaves nothing in the cache.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os

from tf_placeto.cache import build_once, cache_dir
from tf_placeto.examples import audit
from tf_placeto.examples.held_out import MODELS, save


def model_names(text: str) -> list:
    """The models a comma-separated list names, of the real set or the audit set; ValueError
    naming any unknown one."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    known = [*MODELS, *audit.MODELS]
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"unknown models {', '.join(unknown)} (known: {', '.join(known)})")
    return names


def build(name: str) -> str:
    """The model's source (a SavedModel path, or the bundled example's `examples:` string),
    built now in a child process when this version has none cached."""
    if name in audit.MODELS:
        from measure import build_corpus

        return build_corpus.build(name)
    model = MODELS[name]
    if model.builder is None:
        return f"examples:{name}"
    path = cache_dir("real_models", f"{name}-v{model.version}"
                                    f"-tf{importlib.metadata.version('tensorflow')}")
    return build_once(path, "measure.real_models", ["--save", name], name,
                      cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def known_sources() -> list:
    """Every name `source` takes: the real models, then the bundled examples not among them."""
    from tf_placeto.examples import registry

    return [*MODELS, *(name for name in registry.names() if name not in MODELS)]


def source(name: str) -> str:
    """The source of a real model (built, as `build` does) or of a bundled example: how the
    benchmarks that also take the bundled graphs (NMT) name what they load."""
    return build(name) if name in MODELS else f"examples:{name}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true",
                        help="build every model not cached yet, print names and paths")
    parser.add_argument("--save", nargs=2, metavar=("NAME", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.save:
        from tf_placeto import _quiet

        _quiet.set_tensorflow_environment()
        save(*args.save)
    elif args.list:
        for name, model in MODELS.items():
            print(f"{name:14} {build(name)}  ({model.description})", flush=True)
    else:
        parser.print_help()


if __name__ == "__main__":
    main()

"""`examples:NAME`: bundled graphs, built once per TensorFlow version and cached as SavedModels.

A SavedModel is what every command reads and writes, so an example's op names are the same in
`inspect`, `apply` and later runs. Building happens in a child process: it starts a Keras
session and the TensorFlow runtime, which the caller may still want to configure (logical
devices must be set before the runtime starts).

Graph families (tf_placeto/examples/families.py): `examples:F-K` is member K of family F,
drawn with seed K; `names()` lists the single graphs, `families()` the members.

Cache: tf_placeto.cache.cache_dir("examples").
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from typing import Optional, Sequence

from tf_placeto.cache import build_once, cache_dir
from tf_placeto.errors import InputError, SourceError
from tf_placeto.examples import families as _families

SIGNATURE = "train_step"


@dataclasses.dataclass(frozen=True)
class Example:
    name: str
    builder: str          # "module.function" under tf_placeto/examples/, called with `args`
    description: str
    version: int = 1      # bump when the builder changes: the cache key includes it
    args: tuple = ()
    # The papers' human-expert placement: (regex searched in op names, layer index) rules,
    # the first match wins. Empty: the expert puts the whole graph on one device.
    expert_layers: tuple = ()
    large: bool = False   # slow to build and to run: only built when asked for by name


def seq2seq_expert_layers(layers: int) -> tuple:
    """Expert rules for models.seq2seq's layer names: embeddings with layer 0, encoder and
    decoder layer k together on layer k, attention and softmax (with its loss) on the last."""
    return ((r"(^|/)((en|de)coder_)?embedding(/|$)", 0),
            *((rf"(^|/)(en|de)coder_(lstm|gru)_{k}(/|$)", k) for k in range(layers)),
            (r"(^|/)(attention\w*|softmax|SparseSoftmaxCrossEntropyWithLogits)(/|$)",
             layers - 1))


EXAMPLES = {e.name: e for e in [
    Example("inception_v3", "models.inception_v3",
            "Inception-V3 training step, batch 8, 299x299 images, 1000 classes (~4,800 ops)"),
    Example("nasnet", "models.nasnet",
            "NASNet-Mobile training step, batch 8, 224x224 images, 1000 classes (~16,000 ops)"),
    Example("nasnet_large", "models.nasnet_large",
            "NASNet-Large training step, batch 8, 331x331 images, 1000 classes (~22,000 ops; "
            "big: built only when asked for by name)", large=True),
    Example("nmt", "models.nmt",
            "GNMT-like 2-layer LSTM encoder-decoder with Luong attention, unrolled: batch 16, "
            "40 source and 40 target tokens, 8,000-word vocabularies, 256 units (~7,000 ops)",
            expert_layers=seq2seq_expert_layers(2)),
    Example("small_cnn", "models.small_cnn",
            "two-branch CNN training step, batch 4, 32x32 images (~200 ops)"),
    Example("mlp", "models.mlp", "two-layer MLP training step, batch 16 (~100 ops)"),
]}


def names(include_large: bool = False) -> list:
    """The single graphs (not family members); large ones only when asked for."""
    return sorted(name for name, e in EXAMPLES.items() if include_large or not e.large)


def families() -> dict:
    """{family: its member names}: member K of family F is `F-K`, drawn with seed K."""
    return {family: [f"{family}-{seed}" for seed in range(_families.SIZE)]
            for family in _families.FAMILIES}


def family_description(family: str) -> str:
    return _families.FAMILIES[family][1]


def get(name: str) -> Example:
    if name in EXAMPLES:
        return EXAMPLES[name]
    family, _, seed = name.rpartition("-")
    if family not in _families.FAMILIES:
        raise SourceError(f"examples:{name}: no such example (examples: "
                          f"{', '.join(names(include_large=True))}; families: "
                          f"{', '.join(f'{f}-0 .. {f}-{_families.SIZE - 1}' for f in families())})")
    if seed not in [str(k) for k in range(_families.SIZE)]:
        raise SourceError(f"examples:{name}: {family} has members {family}-0 .. "
                          f"{family}-{_families.SIZE - 1}")
    return _member(family, int(seed))


def _member(family: str, seed: int) -> Example:
    spec = _families.sample(family, seed)
    experts = (seq2seq_expert_layers(len(spec.cells))
               if isinstance(spec, _families.Seq2SeqSpec) else ())
    return Example(f"{family}-{seed}", "families.build",
                   f"{family} member {seed}: {spec.describe()}", _families.VERSION,
                   (family, seed), experts)


def saved_model_path(name: str) -> str:
    """The example's SavedModel, built now if this TensorFlow version has none cached."""
    import tensorflow as tf  # heavy: loaded on first use, not with the package

    example = get(name)
    path = cache_dir("examples", f"{example.name}-v{example.version}-tf{tf.__version__}")
    if sys.stderr.isatty() and not os.path.isfile(os.path.join(path, "saved_model.pb")):
        print(f"tf-placeto: building examples:{name} once (cached in {path})", file=sys.stderr)
    return build_once(path, "tf_placeto.examples.registry", [name], f"examples:{name}")


def build_saved_model(name: str, out: str) -> None:
    """Build the example's training step and save it with a `train_step` signature."""
    import tensorflow as tf  # heavy: loaded on first use, not with the package

    example = get(name)
    module_name, function = example.builder.rsplit(".", 1)
    module = getattr(importlib.import_module(f"tf_placeto.examples.{module_name}"),
                     function)(*example.args)
    # The tf.function itself, not a concrete function traced beforehand: saving traces it
    # anyway, so a concrete function would double the tracing, the larger part of a build.
    tf.saved_model.save(module, out, signatures={SIGNATURE: module.train_step})


if __name__ == "__main__":
    build_saved_model(sys.argv[1], sys.argv[2])


def member_range(members: Optional[str]) -> tuple:
    """(first, last or None) of a family's members from "A-B" (None: all of them)."""
    if not members:
        return 0, None
    low, _, high = members.partition("-")
    if not (low.isdigit() and high.isdigit() and int(low) <= int(high)):
        raise InputError(f"--members {members!r}: write A-B, e.g. 0-23")
    return int(low), int(high)


def expand(sources: Sequence[str], members: Optional[str] = None) -> list:
    """examples:FAMILY -> its members (those in `members`, "A-B"); other sources as given."""
    first, last = member_range(members)
    known = families()
    expanded = []
    for source in sources:
        family = source[len("examples:"):] if source.startswith("examples:") else None
        if family in known:
            expanded += [f"examples:{member}"
                         for member in known[family][first:None if last is None else last + 1]]
        else:
            expanded.append(source)
    return expanded

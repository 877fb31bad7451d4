"""What a user hands us -> one GraphDef to import, and how to write a placed copy back.

Kinds: a SavedModel directory, a GraphDef or MetaGraphDef file (.pb binary, .pbtxt text),
`examples:NAME` (a bundled training step, stored as a SavedModel), and in Python a tf.function
with example inputs, a ConcreteFunction, a GraphDef or a MetaGraphDef proto.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

from google.protobuf import message as pb_message
from google.protobuf import text_format

from tf_placeto.errors import SourceError
from tf_placeto.graph.cost_graph import is_cost_graph_file
from tf_placeto.examples import registry

SAVED_MODEL_FILE = "saved_model.pb"
SAVED_MODEL_TEXT_FILE = "saved_model.pbtxt"
DEFAULT_SIGNATURE = "serving_default"
DEFAULT_TAG_SET = "serve"        # as saved_model_cli: tf.saved_model.save writes only this one


@dataclasses.dataclass(frozen=True)
class Source:
    """What a user names as SOURCE: the model, and which of its graphs is meant (a
    SavedModel's signature and the tags of its MetaGraph). It travels whole from the command
    line or the Python call to the loader, so nothing between threads the two choices.

    model: a SavedModel directory, a GraphDef or MetaGraphDef file, "examples:NAME", a
    tf.function, a ConcreteFunction, a GraphDef or a MetaGraphDef proto. signature: default
    serving_default, or the only one. tag_set: comma-separated tags, as saved_model_cli names
    them (default "serve", or the only MetaGraph there is).
    """

    model: Any
    signature: Optional[str] = None
    tag_set: Optional[str] = None

    @classmethod
    def of(cls, source) -> "Source":
        """`source` itself, or a plain model (a path, a function, a proto) with the defaults."""
        return source if isinstance(source, (cls, LoadedSource)) else cls(source)

    @property
    def path(self) -> Optional[str]:
        """The file or SavedModel directory it is read from (None for objects in memory)."""
        return source_path(self.model)

    def __str__(self) -> str:
        return str(self.model)


@dataclasses.dataclass
class LoadedSource:
    """A loaded SOURCE: the protos, and what the step fetches.

    kind: "saved_model", "graph_def", "meta_graph_def" or "function".
    proto: the whole proto as read (SavedModel, GraphDef or MetaGraphDef); never modified.
    graph_def: the GraphDef to import (inside proto for SavedModel / MetaGraphDef).
    """

    kind: str
    proto: Any
    graph_def: Any
    fetches: Optional[list]
    path: Optional[str] = None
    text_format: bool = False
    signature: Optional[str] = None
    meta_graph_index: int = 0
    function: Any = None          # the ConcreteFunction, for kind "function"

    @property
    def meta_graph(self):
        if self.kind == "saved_model":
            return self.proto.meta_graphs[self.meta_graph_index]
        if self.kind == "meta_graph_def":
            return self.proto
        return None

    def describe(self) -> str:
        where = self.path or "<in memory>"
        sig = f", signature {self.signature!r}" if self.signature else ""
        return f"{self.kind.replace('_', ' ')} {where}{sig}"


def load_source(source, *example_args) -> LoadedSource:
    """Read anything tf_placeto accepts as a SOURCE (see module doc): a Source, or a plain
    model read with the defaults; a tf.function is traced with `example_args`."""
    if isinstance(source, LoadedSource):
        return source
    source = Source.of(source)
    model, signature, tag_set = source.model, source.signature, source.tag_set
    if isinstance(model, (str, os.PathLike)):
        return _load_path(source.path, signature, tag_set)
    type_name = type(model).__name__
    if type_name == "GraphDef":
        _no_tag_set(tag_set, "a GraphDef")
        return LoadedSource("graph_def", model, model, None)
    if type_name == "MetaGraphDef":
        _pick_meta_graph([model], tag_set, "the MetaGraphDef")
        sig = _pick_signature(model, signature) if model.signature_def else None
        return LoadedSource("meta_graph_def", model, model.graph_def,
                            _signature_fetches(model, sig), signature=sig)
    _no_tag_set(tag_set, "a function")
    return _load_function(model, example_args)


def source_path(source) -> Optional[str]:
    """The file or SavedModel directory a SOURCE is read from, without reading it (None for
    objects in memory): enough to check where a placed copy may go before any work."""
    if isinstance(source, (Source, LoadedSource)):
        return source.path
    if not isinstance(source, (str, os.PathLike)):
        return None
    text = os.fspath(source)
    if text.startswith("examples:"):
        return registry.saved_model_path(text[len("examples:"):])
    if os.path.basename(text) in (SAVED_MODEL_FILE, SAVED_MODEL_TEXT_FILE):
        return os.path.dirname(text) or "."
    return text


def _load_path(path: str, signature: Optional[str], tag_set: Optional[str]) -> LoadedSource:
    if not os.path.exists(path):
        raise SourceError(f"{path}: no such file or directory")
    if os.path.isdir(path):
        if not os.access(path, os.R_OK | os.X_OK):
            raise SourceError(f"cannot read {path}: permission denied")
        if not any(os.path.isfile(os.path.join(path, f))
                   for f in (SAVED_MODEL_FILE, SAVED_MODEL_TEXT_FILE)):
            raise SourceError(f"{path}: a directory without {SAVED_MODEL_FILE} is not a SavedModel")
        return _load_saved_model(path, signature, tag_set)
    if not os.path.isfile(path):        # reading a pipe would wait for a writer
        raise SourceError(f"{path}: neither a file nor a folder (a pipe, socket or device): "
                          "give a SavedModel folder or a graph file")
    if is_cost_graph_file(path):
        raise SourceError(f"{path}: a cost graph (Tarnawski et al.'s format) carries its own "
                          "costs and runs nothing: inspect, place, show and compare take it")
    data = _read_file(path)
    if not data:
        raise SourceError(f"{path}: the file is empty")
    proto, is_text = _parse_graph_file(path, data)
    if type(proto).__name__ == "GraphDef":
        if signature:
            raise SourceError(f"{path}: a GraphDef has no signatures (--signature {signature})")
        _no_tag_set(tag_set, f"{path}: a GraphDef")
        return LoadedSource("graph_def", proto, proto, None, path=path, text_format=is_text)
    _pick_meta_graph([proto], tag_set, path)
    sig = _pick_signature(proto, signature, path) if (proto.signature_def or signature) else None
    return LoadedSource("meta_graph_def", proto, proto.graph_def,
                        _signature_fetches(proto, sig), path=path, text_format=is_text,
                        signature=sig)


def _read_file(path: str) -> bytes:
    """A file's bytes; one that cannot be read (permission denied, a socket) is bad input."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {(exc.strerror or str(exc)).lower()}") from exc


def _parse_graph_file(path: str, data: bytes):
    """A .pb or .pbtxt holding a GraphDef or a MetaGraphDef: find out which, strictly."""
    from tensorflow.core.framework import graph_pb2  # TensorFlow: heavy, lazy
    from tensorflow.core.protobuf import meta_graph_pb2  # TensorFlow: heavy, lazy

    looks_text = path.endswith((".pbtxt", ".txt", ".prototxt")) or _is_probably_text(data)
    candidates = [meta_graph_pb2.MetaGraphDef, graph_pb2.GraphDef]
    errors = []
    for is_text in ([True, False] if looks_text else [False, True]):
        for cls in candidates:
            proto = cls()
            try:
                if is_text:
                    text_format.Parse(data.decode("utf-8"), proto)
                else:
                    proto.ParseFromString(data)
            except (pb_message.DecodeError, text_format.ParseError, UnicodeDecodeError,
                    ValueError) as exc:
                errors.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
                continue
            if _plausible(proto):
                return proto, is_text
    detail = f" ({errors[0]})" if errors else ""
    raise SourceError(f"{path}: not a complete GraphDef or MetaGraphDef; the file may be "
                      f"corrupt or truncated{detail}")


def _is_probably_text(data: bytes) -> bool:
    head = data[:4096]
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(c >= 32 or c in (9, 10, 13) for c in head)


def _plausible(proto) -> bool:
    """Binary protos parse leniently; accept only one whose nodes look like real nodes."""
    if type(proto).__name__ == "MetaGraphDef":
        if proto.meta_info_def.ByteSize() == 0 and not proto.signature_def:
            return False
        graph = proto.graph_def
    else:
        graph = proto
    if not graph.node or not graph.HasField("versions"):
        return False   # TensorFlow always writes versions, last: a file cut short lacks it
    return all(node.name and node.op and node.op.replace("_", "").replace(">", "").isalnum()
               for node in graph.node)


def _load_saved_model(path: str, signature: Optional[str], tag_set: Optional[str]) -> LoadedSource:
    from tensorflow.core.protobuf import saved_model_pb2  # TensorFlow: heavy, lazy

    proto = saved_model_pb2.SavedModel()
    is_text = not os.path.isfile(os.path.join(path, SAVED_MODEL_FILE))
    file = os.path.join(path, SAVED_MODEL_TEXT_FILE if is_text else SAVED_MODEL_FILE)
    data = _read_file(file)
    try:
        if is_text:
            text_format.Parse(data.decode("utf-8"), proto)
        else:
            proto.ParseFromString(data)
    except (pb_message.DecodeError, text_format.ParseError, UnicodeDecodeError) as exc:
        raise SourceError(f"{file}: corrupt or truncated SavedModel ({exc})") from exc
    if not proto.meta_graphs or not proto.meta_graphs[0].graph_def.node:
        raise SourceError(f"{file}: the SavedModel holds no graph (corrupt or truncated?)")
    index = _pick_meta_graph(proto.meta_graphs, tag_set, path)
    meta_graph = proto.meta_graphs[index]
    sig = _pick_signature(meta_graph, signature, path)
    return LoadedSource("saved_model", proto, meta_graph.graph_def,
                        _signature_fetches(meta_graph, sig), path=path, signature=sig,
                        meta_graph_index=index, text_format=is_text)


def _pick_meta_graph(meta_graphs, tag_set: Optional[str], where: str) -> int:
    """The index of the MetaGraph whose tags are exactly `tag_set` (TensorFlow's loader
    matches whole sets); without a tag set, the "serve" one, or the only one there is."""
    wanted = {tag.strip() for tag in (tag_set or DEFAULT_TAG_SET).split(",") if tag.strip()}
    for index, meta_graph in enumerate(meta_graphs):
        if set(meta_graph.meta_info_def.tags) == wanted:
            return index
    if tag_set is None and len(meta_graphs) == 1:
        return 0
    listed = "; ".join(",".join(mg.meta_info_def.tags) or "(no tags)" for mg in meta_graphs)
    raise SourceError(f"{where}: no MetaGraph with the tag set {','.join(sorted(wanted))!r} "
                      f"(tag sets: {listed}); choose one with --tag-set")


def _no_tag_set(tag_set: Optional[str], what: str) -> None:
    if tag_set is not None:
        raise SourceError(f"{what} has no tag sets (--tag-set {tag_set})")


def _pick_signature(meta_graph, signature: Optional[str], where: str = "the MetaGraphDef") -> str:
    # "__saved_model_init_op" and the like are TensorFlow's bookkeeping, not user signatures.
    available = sorted(k for k in meta_graph.signature_def if not k.startswith("__"))
    listed = ", ".join(available) if available else "none"
    if signature is not None:
        if signature not in meta_graph.signature_def:
            raise SourceError(f"{where}: no signature {signature!r} (signatures: {listed})")
        return signature
    if DEFAULT_SIGNATURE in meta_graph.signature_def:
        return DEFAULT_SIGNATURE
    if len(available) == 1:
        return available[0]
    if not available:
        raise SourceError(f"{where}: it has no signatures; save it with "
                          "tf.saved_model.save(..., signatures=...)")
    raise SourceError(f"{where}: several signatures ({listed}); choose one with --signature")


def _signature_fetches(meta_graph, signature: Optional[str]) -> Optional[list]:
    if signature is None:
        return None
    outputs = meta_graph.signature_def[signature].outputs
    return [outputs[k].name for k in sorted(outputs)]


def signature_inputs(source: LoadedSource) -> dict:
    """{input key: (tensor name, dtype enum, shape proto)} of the source's signature."""
    meta_graph = source.meta_graph
    if meta_graph is None or source.signature is None:
        return {}
    inputs = meta_graph.signature_def[source.signature].inputs
    return {k: (v.name, v.dtype, v.tensor_shape) for k, v in inputs.items()}


def _load_function(fn, example_args) -> LoadedSource:
    """A tf.function (traced with `example_args`) or a ConcreteFunction."""
    import tensorflow as tf  # heavy: only a function source needs it

    if isinstance(fn, tf.types.experimental.ConcreteFunction):
        concrete = fn
    elif isinstance(fn, tf.types.experimental.PolymorphicFunction) or hasattr(
            fn, "get_concrete_function"):
        try:
            concrete = fn.get_concrete_function(*example_args)
        except (TypeError, ValueError) as exc:
            raise SourceError(f"cannot trace {getattr(fn, '__name__', fn)!r} with the example "
                              f"inputs: {exc}") from exc
    else:
        raise SourceError(f"cannot import a {type(fn).__name__}: pass a SavedModel path, a "
                          "GraphDef/MetaGraphDef file, 'examples:NAME', a tf.function with "
                          "example inputs, a ConcreteFunction, a GraphDef or a MetaGraphDef")
    graph_def = concrete.graph.as_graph_def(add_shapes=True)
    fetches = ([t.name for t in concrete.outputs]
               + [op.name for op in concrete.graph.control_outputs])
    return LoadedSource("function", graph_def, graph_def, fetches or None, function=concrete)


def is_graph_file(path: str) -> bool:
    """Whether `path` is a whole GraphDef or MetaGraphDef file (.pb or .pbtxt): what a placed
    copy of a graph file is, and so what `--overwrite` may replace."""
    try:
        _parse_graph_file(path, _read_file(path))
    except SourceError:
        return False
    return True

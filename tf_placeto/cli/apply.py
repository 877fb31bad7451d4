"""`tf-placeto apply`: write a placement into a copy of a graph."""

from __future__ import annotations

from collections import Counter

from tf_placeto import api
from tf_placeto.cli.common import EXIT_OK, OVERWRITE_HELP, source_arguments, source_of


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("apply", help="write a placement into a copy of SOURCE")
    source_arguments(parser)
    parser.add_argument("--placement", required=True, metavar="FILE.json",
                        help="JSON object: op name -> TensorFlow device string")
    parser.add_argument("--out", required=True, metavar="OUT",
                        help="where to write the placed copy (same kind as SOURCE)")
    parser.add_argument("--devices", metavar="SPEC",
                        help="devices the placement may use: a count, or comma-separated device "
                             "names (default: this machine's; the CPU may be split into "
                             "logical /device:CPU:N)")
    parser.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    parser.set_defaults(handler=run)


def run(args) -> int:
    result = api.apply_placement(source_of(args), args.placement, args.out,
                                 devices=args.devices, overwrite=args.overwrite)
    counts = Counter(result.placement.values())
    spread = ", ".join(f"{device} ({n} ops)" for device, n in sorted(counts.items()))
    print(f"wrote {args.out}: {len(result.placement)} ops placed on {spread}")
    if result.proto.DESCRIPTOR.name == "SavedModel":
        print("variables keep their devices when loaded with tf.saved_model.load(path, options="
              "tf.saved_model.LoadOptions(experimental_variable_policy="
              "tf.saved_model.experimental.VariablePolicy.SAVE_VARIABLE_DEVICES))")
    return EXIT_OK

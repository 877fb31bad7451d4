"""The `tf-placeto` command: parse, call the Python API, print. One module per command, each
with add_parser(subparsers) and run(args) -> exit code; common.py holds what they share.

Exit codes: 0 done; 1 something failed while working (the line says what, and where the full
log is); 2 bad input or usage (one line on stderr, nothing written); 130 interrupted.
"""

from __future__ import annotations

import contextlib
import sys
import traceback

from tf_placeto._version import __version__
from tf_placeto.cli import (apply, common, compare, examples, inspect, measure, place, profile,
                            show, train)
from tf_placeto.cli.common import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED
from tf_placeto.errors import PlacetoError, RuntimeFailure
from tf_placeto.frontend import (native_stderr_to_log, progress_to, remove_log,
                                 set_tensorflow_environment)

COMMANDS = (inspect, apply, profile, measure, place, compare, show, train, examples)


def build_parser() -> common.Parser:
    parser = common.Parser(prog="tf-placeto", description="See and change where the ops of a "
                           "TensorFlow graph run.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show TensorFlow's own log and full tracebacks")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=common.Parser)
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def main(argv=None) -> int:
    set_tensorflow_environment()
    args = build_parser().parse_args(argv)
    # --debug leaves TensorFlow's own log on the terminal: there is no log file to name
    quiet = contextlib.nullcontext() if args.debug else native_stderr_to_log()
    with progress_to(common.Progress()), quiet as log_path:
        code, message = _run(args, debug=args.debug)
    if message:
        print(message, file=sys.stderr)
    if log_path and code == EXIT_FAILED:
        print(f"tf-placeto: TensorFlow's log: {log_path}", file=sys.stderr)
    elif log_path:
        remove_log(log_path)
    return code


def _run(args, debug: bool = False):
    """(exit code, the line that says why or None): the same with `debug`, which shows the
    traceback of what was raised first."""
    try:
        try:
            return args.handler(args), None
        except (Exception, KeyboardInterrupt):
            if debug:
                traceback.print_exc()
            raise
    except RuntimeFailure as exc:        # good input, failed work: the log says more
        return EXIT_FAILED, f"tf-placeto: failed: {exc}"
    except PlacetoError as exc:          # InputError, or any other report of bad input
        return EXIT_BAD_INPUT, f"tf-placeto: error: {exc}"
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED, "tf-placeto: interrupted"
    except Exception as exc:  # a failure of ours or TensorFlow's: one line, log kept
        text = str(exc).strip().splitlines()
        hint = "" if debug else " (rerun with --debug for the traceback)"
        return EXIT_FAILED, (f"tf-placeto: failed: {type(exc).__name__}: "
                             f"{text[0] if text else ''}{hint}")

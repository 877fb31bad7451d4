"""Use 3: real before/after step times on a multi-device box.

Places a bundled training step on two TensorFlow worker processes of this machine
(`--cluster local:2`; pass a ClusterSpec JSON or TF_CONFIG for an existing cluster, or use
`--devices N` on a machine with N GPUs), writes the placed SavedModel, and times the step as
written and as placed with `tf-placeto measure`, for real.

    python -m examples.measure_on_cluster [--example NAME] [--cluster SPEC] [--method NAME]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tf_placeto(*args: str) -> None:
    """Run one tf-placeto command, showing it and what it prints."""
    print("$ tf-placeto " + " ".join(args), flush=True)
    code = subprocess.call([sys.executable, "-m", "tf_placeto.cli", *args],
                           env={**os.environ, "PYTHONPATH": REPO})
    if code:
        sys.exit(code)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="small_cnn")
    parser.add_argument("--cluster", default="local:2")
    parser.add_argument("--method", default="m_etf")
    parser.add_argument("--out", default=os.path.join("placeto-out", "measured"))
    args = parser.parse_args(argv)

    source = f"examples:{args.example}"
    tf_placeto("place", source, "--cluster", args.cluster, "--method", args.method,
               "--out", args.out, "--overwrite", "--simulate")
    for when, what in (("before", source), ("after", args.out)):
        print(f"\n{when}: the step of {what}, as written there, timed for real", flush=True)
        tf_placeto("measure", what, "--cluster", args.cluster, "--repeats", "5")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Use 3: real before/after step times on a multi-device box.

Places a bundled training step on two TensorFlow worker processes of this machine
(`--cluster local:2`; pass a ClusterSpec JSON or TF_CONFIG for an existing cluster, or use
`--devices N` on a machine with N GPUs). `tf-placeto place` times the step as written and as
placed for real, in turns, and writes the placed SavedModel only if it is faster beyond the
noise; the written placement is then timed again against the source with `tf-placeto
measure`, in turns, as a user would check it.

    python -m examples.measure_on_cluster [--example NAME] [--cluster SPEC] [--method NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tf_placeto(*args: str) -> str:
    """Run one tf-placeto command, showing it and its progress; what it printed."""
    print("$ tf-placeto " + " ".join(args), flush=True)
    result = subprocess.run([sys.executable, "-m", "tf_placeto.cli", *args], text=True,
                            stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": REPO})
    if result.returncode:
        sys.exit(result.returncode)
    return result.stdout


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="small_cnn")
    parser.add_argument("--cluster", default="local:2")
    parser.add_argument("--method", default="auto",
                        help="as `place --method` (default auto: every fast placer and the "
                             "policy, the best few measured)")
    parser.add_argument("--out", default=os.path.join("placeto-out", "measured"))
    args = parser.parse_args(argv)

    source = f"examples:{args.example}"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    placed = json.loads(tf_placeto("place", source, "--cluster", args.cluster, "--method",
                                   args.method, "--out", args.out, "--overwrite", "--json"))
    for row in placed["measured_candidates"]:      # as written, then the candidates
        print(f"{row['label']}: {row['status']}, median step "
              + (f"{row['median_s'] * 1e3:.2f} ms" if row["median_s"] else "-"), flush=True)
    print(placed["verdict"], flush=True)
    if not placed["written"]:
        print(f"nothing was written to {args.out}", flush=True)
        return 0
    print(f"\nthe step of {source} as written and as placed in {args.out}, timed again in "
          "turns", flush=True)
    print(tf_placeto("measure", source, "--placement", placed["placement"], "--cluster",
                     args.cluster), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

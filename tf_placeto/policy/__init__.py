"""Placeto on TF-Agents: specs, environment, network, training, and placing with a policy.

specs.py (what the policy sees and does) -> objective.py (what it minimises) -> starts.py
(where episodes start) -> candidates.py (what each device would mean for the group being
placed) -> observation.py (a problem as the policy sees it) -> episode.py (the MDP over a
PlacementProblem) -> environment.py (it as a TF-Agents environment) -> network.py
(the graph-embedding network) -> imitation.py (imitating the best known decisions) ->
real.py (returns measured for real) -> baselines.py (each problem's reward baseline) ->
agent.py (the TF-Agents agent and its config) -> checkpoints.py (a training folder on disk:
one unit per save, resumed from the newest whole one) -> training.py (REINFORCE or PPO, the
stages, export) -> inference.py (zero-shot or fine-tuned placements).
Beside them, rnn_planner.py and rnn_network.py: the hierarchical RNN planner of Mirhoseini et
al., learned per graph on Placeto's objective, with TensorFlow alone; placers/ offers both as
placers.

environment, network, imitation, agent, training and rnn_network import TensorFlow (and TF-Agents) at
their top; the other modules import them only inside functions, so that `import
tf_placeto.policy` and listing the placers load no TensorFlow.
"""

import contextlib
import importlib
import io
import os
import sys

from tf_placeto.errors import InputError


def require_tf_agents() -> None:
    """tf-agents runs on legacy Keras (tf-keras), which TensorFlow picks when it is first
    imported: refuse clearly in a process that already chose Keras 3, instead of failing deep
    inside tf-agents."""
    if "tensorflow" in sys.modules and os.environ.get("TF_USE_LEGACY_KERAS") not in ("1", "true",
                                                                                     "True"):
        raise InputError(
            "training or fine-tuning the Placeto policy uses tf-agents, which needs legacy Keras: "
            "set TF_USE_LEGACY_KERAS=1 before TensorFlow is first imported (the tf-placeto "
            "command does), or place zero-shot (budget 0), which needs only TensorFlow")
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    if "gym" not in sys.modules:   # tf-agents imports gym, which prints a notice on stderr
        with contextlib.redirect_stderr(io.StringIO()):
            importlib.import_module("gym")

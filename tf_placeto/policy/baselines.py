"""REINFORCE's baseline, Placeto's: per problem, start and step index, the mean return of the
last episodes there. Training applies it by reshaping rewards, r'_t = r_t - b_t + b_(t+1), so
that the undiscounted return the agent computes from t is exactly G_t - b_t."""

from __future__ import annotations

import numpy as np


class Baselines:
    """Per problem, start and step index, the mean return of the last `window` episodes
    there. A problem's first episodes, with none before them, are measured against their own
    mean: against zero, every move of a good episode would look good."""

    def __init__(self, window: int):
        self.window = window
        self.seen: dict = {}          # key -> list of return arrays

    @staticmethod
    def key(problem: int, start: str = "random") -> str:
        """Where a problem's returns are kept: episodes from another start (a later stage of
        training from the fast placers' decision) return other amounts."""
        return str(problem) if start == "random" else f"{problem}/{start}"

    def reshape(self, key: str, rewards: np.ndarray, returns: np.ndarray) -> np.ndarray:
        """Rewards [episodes, steps] whose undiscounted returns are G_t - b_t; then the
        episodes join the mean."""
        past = self.seen.get(key)
        b = np.mean(past if past else returns, axis=0)
        self.seen[key] = (past or []) + list(returns)
        del self.seen[key][:-self.window]
        return (rewards - b + np.append(b[1:], 0.0)).astype(rewards.dtype)

    def as_json(self) -> dict:
        return {k: [list(map(float, e)) for e in v] for k, v in self.seen.items()}

    @staticmethod
    def seen_from_json(saved: dict) -> dict:
        """What as_json wrote, as `seen`; ValueError where it is not that."""
        try:
            return {str(k): [np.array(e, dtype=float) for e in v] for k, v in saved.items()}
        except (TypeError, AttributeError) as error:
            raise ValueError(f"not baselines: {error}") from None

"""Evaluation: real step times of placements, measured in turns with intervals, journalled
and traced."""

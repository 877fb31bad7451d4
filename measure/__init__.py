"""Measurement: real runs of placed graphs, traced step stats."""

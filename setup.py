"""Kept for tools that still call setup.py; everything is declared in pyproject.toml."""

from setuptools import setup

setup()

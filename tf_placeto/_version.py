"""The one version string: `tf_placeto.__version__`, `tf-placeto --version` and pyproject.toml
read it here, where importing it loads nothing else."""

__version__ = "0.1.0"

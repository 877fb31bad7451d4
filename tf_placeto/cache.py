"""Where tf_placeto keeps what it builds and measures: $TF_PLACETO_CACHE, else ~/.cache/tf_placeto."""

import os


def cache_dir(*parts: str) -> str:
    root = os.environ.get("TF_PLACETO_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "tf_placeto")
    return os.path.join(root, *parts)

"""Bundled example graphs (`examples:NAME`) and runnable scripts for each use of tf_placeto."""

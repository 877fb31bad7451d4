"""The learned placers, as placer modules (see tf_placeto.placers): their top level is light,
TensorFlow and TF-Agents load only when they place."""

"""What a front end of the library (the tf-placeto command, or a script with flags of its
own) needs besides the API: TensorFlow's defaults set before it loads and its native log kept
off the terminal, the library's progress shown, and the files it writes checked before any
work and written whole. Public names for helpers the library keeps in its lower layers.
"""

from tf_placeto._quiet import native_stderr_to_log, remove_log, set_tensorflow_environment
from tf_placeto.files import check_output_file, check_output_folder, write_atomically
from tf_placeto.log import progress, progress_to

__all__ = ["check_output_file", "check_output_folder", "native_stderr_to_log", "progress",
           "progress_to", "remove_log", "set_tensorflow_environment", "write_atomically"]

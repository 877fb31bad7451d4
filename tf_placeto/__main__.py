"""`python -m tf_placeto`: the tf-placeto command."""

import sys

from tf_placeto.cli import main

sys.exit(main())

"""`python -m tf_placeto.cli`: the tf-placeto command, as tests and scripts run it."""

import sys

from tf_placeto.cli import main

sys.exit(main())

"""``python -m batchscope``: the command line (``batchscope.cli.main``), the same as the ``batchscope`` script."""

import sys

from batchscope.cli.main import main

sys.exit(main())

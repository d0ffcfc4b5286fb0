"""``python -m invoicing_async``: the same as the ``invoicing-async`` command."""

import sys

from ._cli.command import main

sys.exit(main())

"""``python -m invoicing_async``: the same as the ``invoicing-async`` command."""

import sys

from ._cli._main import main

sys.exit(main())

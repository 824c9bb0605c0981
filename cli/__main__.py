"""``python -m clew.cli ARGS``: the ``clew`` command (``accelerate launch -m clew.cli train``)."""

import sys

from clew.cli.main import main

sys.exit(main())

"""``python -m tests.reference_server``: run one reference server (see ``server.py``)."""

from __future__ import annotations

import sys

from tests.reference_server.server import main

sys.exit(main())

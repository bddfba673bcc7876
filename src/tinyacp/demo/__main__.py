"""``python -m tinyacp.demo``: the demo agent on stdin/stdout."""

import sys

from . import main

sys.exit(main())

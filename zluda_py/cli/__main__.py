"""`python -m zluda_py.cli ...`: the `zluda` command without its console script."""

import sys

from zluda_py.cli import main

sys.exit(main())

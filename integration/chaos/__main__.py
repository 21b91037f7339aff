import sys

from integration.chaos.runner import main

sys.exit(main())

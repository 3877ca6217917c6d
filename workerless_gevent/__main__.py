import sys

from workerless_gevent.entry import main

sys.exit(main())

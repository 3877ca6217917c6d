from gevent import monkey

monkey.patch_all()

import sys  # noqa: E402

from workerless_gevent.cli import main  # noqa: E402

sys.exit(main())

"""`python -m service.cli …` is the `trainjobs` command (tests and scripts start the service this way)."""
from service.cli.main import main

raise SystemExit(main())

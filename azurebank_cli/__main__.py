import sys

from azurebank_cli.main import main

sys.exit(main())

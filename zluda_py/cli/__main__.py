import sys; from zluda_py.cli import main; sys.exit(main())

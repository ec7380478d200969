from benchmark.cli.main import main

raise SystemExit(main())

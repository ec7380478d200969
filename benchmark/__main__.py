import sys

try:  # Ctrl-C while the command's modules load: one line too (benchmark.cli.main handles it once they are loaded)
    from benchmark.cli.main import main
except KeyboardInterrupt:
    print("interrupted: python -m benchmark stopped (Ctrl-C)", file=sys.stderr, flush=True)
    raise SystemExit(130) from None

raise SystemExit(main())

"""`python -m duetime.cli …`: the same as the `duetime` command."""

from duetime.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())

"""CLI subcommands, one module each (see training/cli.py)."""

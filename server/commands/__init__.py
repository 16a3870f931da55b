"""Server CLI subcommands."""

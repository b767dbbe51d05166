"""The command line: ``batchscope`` (or ``python -m batchscope``) and its subcommands."""

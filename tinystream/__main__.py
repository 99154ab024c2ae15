"""`python -m tinystream` is the `tinystream` command."""

from tinystream.cli import main

main()

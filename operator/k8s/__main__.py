"""`python -m tinystream.operator.k8s`: the operator without the CLI group."""

from .cli import operator

operator(prog_name="tinystream operator")

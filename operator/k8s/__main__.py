"""`python -m tinystream.operator.k8s`: the operator without the CLI group."""

from tinystream.operator.k8s.cli import operator

operator(prog_name="tinystream operator")

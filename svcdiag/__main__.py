"""`python -m svcdiag`: the same as the `svcdiag` command."""

from svcdiag.cli import main

main()

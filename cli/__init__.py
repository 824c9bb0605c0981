"""clew.cli: the ``clew`` command (:mod:`clew.cli.main`), one module per subcommand that has
options of its own (``cmd_*.py``), the demo and the preflight check (docs/architecture.md#command-line).
``python -m clew.cli`` runs it too (``accelerate launch -m clew.cli train ...``)."""

"""svcdiag: run SGLang servers as systemd units and judge each start from the journal."""

#: the release (pyproject.toml reads it from here); `svcdiag --version` prints it without importlib.metadata
__version__ = "0.1.0"

# The package's version, read by the build (pyproject.toml: dynamic version) and by
# mercer_client.__version__. It is the server's version (Cargo.toml's `version`): a
# client release goes with the server release of the same number, and
# tests/test_version.py fails when the two differ.
__version__ = "0.1.0"

"""The client's version is the server's: Cargo.toml's ``version`` (the repository's),
the installed distribution's (what the build read from ``mercer_client/_version.py``),
``mercer_client.__version__``, and the version the server under test reports in its
Open Inference Protocol metadata (``GET /v2``) are one and the same."""

import importlib.metadata
import re
from pathlib import Path

import requests

import mercer_client

CARGO_TOML = Path(__file__).resolve().parents[3] / "Cargo.toml"


def cargo_version() -> str:
    """The ``version`` of Cargo.toml's ``[package]`` table."""
    text = CARGO_TOML.read_text()
    package = re.search(r"^\[package\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    assert package, f"no [package] table in {CARGO_TOML}"
    version = re.search(r'^version\s*=\s*"([^"]+)"\s*$', package.group(1), re.M)
    assert version, f"no version in {CARGO_TOML}'s [package] table"
    return version.group(1)


def test_the_package_version_is_cargo_tomls():
    assert mercer_client.__version__ == cargo_version()


def test_the_installed_distribution_has_that_version():
    """pyproject.toml's dynamic version reached the built package's metadata."""
    assert importlib.metadata.version("mercer-client") == mercer_client.__version__


def test_the_server_under_test_reports_that_version(mercer_url):
    assert requests.get(mercer_url + "/v2", timeout=10).json()["version"] == mercer_client.__version__

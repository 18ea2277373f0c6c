"""Developer sessions: `nox -s tests`, `nox -s tests_newest_jax`, `nox -s lint`, `nox -s slow`, `nox -s docs` (the
documentation site)."""

import nox

nox.options.sessions = ["lint", "tests"]


@nox.session
def tests(session):
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-q", *session.posargs)


@nox.session(python="3.12")
def tests_newest_jax(session):
    """The suite on the newest JAX and jaxlib, which need Python 3.12 (CI's Python 3.11 stops at jax 0.10)."""
    session.install("-e", ".[test]")
    session.install("--upgrade", "jax", "jaxlib")
    session.run("python", "-m", "pytest", "-q", *session.posargs)


@nox.session
def slow(session):
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-q", "-m", "slow", *session.posargs)


LINTED = ("ascjax", "kernels", "tests", "examples", "benchmarks", "noxfile.py", "docs/seeds/generate.py")


@nox.session
def lint(session):
    session.install("ruff")
    session.run("ruff", "check", *LINTED)
    session.run("ruff", "format", "--check", "--diff", *LINTED)


@nox.session
def docs(session):
    session.install("-e", ".[docs]")
    session.env["NO_MKDOCS_2_WARNING"] = "1"  # mkdocs-material's banner about its successor
    session.run("python", "docs/seeds/generate.py")  # the seed pages, with ascjax's actual output (minutes)
    session.run("mkdocs", "build", "--strict", "--site-dir", "site", *session.posargs)

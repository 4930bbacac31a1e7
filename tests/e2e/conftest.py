"""The e2e tests' pickup directory is the relay tests' own: a fresh folder outside any git tree."""

from tests.integration.notices.conftest import pickup

__all__ = ["pickup"]

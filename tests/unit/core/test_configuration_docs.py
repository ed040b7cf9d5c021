"""docs/configuration.md is what the option registry generates: declarations and reference cannot drift."""
from __future__ import annotations

import pytest

from runtime.core.options import all_options
from runtime.core.options.docs import DOCS_PATH, REGENERATE, render

pytestmark = pytest.mark.unit


def test_the_checked_in_reference_is_current() -> None:
    current = DOCS_PATH.read_text(encoding="utf-8") if DOCS_PATH.exists() else ""
    assert current == render(), f"{DOCS_PATH} is not current: run `{REGENERATE}` and commit the result"


def test_the_reference_lists_every_option_and_its_deprecated_keys() -> None:
    text = render()
    for option in all_options():
        assert f"| `{option.key}` |" in text
        for key in option.deprecated_keys:
            assert f"`{key}`" in text

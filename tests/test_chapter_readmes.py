"""A chapter README cannot drift from its pairs: every pair the harness discovers is named in it."""

from __future__ import annotations

import pytest
from conftest import REPO

from aisp.harness.discovery import chapters, pairs_in


@pytest.mark.parametrize("chapter", sorted(chapters(REPO)))
def test_readme_names_every_pair(chapter):
    folder = chapters(REPO)[chapter]
    readme = (folder / "README.md").read_text()
    missing = [p.name for p in pairs_in(folder) if p.name not in readme]
    assert not missing, f"{chapter}/README.md does not mention {missing}"

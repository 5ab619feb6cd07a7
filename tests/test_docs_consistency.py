"""Facts the docs state in more than one place say the same thing."""

from __future__ import annotations

import re
from pathlib import Path

from mkpolicy.check.checks.managed_by import SYNC_MODE_NONE

ROOT = Path(__file__).resolve().parents[1]


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("`", ""))


def test_one_description_of_sync_mode_none() -> None:
    """lint's MKP404 message, its rule page and the policy format describe the wire behaviour alike."""
    for page in ("docs/policy-format.md", "docs/lint-rules.md"):
        assert SYNC_MODE_NONE in _flat((ROOT / page).read_text()), page
    # and no page says the old, contradicting things
    for page in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        text = _flat(page.read_text())
        assert "only mkpolicy (the sidecar, which shows Kueue the status the policy computes" not in text, page

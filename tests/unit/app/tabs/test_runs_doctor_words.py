"""The README quotes the run doctor's first words as the Runs tab shows them."""

from __future__ import annotations

import html
from pathlib import Path

from app.tabs.runs.doctor import doctor_html
from grpo_core.doctor.findings import Finding, Severity

README = Path(__file__).resolve().parents[4] / "README.md"


def test_the_readme_says_what_the_doctor_shows_at_first():
    readme = " ".join(README.read_text(encoding="utf-8").split())
    nothing = doctor_html([], 0)
    early = doctor_html([Finding(code="reward_undecided", severity=Severity.INFO,
                                 title="Too early to tell whether the reward improves: p = 0.4 for a rise",
                                 advice="Let it run longer before judging.")], 5)
    assert "No metrics logged yet." in nothing and "No metrics logged yet." in readme
    assert "✅ No problem found." in html.unescape(early) and "✅ No problem found." in readme
    assert "too early to tell whether the reward improves" in readme


def test_the_head_counts_logged_steps_in_the_singular_and_plural():
    assert "Run doctor · 1 logged step<" in doctor_html([], 1)
    assert "Run doctor · 2 logged steps<" in doctor_html([], 2)

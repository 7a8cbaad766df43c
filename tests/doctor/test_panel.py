"""The Runs tab's doctor panel shows the learning finding as good news and says when nothing is wrong."""

from __future__ import annotations

from app.tabs.runs.doctor import doctor_html
from grpo_core.doctor import Finding, Severity


def test_learning_is_shown_in_green_and_no_problem_is_said():
    learning = Finding(code="learning", severity=Severity.INFO, title="Learning: reward up from 0.29 to 0.8",
                       advice="Mann-Kendall")
    page = doctor_html([learning], num_steps=40)
    assert 'class="doctor-finding good" data-code="learning"' in page
    assert "No problem found" in page and "1 note" in page


def test_a_warning_is_not_called_no_problem():
    warning = Finding(code="kl", severity=Severity.WARNING, title="KL is blowing up", advice="lower it")
    page = doctor_html([warning], num_steps=40)
    assert "No problem found" not in page and 'class="doctor-finding warning"' in page

"""The "why does a run learn or not" tools in headless Chromium, on runs written straight into the served store
(no training): the run doctor flags a stretch of zero-std steps, the Inspect filters, text search, one prompt
across steps and the completion diff work, and Compare overlays two runs by wall time with their config
differences.

Run "doctor-demo" logs 10 steps of 4 groups each, its reward flat (0.36 and 0.34 in turn: flat groups are silent while
a reward rises, so the demo's does not); at step s the first ``round(4 * frac_reward_zero_std[s])``
groups have all-equal rewards, dataset row 7 is sampled at every step, the word "zebra" is in three completions
(steps 2, 5, 8), the last group of each step has a truncated completion, and step 10 has one 1,000-character
completion.
"""

from __future__ import annotations

import statistics
import time

import pytest
from playwright.sync_api import expect

from grpo_core.run_config import RunConfig
from storage import CompletionRecord, GroupRecord, RunStatus, Store, sqlite_url
from tests.helpers import pick
from tests.store_helpers import record_metrics

pytestmark = pytest.mark.e2e

FRAC_ZERO_STD = [0.25, 0.5, 0.75, 1.0, 1.0, 0.75, 0.5, 0.25, 0.75, 0.25]  # > 0.5 at steps 3-6: 4 in a row
ZEBRA_STEPS = (2, 5, 8)


def _group(step: int, row: int, flat: bool, truncated: bool) -> GroupRecord:
    totals = [1.0, 1.0, 1.0, 1.0] if flat else [1.0, 0.0, 0.5, 0.0]
    mean, std = statistics.fmean(totals), statistics.pstdev(totals)
    texts = [f"step {step} answer {row + i}" for i in range(4)]
    if row == 7 and step in ZEBRA_STEPS:
        texts[1] = "the zebra says 14"
    if step == 10 and row == 30:
        texts[2] = "long " * 200
    return GroupRecord(
        step=step,
        row_index=row,
        prompt=f"What is {row} + {row}?",
        completions=[
            CompletionRecord(
                index=i,
                text=texts[i],
                rewards={"numeric_answer": t, "format_regex": 0.0},
                total_reward=t,
                advantage=0.0 if std == 0 else (t - mean) / (std + 1e-4),
                num_tokens=6,
                truncated=truncated and i == 3,
            )
            for i, t in enumerate(totals)
        ],
    )


def _config(name: str, **overrides) -> dict:
    # A model path that does not exist: should the launcher claim the run before it is finished, its worker fails
    # at once instead of training.
    values = {"name": name, "model": "/nonexistent/model", "dataset_path": "/nonexistent/data.jsonl", **overrides}
    return RunConfig.model_validate(values).model_dump(mode="json")


@pytest.fixture(scope="module")
def demo_runs(server):
    """Two finished runs in the served store: ``doctor-demo`` (groups, zero-std stretch) and ``baseline-demo``."""
    store = Store(sqlite_url(server["data_dir"] / "grpo.db"))
    try:
        runs = {}
        specs = {
            "doctor-demo": {},
            "baseline-demo": {
                "beta": 0.0,
                "learning_rate": 5e-6,
                "num_generations": 8,
                "per_device_train_batch_size": 16,
            },
        }
        start = time.time() - 3600
        for offset, (name, overrides) in enumerate(specs.items()):
            run = store.create_run(name=name, config=_config(name, **overrides), dataset_id=None, max_steps=10)
            store.finish_run(run.id, RunStatus.COMPLETED)
            runs[name] = run.id
            for step in range(1, 11):
                frac = FRAC_ZERO_STD[step - 1] if name == "doctor-demo" else 0.0
                reward = (0.36 if step % 2 else 0.34) if name == "doctor-demo" else 0.3 + 0.01 * step
                metrics = {
                    "reward": reward,
                    "reward_std": 0.2,
                    "frac_reward_zero_std": frac,
                    "kl": 0.001 * step,
                    "loss": 0.01,
                    "entropy": 1.0,
                    "completions/mean_length": 12.0,
                    "completions/clipped_ratio": 0.25,
                    "rewards/numeric_answer/mean": reward,
                }
                wall = start + offset * 600 + step * (3.0 if offset == 0 else 5.0)
                record_metrics(store, run.id, step, metrics, wall_time=wall)
                if name == "doctor-demo":
                    flat = round(4 * frac)
                    rows = [7, 20 + step, 40 + step, 60 + step]
                    store.record_groups(
                        run.id, step, [_group(step, row, i < flat, truncated=i == 3) for i, row in enumerate(rows)]
                    )
        assert store.get_run(runs["doctor-demo"]).status == RunStatus.COMPLETED
        yield runs
    finally:
        store.close()


def _open(page, panel_id: str, label: str) -> None:
    """Open the closed accordion ``#panel_id`` by its label."""
    page.locator(f"#{panel_id}").get_by_text(label, exact=True).first.click()


def test_doctor_flags_the_zero_std_stretch(page, demo_runs):
    page.get_by_role("tab", name="Runs").click()
    expect(page.locator("#runs-table")).to_contain_text("doctor-demo")
    pick(page, "runs-select", "doctor-demo")
    finding = page.locator('#run-doctor .doctor-finding[data-code="zero_std"]')
    finding.wait_for()
    text = finding.inner_text()
    assert "no learning signal" in text and "4 steps in a row" in text
    assert "steps 3–6" in text
    assert "dataset row" in text  # an example flat group
    # its reward is flat, which the doctor says beside it; it never calls the run learning in the same panel
    expect(page.locator('#run-doctor .doctor-finding[data-code="reward_flat"]')).to_contain_text("not improving")
    assert page.locator('#run-doctor .doctor-finding[data-code="learning"]').count() == 0
    # The other run is healthy.
    pick(page, "runs-select", "baseline-demo")
    expect(page.locator("#run-doctor")).to_contain_text("No problem found")


def test_compare_by_wall_time_with_config_differences(page, demo_runs):
    page.get_by_role("tab", name="Runs").click()
    _open(page, "compare-panel", "Compare runs")
    pick(page, "compare-runs", "doctor-demo")
    pick(page, "compare-runs", "baseline-demo")
    page.locator("#compare-x").get_by_text("wall time", exact=False).click()
    page.locator("#compare-button").click()
    plot = page.locator("#compare-plot .js-plotly-plot")
    plot.wait_for()
    expect(plot.locator(".scatterlayer .trace")).to_have_count(2)
    expect(plot.locator(".g-xtitle")).to_contain_text("seconds")
    table = page.locator("#compare-config")
    for field in ("beta", "learning_rate", "num_generations", "per_device_train_batch_size", "name"):
        expect(table).to_contain_text(field)
    assert "max_completion_length" not in table.inner_text()  # equal fields are left out


def test_inspect_filters_search_history_and_diff(page, demo_runs):
    page.get_by_role("tab", name="Inspect").click()
    pick(page, "inspect-run", "doctor-demo")
    groups = page.locator("#inspect-groups .grpo-group")
    expect(groups).to_have_count(4)
    expect(page.locator("#inspect-summary")).to_contain_text("step 10")
    assert page.locator("#inspect-groups details.grpo-fold").count() == 1  # the 1,000-character completion folds

    pick(page, "inspect-filter", "no signal (all rewards equal)")
    expect(groups).to_have_count(1)  # frac_reward_zero_std 0.25 of 4 groups
    expect(page.locator("#inspect-summary")).to_contain_text("Showing 1 of 4")
    assert "no learning signal" in groups.first.inner_text()
    pick(page, "inspect-filter", "with truncated completions")
    expect(groups).to_have_count(1)
    expect(groups.first.locator(".grpo-badge", has_text="truncated")).to_have_count(1)
    pick(page, "inspect-filter", "top N by advantage spread")
    expect(groups).to_have_count(3)  # N = 3 by default
    pick(page, "inspect-filter", "all groups")
    expect(groups).to_have_count(4)

    # Search across the run: three completions say "zebra", at steps 2, 5 and 8
    _open(page, "inspect-search-panel", "Search the run (prompts and completions)")
    page.locator("#inspect-search input, #inspect-search textarea").first.fill("ZEBRA")
    page.locator("#inspect-search-button").click()
    hits = page.locator("#inspect-search-results .search-hit")
    expect(hits).to_have_count(3)
    expect(page.locator("#search-summary")).to_contain_text("of 3")
    assert [hits.nth(i).get_attribute("data-step") for i in range(3)] == ["2", "5", "8"]
    expect(hits.first.locator("mark")).to_have_text("zebra")

    # One prompt across steps: dataset row 7 was sampled at every step
    _open(page, "inspect-history-panel", "One prompt across steps")
    pick(page, "inspect-prompt-row", "row 7 · 10 groups")
    history = page.locator("#prompt-history")
    history.wait_for()
    assert history.get_attribute("data-steps") == "10"
    steps = page.locator("#prompt-history .history-step")
    expect(steps).to_have_count(10)
    assert [steps.nth(i).get_attribute("data-step") for i in range(10)] == [str(s) for s in range(1, 11)]
    expect(page.locator("#prompt-history-range")).to_contain_text("groups 1–10 of 10")

    # Diff: completion #1 of row 7 at step 8 ("zebra") against completion #1 of row 7 at step 10
    _open(page, "inspect-diff-panel", "Diff two completions")
    pick(page, "inspect-diff-a", "step 8 · row 7 · #1")
    pick(page, "inspect-diff-b", "step 10 · row 7 · #1")
    diff = page.locator("#completion-diff")
    diff.wait_for()
    assert "zebra" in diff.inner_text()
    assert diff.locator(".diff_chg, .diff_add, .diff_sub").count() >= 1


@pytest.fixture(scope="module")
def vision_run(server, tmp_path_factory):
    """A finished run "vision-demo" on an image dataset (a red picture at row 0) with one recorded group."""
    import zipfile

    from grpo_core.datasets.library import import_dataset
    from grpo_core.settings import load_settings
    from tests.helpers import png_bytes

    upload = tmp_path_factory.mktemp("vision") / "colours.zip"
    with zipfile.ZipFile(upload, "w") as archive:
        archive.writestr("data.jsonl", '{"prompt": "What colour is it?", "image": "red.png", "answer": "red"}\n')
        archive.writestr("red.png", png_bytes((220, 20, 20), size=(32, 24)))
    store = Store(sqlite_url(server["data_dir"] / "grpo.db"))
    try:
        info = import_dataset(store, load_settings(data_dir=server["data_dir"]), upload, source_name="colours.zip")
        run = store.create_run(name="vision-demo", config=_config("vision-demo", dataset_id=info.id,
                                                                  dataset_path=None),
                               dataset_id=info.id, max_steps=1)
        store.finish_run(run.id, RunStatus.COMPLETED)
        group = _group(1, 0, flat=False, truncated=False)
        store.record_groups(run.id, 1, [GroupRecord(step=1, row_index=0, prompt="user: What colour is it?",
                                                    completions=group.completions)])
        yield run.id
    finally:
        store.close()


def test_inspect_shows_the_picture_beside_its_group(page, vision_run):
    page.get_by_role("tab", name="Inspect").click()
    pick(page, "inspect-run", "vision-demo")
    group = page.locator("#inspect-groups .grpo-group")
    expect(group).to_have_count(1)
    picture = group.locator('img[alt="dataset row 0 image 1"]')
    expect(picture).to_be_visible()
    assert picture.evaluate("image => [image.complete, image.naturalWidth, image.naturalHeight]") == [True, 32, 24]
    expect(group.locator(".grpo-completion")).to_have_count(4)
    expect(group.locator(".grpo-adv").first).to_contain_text("advantage 1.")  # sorted by advantage, highest first
    box, prompt = picture.bounding_box(), group.locator(".grpo-prompt").bounding_box()
    assert box["y"] >= prompt["y"] + prompt["height"] - 1  # under the prompt, above the completions
    assert box["y"] + box["height"] <= group.locator(".grpo-completions").bounding_box()["y"] + 1
    # the same picture above the prompt's history across steps
    _open(page, "inspect-history-panel", "One prompt across steps")
    pick(page, "inspect-prompt-row", "row 0 · 1 group")
    expect(page.locator('#prompt-history > .grpo-images img[alt="dataset row 0 image 1"]')).to_be_visible()

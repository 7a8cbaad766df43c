"""TRL's GRPO fields set on the Launch form reach the trainer: a run whose form says ``loss_type`` dr_grpo,
``importance_sampling_level`` sequence, an entropy bonus and a top-entropy quantile trains a tiny local Llama with
TRL for real, stores those values with the run, and its saved ``GRPOConfig`` (the adapter's ``training_args.bin``)
reads them back; and a reward plugin's ``log_extra`` columns are stored with each completion, its ``log_metric``
scalars recorded as ``reward_logs/<fn>/<name>``."""

from __future__ import annotations

from pathlib import Path

from app.tabs.launch.form import config_to_form, form_to_config
from grpo_core.run_config import RunConfig
from grpo_core.submit.queue import submit_run
from grpo_core.training.launcher import Launcher
from storage import RunStatus
from tests.helpers import EXAMPLE, tiny_config

FORM_VALUES = {"loss_type": "dr_grpo", "importance_sampling_level": "sequence", "entropy_coef": 0.01,
               "top_entropy_quantile": 0.8, "epsilon_high": 0.28, "scale_rewards": "batch"}


def test_a_run_launched_with_dr_grpo_and_sequence_level_trains_with_them(store, settings, tiny_model_dir):
    form = config_to_form(tiny_config(tiny_model_dir, max_steps=1))
    form.update(FORM_VALUES)
    from_form = form_to_config(form)  # the form's path: dropdowns and number boxes by field name
    config = RunConfig.model_validate({**from_form.model_dump(), "dataset_path": EXAMPLE})
    run = submit_run(store, config).run
    assert Launcher(store, settings).wait_idle(timeout_s=300), "the run did not finish"

    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error
    assert {name: final.config[name] for name in FORM_VALUES} == FORM_VALUES  # stored with the run

    import torch

    args = torch.load(Path(final.run_dir) / "adapter" / "training_args.bin", weights_only=False)
    assert type(args).__name__ == "GRPOConfig"
    assert {name: getattr(args, name) for name in FORM_VALUES} == FORM_VALUES
    keys = {point.key for point in store.metrics_since(run.id)}
    assert {"entropy_coef", "clip_ratio/high_mean", "grad_norm"} <= keys  # the entropy bonus is on


PLUGIN = '''
def judge(completions, log_extra=None, log_metric=None, **kwargs):
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    verdicts = ["has digit" if any(ch.isdigit() for ch in t) else "no digit" for t in texts]
    log_extra("verdict", verdicts)
    log_metric("digit_share", verdicts.count("has digit") / len(texts))
    return [1.0 if v == "has digit" else 0.0 for v in verdicts]
'''


def test_a_plugins_log_extra_is_stored_per_completion_and_its_log_metric_charted(store, settings, tiny_model_dir,
                                                                                tmp_path):
    plugin = tmp_path / "judge_reward.py"
    plugin.write_text(PLUGIN)
    config = tiny_config(tiny_model_dir, max_steps=2,
                         rewards=[{"rule": "plugin", "weight": 1.0, "params": {"target": f"{plugin}:judge"}}])
    run = submit_run(store, config).run
    assert Launcher(store, settings).wait_idle(timeout_s=300), "the run did not finish"
    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error

    shares = [p.value for p in store.metrics_since(run.id, keys=["reward_logs/judge/digit_share"])]
    assert len(shares) == 2 and all(0.0 <= share <= 1.0 for share in shares)
    for step in (1, 2):
        for group in store.groups_at(run.id, step):
            logged = group.extra["reward_columns"]
            assert sorted(logged) == [str(c.index) for c in group.completions]
            for completion in group.completions:
                verdict = logged[str(completion.index)]["verdict"]
                assert verdict == ("has digit" if completion.rewards["judge"] == 1.0 else "no digit")

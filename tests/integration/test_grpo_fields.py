"""TRL's GRPO fields set on the Launch form reach the trainer: a run whose form says ``loss_type`` dr_grpo,
``importance_sampling_level`` sequence, an entropy bonus and a top-entropy quantile trains a tiny local Llama with
TRL for real, stores those values with the run, and its saved ``GRPOConfig`` (the adapter's ``training_args.bin``)
reads them back."""

from __future__ import annotations

from pathlib import Path

from app.tabs.launch.form import config_to_form, form_to_config
from grpo_core.run_config import RunConfig
from grpo_core.submit.queue import submit_run
from grpo_core.training.launcher import Launcher
from storage import RunStatus
from tests.integration.test_worker import EXAMPLE, tiny_config

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

"""The engine: the torch/TRL library that the child jobs' workers and users' own training scripts share.

* :mod:`grpo_core.engine.policy_model`: loading the policy model and tokenizer, its end-of-sequence ids, the device;
* :mod:`grpo_core.engine.trainer`, :mod:`grpo_core.engine.trl_args`: TRL's ``GRPOTrainer`` built from a run config;
* :mod:`grpo_core.engine.recorder` (+ :mod:`~grpo_core.engine.group_capture`, :mod:`~grpo_core.engine.heartbeat`,
  :mod:`~grpo_core.engine.token_stats`): the callback that records a run into the store, through
  :mod:`grpo_core.engine.store_writer`'s writer thread; also what :mod:`grpo_core.integrations` runs in a user's
  script;
* :mod:`grpo_core.engine.reward_models`: reward models as TRL reward functions;
* :mod:`grpo_core.engine.trl_fields`: writes the snapshot of TRL's ``GRPOConfig`` fields.

The child processes themselves are ``python -m grpo_core.<subject>.worker`` (``training``, ``preflight``,
``try_model``, ``merge``, ``reward_check``, ``rescore``). The web process never imports this package
(``tests/unit/test_layering.py`` checks it); importing the package itself loads nothing heavy, each module imports
torch where it needs it.
"""

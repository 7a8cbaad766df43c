"""The worker side: what only a child process imports (torch, transformers, TRL, PEFT).

* :mod:`grpo_core.worker.train`: ``python -m grpo_core.worker.train RUN_ID``, trains one run;
* :mod:`grpo_core.worker.preflight`: ``python -m grpo_core.worker.preflight CONFIG``, samples a few groups;
* :mod:`grpo_core.worker.try_model`: ``python -m grpo_core.worker.try_model REQUEST --out RESULT``, samples the base
  model and the trained weights side by side;
* :mod:`grpo_core.worker.policy_model`: loading the policy model and tokenizer, its end-of-sequence ids, the device;
* :mod:`grpo_core.worker.trainer`, :mod:`grpo_core.worker.recorder`: TRL's ``GRPOTrainer`` and the callback that
  records it into the store, through :mod:`grpo_core.worker.store_writer`'s writer thread.

The web process never imports this package (``tests/unit/test_layering.py`` checks it); importing the package
itself loads nothing heavy, each module imports torch where it needs it.
"""

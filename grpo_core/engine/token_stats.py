"""Per-token values of the recorded completions, taken from TRL's own loss computation (no second forward pass).

TRL's ``GRPOTrainer._compute_loss`` runs the policy over each micro-batch of completions through
``_get_per_token_logps_and_entropies(..., compute_entropy=True)`` (TRL 1.x computes the entropies at every step), and
with ``beta`` > 0 reads the reference model's log-probabilities from ``inputs["ref_per_token_logps"]`` (computed
once per generation in ``_generate_and_score_completions``) to make ``per_token_kl`` with the k3 estimator
``exp(ref - logp) - (ref - logp) - 1``. :class:`TokenCapture` wraps those three methods on the trainer instance:

* ``_generate_and_score_completions``: a new training generation starts a new capture, and its output gets one more
  per-completion tensor, :data:`POSITION_KEY`, each completion's position in this process's generation batch.
  TRL shuffles and splits the batch into micro-batches (``shuffle_sequence_dict``, ``split_tensor_dict``), which
  carry the positions along like any other per-completion tensor;
* ``_compute_loss``: around one training micro-batch, keeps what ``_get_per_token_logps_and_entropies`` returned
  (rounded to float16, as plain Python lists) with the micro-batch's completion ids, the KL from its reference
  log-probabilities, and positions, the first time each completion is seen (with ``num_iterations`` > 1 it is
  trained on again, by a policy that has moved);
* ``_get_per_token_logps_and_entropies``: hands its result to the capture while ``_compute_loss`` runs.

:meth:`TokenCapture.attach` puts the values on the completions of the groups the
:class:`~grpo_core.engine.recorder.RunRecorder` records, with each token decoded (:func:`token_pieces`). The recorder
calls it on its writer thread, with the :meth:`TokenCapture.snapshot` it took on the training thread at the step's log
(a copy of one dict: the training thread does no decoding, and the writer thread runs no torch, whose CPU thread
pool a second calling thread makes contend with training: a 2.4x slower step on two cores); the decoding uses the capture's own copy of the tokenizer,
so that it never shares a tokenizer with TRL's generation on the training thread. Only the main
process captures, and only its own completions: with several processes those are the first of the gathered batch
(TRL's ``gather_object`` concatenates by rank), the other processes' completions get none. Evaluation batches are not
captured. KL is per token only when ``beta`` > 0 (without it TRL loads no reference model); it is ``None`` otherwise.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from storage import GroupRecord, TokenStats

POSITION_KEY = "grpo_dashboard_position"
"""The per-completion tensor added to TRL's generation batch: each completion's position in this process's batch."""

_MAX_SPLIT_TOKENS = 4
"""How many tokens a character split over several tokens (UTF-8 bytes of byte-level BPE) may span."""


def token_pieces(tokenizer: Any, ids: Sequence[int], cache: dict[int, tuple[str, bool]] | None = None) -> list[str]:
    """Each token of ``ids`` as text, special tokens included, so that ``"".join(pieces)`` reads as the completion.

    Tokens are decoded one by one; a character whose bytes span several tokens (a byte-level BPE splits é or an
    emoji) decodes to U+FFFD alone, so it is decoded over up to :data:`_MAX_SPLIT_TOKENS` tokens and put on the
    first of them, the others becoming ``""``. A SentencePiece word-start token (``▁word``) keeps its leading space.

    Args:
        tokenizer: a ``transformers`` tokenizer.
        ids: token ids.
        cache: each id's decoding alone and whether it is a SentencePiece word start that lost its space, kept
            across calls (a token decodes alone the same way every time; decoding one by one is most of the cost of a
            token record).
    """
    ids = [int(i) for i in ids]
    cache = {} if cache is None else cache
    new = sorted({i for i in ids if i not in cache})
    if new:
        decoded = tokenizer.batch_decode([[i] for i in new], skip_special_tokens=False,
                                         clean_up_tokenization_spaces=False)
        tokens = tokenizer.convert_ids_to_tokens(new)
        for i, piece, token in zip(new, decoded, tokens, strict=True):
            cache[i] = (piece, isinstance(token, str) and token.startswith("\u2581") and not piece.startswith(" "))
    # the first token keeps no space: a whole decoding drops the first word's
    pieces = [" " + piece if k and word_start else piece for k, (piece, word_start) in enumerate(cache[i] for i in ids)]
    backend = getattr(tokenizer, "_tokenizer", None)  # a fast tokenizer's Rust decoder: no Python per-call overhead
    if backend is not None and hasattr(backend, "decode"):
        def decode(span: list[int]) -> str:
            return backend.decode(span, skip_special_tokens=False)
    else:
        def decode(span: list[int]) -> str:
            return tokenizer.decode(span, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    k = 0
    while k < len(ids) - 1:
        # a split character: its first byte's token and the next one both decode alone to U+FFFD
        if "\ufffd" in pieces[k] and "\ufffd" in pieces[k + 1]:
            for end in range(k + 2, min(len(ids), k + _MAX_SPLIT_TOKENS) + 1):
                joined = decode(ids[k:end])
                if "\ufffd" not in joined:
                    pieces[k : end] = [joined] + [""] * (end - k - 1)
                    k = end - 1
                    break
        k += 1
    return pieces


def _private_copy(tokenizer: Any) -> Any:
    """A copy of ``tokenizer`` for the writer thread's decoding (a fast tokenizer's Rust object refuses to be used
    while TRL's generation changes its padding settings on the training thread: "Already borrowed"); the tokenizer
    itself when it cannot be copied."""
    try:
        return copy.deepcopy(tokenizer)
    except Exception:  # noqa: BLE001 - decoding with the shared one still works, only not concurrently
        return tokenizer


@dataclasses.dataclass
class _Captured:
    """One completion's values as TRL computed them, as plain Python (no tensor: the writer thread that decodes and
    stores them must not run torch, whose CPU thread pool it would contend for with training): ``ids`` and the
    float16-rounded ``logprobs``, ``kl`` (or ``None``) and ``entropy`` (or ``None``), one per position of the padded
    micro-batch row (T each); ``tokens``: how many of them TRL's ``completion_mask`` counts."""

    ids: list[int]
    tokens: int
    logprobs: list[float]
    kl: list[float] | None
    entropy: list[float] | None


class TokenCapture:
    """Keeps the per-token log-probability, KL and entropy TRL computes in its loss for each completion of the latest
    training generation, and puts them on the recorded groups (:meth:`attach`).

    Args:
        num_generations: group size G (groups are contiguous in TRL's batch).

    Install it on a ``GRPOTrainer`` with :meth:`install` (the main process only: on the others it leaves the trainer
    alone); :meth:`uninstall` restores TRL's methods.
    """

    _WRAPPED = ("_generate_and_score_completions", "_compute_loss", "_get_per_token_logps_and_entropies")

    def __init__(self, num_generations: int) -> None:
        self.num_generations = num_generations
        self.trainer = None
        self.tokenizer = None
        self.captured: dict[int, _Captured] = {}
        self.pieces: dict[int, tuple[str, bool]] = {}  # each token id decoded alone (token_pieces' cache)
        self._listening = False
        self._returned: tuple[torch.Tensor, torch.Tensor | None] | None = None

    # -------------------------------------------------------------------------------------------- installing
    def install(self, trainer) -> TokenCapture:
        """Wrap ``trainer``'s three methods (instance attributes; TRL's class is untouched). Does nothing on a process
        other than the main one. Returns itself."""
        if not trainer.accelerator.is_main_process:
            return self
        self.trainer = trainer
        processing = trainer.processing_class
        self.tokenizer = _private_copy(getattr(processing, "tokenizer", processing))  # a multimodal processor holds one
        generate = trainer._generate_and_score_completions
        compute_loss = trainer._compute_loss
        logps_and_entropies = trainer._get_per_token_logps_and_entropies

        def generate_wrapper(*args, **kwargs):
            return self._generated(generate(*args, **kwargs))

        def compute_loss_wrapper(model, inputs, *args, **kwargs):
            return self._loss(lambda: compute_loss(model, inputs, *args, **kwargs), inputs)

        def logps_wrapper(*args, **kwargs):
            result = logps_and_entropies(*args, **kwargs)
            if self._listening and kwargs.get("compute_entropy") and self._returned is None:
                self._returned = (result[0], result[1])
            return result

        trainer._generate_and_score_completions = generate_wrapper
        trainer._compute_loss = compute_loss_wrapper
        trainer._get_per_token_logps_and_entropies = logps_wrapper
        return self

    def uninstall(self) -> None:
        """Give the trainer back TRL's own methods (a bare trainer, as in ``benchmarks/bench_recording.py``)."""
        if self.trainer is not None:
            for name in self._WRAPPED:
                self.trainer.__dict__.pop(name, None)
        self.trainer = None
        self.captured = {}

    # ------------------------------------------------------------------------------------------------ capture
    def _generated(self, output: dict[str, Any]) -> dict[str, Any]:
        """After TRL generated and scored a batch: a training batch starts a new capture and gets positions."""
        if self.trainer is not None and self.trainer.model.training and "completion_ids" in output:
            ids = output["completion_ids"]
            self.captured = {}  # a new dict: a snapshot of the last generation keeps its own
            output[POSITION_KEY] = torch.arange(ids.size(0), device=ids.device)
        return output

    def _loss(self, compute_loss, inputs):
        """``compute_loss()`` (TRL's ``_compute_loss`` on ``inputs``), keeping the per-token values of a training
        micro-batch."""
        positions = inputs.get(POSITION_KEY)
        if positions is None or self.trainer is None or not self.trainer.model.training:
            return compute_loss()
        self._listening, self._returned = True, None
        try:
            loss = compute_loss()
        finally:
            self._listening = False
        if self._returned is not None:
            self._keep(inputs, positions, *self._returned)
            self._returned = None
        return loss

    @torch.no_grad()
    def _keep(self, inputs, positions: torch.Tensor, logps: torch.Tensor, entropies: torch.Tensor | None) -> None:
        """Keep one micro-batch's per-token values, (B, T) each, as the completions' rows of plain Python numbers
        (first sight only). A dozen small tensor operations and one copy each to Python lists: the decoding and
        the packing wait for the writer thread."""
        positions = positions.tolist()
        if all(p in self.captured for p in positions):
            return
        logps = logps.detach().float()
        kl = None
        reference = inputs.get("ref_per_token_logps")
        if self.trainer.beta != 0.0 and reference is not None:
            # TRL's per_token_kl (GRPOTrainer._compute_loss), from the same tensors. The estimator is >= 0; float32
            # rounding of exp(d) - d - 1 can leave a hair below 0 for d near 0, hence the clamp.
            delta = reference.detach().float() - logps
            kl = torch.exp(delta) - delta - 1
            if getattr(self.trainer.args, "use_bias_correction_kl", False):
                old = inputs.get("old_per_token_logps")
                log_ratio = logps - (logps if old is None else old.detach().float())
                if getattr(self.trainer, "importance_sampling_level", "token") == "sequence":
                    mask = inputs["completion_mask"].float()
                    log_ratio = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
                kl = kl * torch.exp(log_ratio)
            kl = kl.clamp(min=0.0).half().float().tolist()
        values = logps.half().float().tolist()
        entropy = None if entropies is None else entropies.detach().half().float().tolist()
        ids = inputs["completion_ids"].tolist()
        tokens = inputs["completion_mask"].sum(-1).tolist()
        for row, position in enumerate(positions):
            if position in self.captured:
                continue
            self.captured[position] = _Captured(
                ids=ids[row],
                tokens=int(tokens[row]),
                logprobs=values[row],
                kl=None if kl is None else kl[row],
                entropy=None if entropy is None else entropy[row],
            )

    # ---------------------------------------------------------------------------------------------- recording
    def snapshot(self) -> dict[int, _Captured]:
        """What is captured of the latest training generation so far, position -> its values: a copy of the dict
        (the values are shared: never changed once kept). Cheap: the training thread takes it at a log, and the
        writer thread gives it to :meth:`attach`."""
        return dict(self.captured)

    def stats_at(self, position: int, num_tokens: int | None = None,
                 snapshot: dict[int, _Captured] | None = None) -> TokenStats | None:
        """The :class:`~storage.TokenStats` of the completion at ``position`` of the latest training generation
        (``None`` when TRL has not trained on it yet, or it is another process's).

        ``num_tokens`` is the completion's length (the :class:`~grpo_core.engine.group_capture.RolloutTap`'s count);
        without it, the tokens of TRL's ``completion_mask`` (which ``mask_truncated_completions`` empties).
        ``snapshot``: a :meth:`snapshot` (default: the capture as it is now).
        """
        return self._stats_of((self.captured if snapshot is None else snapshot).get(position), num_tokens)

    def _stats_of(self, captured: _Captured | None, num_tokens: int | None) -> TokenStats | None:
        """:meth:`stats_at` of one completion's rows."""
        if captured is None or self.tokenizer is None:
            return None
        count = captured.tokens if num_tokens is None else min(int(num_tokens), len(captured.ids))

        def values(row: list[float] | None) -> list[float] | None:
            return None if row is None else row[:count]

        return TokenStats(
            pieces=token_pieces(self.tokenizer, captured.ids[:count], self.pieces),
            logprobs=values(captured.logprobs),
            kl=values(captured.kl),
            entropy=values(captured.entropy),
        )

    def attach(self, groups: Sequence[GroupRecord], snapshot: dict[int, _Captured] | None = None) -> list[GroupRecord]:
        """``groups`` (:func:`~grpo_core.engine.group_capture.groups_from_trl_logs` of the latest training generation,
        in TRL's order) with :attr:`~storage.CompletionRecord.token_stats` set on each completion that has them in
        ``snapshot`` (a :meth:`snapshot`; default: the capture as it is now)."""
        captured = self.captured if snapshot is None else snapshot
        attached = []
        for number, group in enumerate(groups):
            completions = []
            for completion in group.completions:
                stats = self._stats_of(captured.get(number * self.num_generations + completion.index),
                                       completion.num_tokens)
                completions.append(completion if stats is None else dataclasses.replace(completion, token_stats=stats))
            attached.append(dataclasses.replace(group, completions=completions))
        return attached

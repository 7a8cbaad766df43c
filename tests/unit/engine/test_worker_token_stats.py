"""The worker's per-token capture (grpo_core.engine.token_stats) without training: tokens decoded one by one (a
character split over several byte-level tokens kept whole, SentencePiece word starts keep their space), and the
captured rows of TRL's micro-batches put back on the completions of the recorded groups by their position."""

from __future__ import annotations

import pytest
import torch

from grpo_core.engine.token_stats import POSITION_KEY, TokenCapture, _Captured, token_pieces
from storage import CompletionRecord, GroupRecord

# A byte-level vocabulary: "é" is two tokens (its UTF-8 bytes), "<eos>" a special token, "▁hi" a SentencePiece word.
VOCAB = {0: b"a", 1: b" b", 2: "é".encode()[:1], 3: "é".encode()[1:], 4: b"<eos>", 5: b"<", 6: "▁hi".encode()}


class ByteTokenizer:
    """Decodes ids by joining their bytes (invalid UTF-8 -> U+FFFD), as a byte-level BPE tokenizer does."""

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=False):
        data = b"".join(VOCAB[i] for i in ids)
        return data.decode("utf-8", errors="replace").replace("\u2581", "")

    def batch_decode(self, batch, **kwargs):
        return [self.decode(ids, **kwargs) for ids in batch]

    def convert_ids_to_tokens(self, ids):
        return [VOCAB[i].decode("utf-8", errors="replace") for i in ids]


def test_token_pieces_read_as_the_completion():
    tokenizer = ByteTokenizer()
    ids = [0, 1, 2, 3, 5, 4]
    pieces = token_pieces(tokenizer, ids)
    assert pieces == ["a", " b", "é", "", "<", "<eos>"]  # é on its first byte's token, the second one empty
    assert "".join(pieces) == tokenizer.decode(ids)
    assert len(pieces) == len(ids)


def test_token_pieces_keep_a_lone_broken_byte_and_sentencepiece_spaces():
    tokenizer = ByteTokenizer()
    assert token_pieces(tokenizer, [0, 2]) == ["a", "\ufffd"]  # the completion ends inside a character
    assert token_pieces(tokenizer, [0, 6, 6]) == ["a", " hi", " hi"]
    assert token_pieces(tokenizer, []) == []


def test_token_pieces_decode_each_token_id_once_across_calls():
    calls: list[list[list[int]]] = []

    class Counting(ByteTokenizer):
        def batch_decode(self, batch, **kwargs):
            calls.append(batch)
            return super().batch_decode(batch, **kwargs)

    tokenizer, cache = Counting(), {}
    assert token_pieces(tokenizer, [0, 1, 0, 6], cache) == ["a", " b", "a", " hi"]
    assert token_pieces(tokenizer, [6, 1, 1], cache) == ["hi", " b", " b"]  # the first word keeps no space
    assert calls == [[[0], [1], [6]]]  # the second call decoded nothing new


def _capture(rows: dict[int, tuple[list[int], list[float]]], *, kl: bool = True) -> TokenCapture:
    capture = TokenCapture(num_generations=2)
    capture.tokenizer = ByteTokenizer()
    for position, (ids, logprobs) in rows.items():
        width = 4  # padded to the micro-batch's longest completion
        values = logprobs + [0.0] * (width - len(logprobs))
        capture.captured[position] = _Captured(
            ids=ids + [4] * (width - len(ids)),
            tokens=len(ids),  # TRL's completion_mask
            logprobs=values,
            kl=[-v / 4 for v in values] if kl else None,
            entropy=[-v * 2 for v in values],
        )
    return capture


def _groups() -> list[GroupRecord]:
    def completion(index: int, tokens: int | None) -> CompletionRecord:
        return CompletionRecord(index=index, text="", rewards={}, total_reward=None, advantage=None, num_tokens=tokens)

    return [
        GroupRecord(step=1, row_index=0, prompt="p0", completions=[completion(0, 2), completion(1, 3)]),
        GroupRecord(step=1, row_index=5, prompt="p5", completions=[completion(0, 1), completion(1, None)]),
    ]


def test_attach_puts_each_position_on_its_completion_cut_to_its_tokens():
    capture = _capture({
        0: ([0, 1], [-0.5, -1.0]),
        1: ([1, 1, 0], [-2.0, -0.25, -4.0]),
        2: ([0, 4], [-3.0, -0.125]),  # the tap counted 1 token: the completion's own length wins over the mask
        3: ([2, 3], [-1.0, -1.5]),  # no count from the tap: TRL's completion_mask
    })
    groups = capture.attach(_groups())
    stats = [c.token_stats for g in groups for c in g.completions]
    assert [s.pieces for s in stats] == [["a", " b"], [" b", " b", "a"], ["a"], ["é", ""]]
    assert stats[1].logprobs == [-2.0, -0.25, -4.0]
    assert stats[1].kl == [0.5, 0.0625, 1.0] and stats[1].entropy == [4.0, 0.5, 8.0]
    assert stats[2].logprobs == [-3.0]
    assert [g.prompt for g in groups] == ["p0", "p5"]  # the groups are otherwise unchanged


def test_attach_leaves_completions_it_has_not_seen():
    capture = _capture({1: ([0, 1, 0], [-1.0, -2.0, -0.5])}, kl=False)  # another process's completions, or not trained on yet
    groups = capture.attach(_groups())
    stats = [c.token_stats for g in groups for c in g.completions]
    assert stats[0] is None and stats[2] is None and stats[3] is None
    assert stats[1].kl is None and stats[1].logprobs == [-1.0, -2.0, -0.5]


def test_a_training_generation_starts_a_new_capture_and_gets_positions():
    capture = _capture({0: ([0], [-1.0])})
    capture.trainer = type("T", (), {"model": torch.nn.Linear(1, 1)})()
    output = capture._generated({"completion_ids": torch.zeros(3, 5, dtype=torch.long)})
    assert output[POSITION_KEY].tolist() == [0, 1, 2]
    assert capture.captured == {}
    capture.trainer.model.eval()  # an evaluation batch: not captured, the training capture kept
    capture.captured[0] = "kept"
    output = capture._generated({"completion_ids": torch.zeros(2, 5, dtype=torch.long)})
    assert POSITION_KEY not in output and capture.captured == {0: "kept"}


def _kept_capture() -> TokenCapture:
    """A capture on a stand-in trainer (beta 0.04, TRL's defaults otherwise), in a training generation."""
    capture = TokenCapture(num_generations=2)
    capture.tokenizer = ByteTokenizer()
    capture.trainer = type("T", (), {"model": torch.nn.Linear(1, 1), "beta": 0.04,
                                     "args": type("A", (), {})()})()
    capture._generated({"completion_ids": torch.zeros(4, 3, dtype=torch.long)})
    return capture


def test_the_loss_keeps_plain_values_once_and_a_snapshot_outlives_the_next_generation():
    capture = _kept_capture()
    logps = torch.tensor([[-0.5, -1.0, 0.0], [-2.0, -0.25, -4.0]])
    reference = logps + torch.tensor([[0.5, 0.0, 0.0], [0.0, 0.0, -1.0]])
    inputs = {"completion_ids": torch.tensor([[0, 1, 4], [1, 1, 0]]), "completion_mask": torch.tensor([[1, 1, 0],
                                                                                                         [1, 1, 1]]),
              "ref_per_token_logps": reference}
    capture._keep(inputs, torch.tensor([3, 0]), logps, -logps * 2)  # TRL shuffled: rows are positions 3 and 0
    capture._keep(inputs, torch.tensor([3, 0]), logps - 9.0, None)  # num_iterations > 1: seen before, not kept
    assert sorted(capture.captured) == [0, 3]
    assert all(type(v) is float for v in capture.captured[3].logprobs)  # plain numbers: no tensor for the writer
    snapshot = capture.snapshot()
    capture._generated({"completion_ids": torch.zeros(4, 3, dtype=torch.long)})  # the next generation
    assert capture.snapshot() == {}
    groups = capture.attach(_groups(), snapshot)
    stats = [c.token_stats for g in groups for c in g.completions]
    assert stats[1] is None and stats[2] is None  # positions 1 and 2 were not trained on
    assert stats[0].pieces == [" b", " b"] and stats[0].logprobs == [-2.0, -0.25]  # position 0, its 2 tokens
    assert stats[0].entropy == [4.0, 0.5]
    assert stats[0].kl == [0.0, 0.0]
    assert stats[3].pieces == ["a", " b"] and stats[3].logprobs == [-0.5, -1.0]  # position 3, the mask's 2 tokens
    assert stats[3].kl[0] == pytest.approx(0.1487, abs=1e-3) and stats[3].kl[1] == 0.0  # exp(.5) - .5 - 1

"""The Datasets tab never shows one file's preview under another's result: a failed Check clears it (a new upload
does not clear it by itself: that event could land after a quick Add and wipe its result), and the stored-dataset
picker starts with nothing picked (not a dataset beside an empty preview)."""

from __future__ import annotations

from app.server import build_blocks, create_context


def _fn(blocks, name: str):
    [fn] = [f.fn for f in blocks.fns.values()
            if getattr(f.fn, "__qualname__", "") == f"create_datasets_tab.<locals>.{name}"][:1]
    return fn


def test_a_failed_check_clears_the_preview(settings, tmp_path):
    ctx = create_context(settings)
    try:
        blocks = build_blocks(ctx)
        on_check = _fn(blocks, "on_check")
        good = tmp_path / "good.jsonl"
        good.write_text('{"prompt": "What is 1 + 1?", "answer": 2}\n')
        status, preview, _, _ = on_check(str(good), "", "", "", "")
        assert status.startswith("✅") and len(preview) == 1
        broken = tmp_path / "broken.jsonl"
        broken.write_text('{"prompt": "x"\n')
        status, preview, model_view, pictures = on_check(str(broken), "", "", "", "")
        assert status.startswith("❌") and preview.empty and model_view == "" and pictures == ""
        [picker] = [b for b in blocks.blocks.values() if getattr(b, "elem_id", None) == "dataset-pick"]
        assert picker.choices and picker.value is None
    finally:
        ctx.store.close()

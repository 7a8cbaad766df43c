"""Columnar uploads that are small on disk and huge once decoded ("decompression bombs"): a Parquet file whose
dictionary page repeats one long text, a run-length-encoded column of a billion numbers, an Arrow file in a zipped
``save_to_disk`` folder that repeats a dictionary entry. Each is refused from its encoded form, before it is decoded,
with a message naming the size; an honest file of the same shape still loads (grpo_core/datasets/columnar_budget.py)."""

from __future__ import annotations

import io
import json
import zipfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from gradio_client import handle_file

from grpo_core.datasets.columnar_budget import decoded_bytes
from grpo_core.datasets.formats import load_prompt_dataset
from grpo_core.datasets.library import _load_zipped_folder
from grpo_core.datasets.prompt_dataset import DatasetError

LIMIT = 50 * 2**20  # 50 MB of decoded values in these tests


def _repeated(values: list[str], rows: int, per_row: int = 1) -> pa.DictionaryArray:
    """``rows * per_row`` uses of ``values`` in turn, each entry stored once (written without decoding it)."""
    indices = pa.array([i % len(values) for i in range(len(values))] * (rows * per_row // len(values)), pa.int32())
    return pa.DictionaryArray.from_arrays(indices, pa.array(values))


def _repeated_text_parquet(path, rows: int, text_bytes: int) -> None:
    """A Parquet file whose rows all hold one ``text_bytes`` text twice, written from its encoded form."""
    text = "x" * text_bytes
    tags = pa.ListArray.from_arrays(pa.array(range(0, 2 * rows + 1, 2), pa.int32()), _repeated([text, "a"], rows, 2))
    table = pa.table({"prompt": _repeated([text], rows), "tags": tags, "answer": _repeated(["1"], rows)})
    pq.write_table(table, path, compression="zstd")


def test_a_parquet_dictionary_bomb_is_refused_before_it_is_decoded(tmp_path):
    bomb = tmp_path / "bomb.parquet"
    _repeated_text_parquet(bomb, rows=20_000, text_bytes=10_000)  # ~2 KB on disk, ~600 MB of text decoded
    assert bomb.stat().st_size < 50_000
    with pytest.raises(DatasetError, match="decodes to about .* MB"):
        load_prompt_dataset(bomb, max_decoded_bytes=LIMIT)
    honest = tmp_path / "honest.parquet"
    _repeated_text_parquet(honest, rows=200, text_bytes=1_000)
    rows = load_prompt_dataset(honest, max_decoded_bytes=LIMIT).rows
    assert len(rows) == 200 and rows[0]["prompt"] == "x" * 1_000 and rows[0]["tags"] == ["x" * 1_000, "a"]


def test_a_run_length_encoded_number_column_is_counted_from_the_footer(tmp_path):
    path = tmp_path / "numbers.parquet"
    rows = 3_000_000  # RLE keeps a run of equal numbers in a few bytes; decoded they are rows x (8 + a Python slot)
    pq.write_table(pa.table({"prompt": pa.array(["p"] * rows), "n": pa.array([7] * rows, pa.int64())}), path,
                   compression="zstd")
    with pytest.raises(DatasetError, match="decodes to about"):
        load_prompt_dataset(path, max_decoded_bytes=LIMIT)
    assert len(load_prompt_dataset(path, max_rows=10, max_decoded_bytes=LIMIT).rows) == 10


def test_an_arrow_dictionary_bomb_in_a_zipped_folder_is_refused(tmp_path):
    text = "y" * 100_000
    indices = pa.array([0] * 5_000, pa.int32())
    prompts = pa.DictionaryArray.from_arrays(indices, pa.array([text]))
    table = pa.table({"prompt": prompts})
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("data/data-00000-of-00001.arrow", sink.getvalue())
    with pytest.raises(DatasetError, match="decodes to about"):
        _load_zipped_folder(archive, "bomb.zip", max_upload_mb=10, mapping=None)  # limit: 5 x 10 MB


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_compressed_arrow_buffers_are_refused_before_they_are_decompressed(tmp_path, compression):
    folder = tmp_path / "compressed"
    folder.mkdir()
    table = pa.table({"prompt": pa.array(["z" * 1_000] * 50)})
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(str(folder / "data-00000-of-00001.arrow"), table.schema, options=options) as writer:
        writer.write_table(table)
    with pytest.raises(DatasetError, match="compressed Arrow buffers"):
        load_prompt_dataset(folder, max_decoded_bytes=LIMIT)
    plain = tmp_path / "plain"
    plain.mkdir()
    with pa.ipc.new_file(str(plain / "data-00000-of-00001.arrow"), table.schema) as writer:  # the file format too
        writer.write_table(table)
    assert len(load_prompt_dataset(plain, max_decoded_bytes=LIMIT).rows) == 50


def test_run_end_encoded_columns_are_refused(tmp_path):
    folder = tmp_path / "ree"
    folder.mkdir()
    column = pa.RunEndEncodedArray.from_arrays(pa.array([1_000_000], pa.int32()), pa.array(["z" * 1_000]))
    with pa.ipc.new_stream(str(folder / "data.arrow"), pa.schema([("prompt", column.type)])) as writer:
        writer.write_table(pa.table({"prompt": column}))
    with pytest.raises(DatasetError, match="run-end encoded"):
        load_prompt_dataset(folder, max_decoded_bytes=LIMIT)


def test_decoded_bytes_counts_each_use_of_a_dictionary_entry():
    array = pa.DictionaryArray.from_arrays(pa.array([0, 1, 1, None], pa.int32()), pa.array(["ab", "cdef"]))
    assert decoded_bytes(array, 10**9) == 4 * 8 + 2 + 4 + 4


def test_a_parquet_bomb_through_the_served_api_is_refused_and_the_server_answers(shared_dashboard, tmp_path):
    bomb = tmp_path / "bomb.parquet"
    _repeated_text_parquet(bomb, rows=200_000, text_bytes=20_000)  # ~12 GB of text decoded, a few KB uploaded
    alice = shared_dashboard.client("alice")
    with pytest.raises(Exception, match="decodes to about"):
        alice.predict(file=handle_file(str(bomb)), name="bomb", api_name="/add_dataset")
    assert "bomb" not in str(shared_dashboard.client("bob").predict(api_name="/list_datasets"))


def _image_zip(path, rows: str, members: dict) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data.jsonl", rows)
        for name, data in members.items():
            archive.writestr(name, data)
    return str(path)


def test_hostile_images_through_the_served_api_are_refused_with_their_place(shared_dashboard, tmp_path):
    from tests.helpers import png_bomb, png_bytes

    alice = shared_dashboard.client("alice")
    row = '{"prompt": "Colour?", "image": "%s"}\n'
    cases = [("bomb.png", {"bomb.png": png_bomb()}, "decompression bomb"),
             ("../../etc/passwd", {}, "not a plain relative name inside the zip"),
             ("fake.png", {"fake.png": b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"}, r"not an image of an accepted format")]
    for number, (named, members, reason) in enumerate(cases):
        upload = _image_zip(tmp_path / f"hostile{number}.zip", row % "ok.png" + row % named,
                            {"ok.png": png_bytes(), **members})
        with pytest.raises(Exception, match=rf"hostile{number}.zip/data.jsonl, row 2, column 'image': .*{reason}"):
            alice.predict(file=handle_file(upload), name=f"hostile {number}", api_name="/add_dataset")
    assert "hostile" not in str(shared_dashboard.client("bob").predict(api_name="/list_datasets"))


def test_a_plain_login_cannot_read_another_logins_images(shared_dashboard, tmp_path):
    from storage import Store, sqlite_url
    from tests.helpers import png_bytes

    upload = _image_zip(tmp_path / "pictures.zip", '{"prompt": "Colour?", "image": "red.png"}\n',
                        {"red.png": png_bytes((220, 20, 20))})
    dataset = shared_dashboard.client("alice").predict(file=handle_file(upload), name="alice pictures",
                                                       api_name="/add_dataset")
    store = Store(sqlite_url(shared_dashboard.data_dir / "grpo.db"))
    try:  # a run of alice's on it (claimed at once: never trained); its groups would name row 0
        run = store.create_run(name="alice vlm", config={"model": "/nonexistent", "dataset_id": dataset["id"]},
                               dataset_id=dataset["id"], max_steps=1, owner="alice")
        store.claim_run(run.id)
    finally:
        store.close()
    own = shared_dashboard.client("alice").predict(run.id, 0, "train", api_name="/run_images")
    assert len(own) == 1 and own[0]["data_url"].startswith("data:image/png;base64,")
    assert shared_dashboard.client("admin").predict(run.id, 0, "train", api_name="/run_images") == own
    with pytest.raises(Exception, match="bob may not see the images of run"):
        shared_dashboard.client("bob").predict(run.id, 0, "train", api_name="/run_images")


def test_one_image_file_named_many_ways_is_read_once_and_image_counts_are_bounded(tmp_path, monkeypatch):
    """A 31 KB zip whose rows name one 30 MB image file under 100 spellings (``a.png``, ``./a.png``, ``.//./a.png``)
    read and hashed the file once a spelling (2.3 s of the web process's CPU; a million rows, hours). Now a file is
    read once however it is spelled, a spelling outside the zip is still refused, and a dataset holds at most
    ``max_images`` distinct images and a zip at most ``MAX_ZIP_MEMBERS`` members."""
    import itertools
    import json

    from grpo_core.datasets import images as images_module
    from grpo_core.datasets import uploads
    from tests.helpers import png_bytes

    reads = []
    original = images_module._Decoder._read_inside
    monkeypatch.setattr(images_module._Decoder, "_read_inside",
                        lambda self, relative, refuse: reads.append(relative) or original(self, relative, refuse))
    spellings = ["".join(c) + "a.png" for n in range(6) for c in itertools.product(["./", ".//", "\\"], repeat=n)]
    spellings = [s for s in spellings if not s.startswith("\\")][:100]
    rows = "".join(json.dumps({"prompt": "Colour?", "image": s}) + "\n" for s in spellings)
    upload = _image_zip(tmp_path / "spellings.zip", rows, {"a.png": png_bytes() + b"\0" * (1 << 20)})
    dataset = _load_zipped_folder(upload, "spellings.zip", 200, None)
    assert len(dataset.rows) == 100 and len({tuple(row["images"]) for row in dataset.rows}) == 1
    assert len(reads) == 1, f"the one file was read {len(reads)} times"
    absolute = _image_zip(tmp_path / "absolute.zip", rows.splitlines()[0] + '\n{"prompt": "x", "image": "/a.png"}\n',
                          {"a.png": png_bytes()})
    with pytest.raises(DatasetError, match="row 2, column 'image': .*not a plain relative name"):
        _load_zipped_folder(absolute, "absolute.zip", 200, None)

    monkeypatch.setattr(uploads, "image_budget", lambda max_upload_mb: images_module.ImageBudget(max_images=3))
    members = {f"{i}.png": png_bytes((i, 0, 0)) for i in range(4)}
    many = _image_zip(tmp_path / "many.zip", "".join(f'{{"prompt": "p", "image": "{i}.png"}}\n' for i in range(4)),
                      members)
    with pytest.raises(DatasetError, match="row 4, column 'image': .*more than 3 distinct images"):
        _load_zipped_folder(many, "many.zip", 200, None)
    monkeypatch.setattr(uploads, "MAX_ZIP_MEMBERS", 4)
    with pytest.raises(DatasetError, match="the zip holds 5 files; the most a dataset's zip may hold is 4"):
        _load_zipped_folder(many, "many.zip", 200, None)
    opened = []  # counted from the end record, before zipfile builds an entry for each member
    monkeypatch.setattr(uploads.zipfile, "ZipFile", lambda *a, **k: opened.append(a) or pytest.fail("opened"))
    with pytest.raises(DatasetError, match="the zip holds 5 files"):
        _load_zipped_folder(many, "many.zip", 200, None)
    assert opened == []


def test_a_zip_that_cannot_be_unpacked_is_refused_without_the_servers_paths(shared_dashboard, tmp_path):
    """Members that the file system refuses (a name over 255 bytes, a file where a folder goes) are refused naming
    the member, and a ``state.json`` naming a missing data file names that file. Before the fix the ``OSError``
    (pyarrow's error) reached the page as is, with the server's private temp folder."""
    import tempfile

    alice = shared_dashboard.client("alice")
    for number, members in enumerate(({"x" * 300 + ".png": b"1"}, {"a": b"1", "a/b": b"2"})):
        upload = _image_zip(tmp_path / f"unpack{number}.zip", '{"prompt": "p"}\n', members)
        with pytest.raises(Exception, match=r"cannot be unpacked \((File name too long|Not a directory)\)") as error:
            alice.predict(file=handle_file(upload), name=f"unpack {number}", api_name="/add_dataset")
        assert tempfile.gettempdir() not in str(error.value) and "grpo-dashboard-" not in str(error.value)
    saved = tmp_path / "saved.zip"  # a save_to_disk folder whose state.json names a file it lacks
    with zipfile.ZipFile(saved, "w") as archive:
        archive.writestr("data-00000-of-00001.arrow", b"garbage")
        archive.writestr("state.json", '{"_data_files": [{"filename": "missing.arrow"}]}')
    with pytest.raises(DatasetError, match="missing.arrow, a data file state.json names, is not a file") as error:
        _load_zipped_folder(saved, "saved.zip", 200, None)
    assert tempfile.gettempdir() not in str(error.value)


def test_the_pictures_of_a_group_and_of_a_view_are_bounded_in_bytes(tmp_path, monkeypatch):
    """Every row may name the same large pictures at no cost to the dataset's pixel budget, and Inspect held each
    group's again: 16 noise pictures of 4096 x 4096 pixels (about 800 MB as PNG) in every row made a step's view
    gigabytes of HTML. Now ``run_images`` gives a group at most ``MAX_GROUP_IMAGE_BYTES`` and a view holds at most
    ``MAX_VIEW_IMAGE_BYTES`` of pictures, all its groups together."""
    import os
    from types import SimpleNamespace

    from PIL import Image

    from app.tabs.inspect import pictures as pictures_module
    from grpo_core.access.ownership import Actor
    from grpo_core.datasets.library import import_dataset
    from grpo_core.runs.images import group_images
    from grpo_core.settings import load_settings
    from storage import GroupRecord, Store, sqlite_url

    def noise() -> bytes:
        out = io.BytesIO()
        Image.frombytes("RGB", (64, 64), os.urandom(64 * 64 * 3)).save(out, format="PNG")
        return out.getvalue()

    members = {f"{i}.png": noise() for i in range(3)}
    size = max(len(data) for data in members.values())  # ~12 KB each
    names = '["0.png", "1.png", "2.png"]'
    upload = _image_zip(tmp_path / "noise.zip", "".join(f'{{"prompt": "p{i}", "images": {names}}}\n' for i in range(4)),
                        members)
    settings = load_settings(data_dir=tmp_path / "data")
    settings.ensure_dirs()
    store = Store(sqlite_url(tmp_path / "data" / "grpo.db"))
    try:
        info = import_dataset(store, settings, upload, source_name="noise.zip", owner="alice")
        run = store.create_run(name="vlm", config={"dataset_id": info.id}, dataset_id=info.id, max_steps=1,
                               owner="alice")
        assert len(group_images(store, run, 0, actor=Actor("alice"))) == 3
        assert len(group_images(store, run, 0, actor=Actor("alice"), max_bytes=2 * size + 10)) == 2
        monkeypatch.setattr(pictures_module, "MAX_VIEW_IMAGE_BYTES", 4 * size)
        groups = [GroupRecord(step=1, row_index=i, prompt=f"p{i}", completions=[]) for i in range(4)]
        shown = pictures_module.prompt_pictures(SimpleNamespace(store=store), run, groups, Actor("alice"))
        assert sum(html.count("<img ") for html in shown.values()) == 3 + 1  # 4 pictures fit the view's bytes
    finally:
        store.close()


def test_rows_that_each_bring_their_own_keys_are_refused_before_every_row_is_padded(shared_dashboard, tmp_path):
    """Every row of a dataset is given every column (``None`` where it lacks one), so a JSON Lines file whose rows
    each bring a key of their own grows as rows x columns: before the fix 3,000 such lines (83 KB) were accepted in
    2.6 s and 280 MB of the web process (a 1 MB file, its every gigabyte), and 100,000 keys in one row (1.3 MB) made
    a dataset whose column list every login's page read again at each load (0.8 MB, 0.9 s). Now more than
    ``MAX_COLUMNS`` columns, or ``MAX_CELLS`` cells, are refused before any row is padded, whatever the format."""
    sparse = tmp_path / "sparse.jsonl"
    sparse.write_text("".join(f'{{"prompt": "p", "k{i}": 1}}\n' for i in range(3_000)), encoding="utf-8")
    bob = shared_dashboard.client("bob")
    with pytest.raises(Exception, match="3,001 columns: at most 1,000"):
        bob.predict(file=handle_file(str(sparse)), name="sparse", api_name="/add_dataset")
    assert "sparse" not in str(bob.predict(api_name="/list_datasets"))
    cycling = tmp_path / "cycling.jsonl"  # 999 keys in turn, each row holding one: under the columns, over the cells
    cycling.write_text("".join(f'{{"prompt": "p", "k{i % 999}": 1}}\n' for i in range(20_000)), encoding="utf-8")
    with pytest.raises(DatasetError, match="over the limit of 10,000,000 cells"):
        load_prompt_dataset(cycling)
    wide = tmp_path / "wide.parquet"  # columns of nulls: a few KB on disk
    pq.write_table(pa.table({"prompt": ["p"] * 10, **{f"c{i}": pa.nulls(10) for i in range(1_500)}}), wide)
    with pytest.raises(DatasetError, match="1,501 columns"):
        load_prompt_dataset(wide)
    honest = tmp_path / "honest.jsonl"  # optional columns, as real datasets have them, still load
    rows = [{"prompt": f"p{i}", "answer": str(i), **({"hint": 1} if i % 7 else {})} for i in range(5_000)]
    honest.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert load_prompt_dataset(honest).columns == ["prompt", "answer", "hint"]


def test_a_system_prompt_written_into_every_row_is_bounded(shared_dashboard, tmp_path):
    """An upload's system prompt is written into every row of the stored dataset: before the fix 100 KB of system
    prompt on a 19 KB file of 1,000 prompts stored 95 MB (a few MB of request and upload filled any disk). Now a
    system prompt over ``MAX_SYSTEM_PROMPT_CHARS``, or adding more than ``MAX_SYSTEM_PROMPT_TOTAL`` characters to
    the rows, is refused with the reason; an ordinary one is kept."""
    from grpo_core.datasets.prompt_dataset import ColumnMapping

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"prompt": f"q{i}"}) + "\n" for i in range(1_000)), encoding="utf-8")
    bob = shared_dashboard.client("bob")
    with pytest.raises(Exception, match="the system prompt is 100,000 characters long: at most 20,000"):
        bob.predict(file=handle_file(str(rows)), name="amplified", system_prompt="S" * 100_000,
                    api_name="/add_dataset")
    assert "amplified" not in str(bob.predict(api_name="/list_datasets"))
    many = tmp_path / "many.jsonl"
    many.write_text("".join(json.dumps({"prompt": f"q{i}"}) + "\n" for i in range(20_000)), encoding="utf-8")
    with pytest.raises(DatasetError, match="over the limit of 268,435,456"):
        load_prompt_dataset(many, mapping=ColumnMapping(system_prompt="S" * 15_000))
    kept = load_prompt_dataset(rows, mapping=ColumnMapping(system_prompt="Answer with a number."))
    assert kept.rows[0]["prompt"][0] == {"role": "system", "content": "Answer with a number."}

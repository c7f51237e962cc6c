"""notebook_edit on a real sandbox: replace, insert and delete by id and index, read-before-edit, the dry
run's diff, and bad input that changes nothing."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from desktop_app.core import ToolInputError
from desktop_app.tools import FsRead, NotebookEdit, preview_diff
from desktop_app.tools._notebook import NotebookEditInput

read, nb_edit = FsRead(), NotebookEdit()


def notebook(minor: int = 5) -> dict:
    cells = [
        {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": "# Title"},
        {"cell_type": "code", "id": "load", "metadata": {}, "execution_count": 3,
         "outputs": [{"output_type": "stream", "name": "stdout", "text": "42\n"}], "source": "print(6 * 7)"},
        {"cell_type": "code", "id": "plot", "metadata": {}, "execution_count": 4, "outputs": [], "source": "x = 1"},
    ]
    if minor < 5:
        for c in cells:
            c.pop("id")
    return {"cells": cells, "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": minor}


def jupyter_text(nb: dict) -> str:
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


async def saved(sandbox, nb: dict, path: str = "nb.ipynb") -> None:
    await sandbox.write_file(path, jupyter_text(nb).encode())


async def loaded(sandbox, path: str = "nb.ipynb") -> dict:
    return json.loads(await sandbox.read_file(path))


async def test_replace_by_id_clears_the_old_outputs_and_keeps_jupyters_layout(sandbox, call):
    await saved(sandbox, notebook())
    await call(read, path="nb.ipynb")
    res = await call(nb_edit, path="nb.ipynb", cell_id="load", new_source="print('π')")
    assert not res.is_error, res.text_content
    assert res.text_content.startswith("Replaced the source of code cell load (index 1) of nb.ipynb (+")
    nb = await loaded(sandbox)
    cell = nb["cells"][1]
    assert (cell["source"], cell["outputs"], cell["execution_count"]) == ("print('π')", [], None)
    assert [c["id"] for c in nb["cells"]] == ["intro", "load", "plot"]
    # only that cell's lines changed: the file keeps the layout Jupyter writes, non-ASCII as is
    text = (await sandbox.read_file("nb.ipynb")).decode()
    assert text == jupyter_text(nb) and "π" in text
    assert "+   \"source\": \"print('π')\"" in res.details["diff"]


async def test_replace_can_change_a_cells_type_and_a_markdown_cell_has_no_outputs(sandbox, call):
    await saved(sandbox, notebook())
    await call(read, path="nb.ipynb")
    res = await call(nb_edit, path="nb.ipynb", index=2, new_source="Some *notes*", cell_type="markdown")
    assert not res.is_error, res.text_content
    cell = (await loaded(sandbox))["cells"][2]
    assert cell["cell_type"] == "markdown" and "outputs" not in cell and "execution_count" not in cell


async def test_insert_after_an_id_at_an_index_or_first_and_new_cells_get_ids_from_format_4_5(sandbox, call):
    await saved(sandbox, notebook())
    await call(read, path="nb.ipynb")
    assert not (await call(nb_edit, path="nb.ipynb", edit_mode="insert", cell_id="intro",
                           new_source="import os", cell_type="code")).is_error
    await call(read, path="nb.ipynb")
    assert not (await call(nb_edit, path="nb.ipynb", edit_mode="insert", new_source="top",
                           cell_type="raw")).is_error
    nb = await loaded(sandbox)
    assert [c["source"] for c in nb["cells"]] == ["top", "# Title", "import os", "print(6 * 7)", "x = 1"]
    new = nb["cells"][2]
    assert new["outputs"] == [] and new["execution_count"] is None and len(new["id"]) == 8
    await saved(sandbox, notebook(minor=4), "old.ipynb")
    await call(read, path="old.ipynb")
    assert not (await call(nb_edit, path="old.ipynb", edit_mode="insert", index=3, new_source="end",
                           cell_type="markdown")).is_error
    old = await loaded(sandbox, "old.ipynb")
    assert old["cells"][3]["source"] == "end" and "id" not in old["cells"][3]


async def test_delete_by_index_and_by_id(sandbox, call):
    await saved(sandbox, notebook())
    await call(read, path="nb.ipynb")
    res = await call(nb_edit, path="nb.ipynb", edit_mode="delete", index=0)
    assert res.text_content.startswith("Deleted markdown cell intro (index 0) of nb.ipynb")
    await call(read, path="nb.ipynb")
    await call(nb_edit, path="nb.ipynb", edit_mode="delete", cell_id="plot")
    assert [c["id"] for c in (await loaded(sandbox))["cells"]] == ["load"]


async def test_an_unread_or_changed_notebook_is_refused_and_left_as_it_was(sandbox, call):
    await saved(sandbox, notebook())
    before = await sandbox.read_file("nb.ipynb")
    res = await call(nb_edit, path="nb.ipynb", cell_id="load", new_source="x")
    assert res.is_error and "has not been read in this session" in json.loads(res.text_content)["error"]
    await call(read, path="nb.ipynb")
    await sandbox.write_file("nb.ipynb", before.replace(b"x = 1", b"x = 2"))
    res = await call(nb_edit, path="nb.ipynb", cell_id="load", new_source="x")
    assert res.is_error and "changed since you last read it" in json.loads(res.text_content)["error"]
    assert b"x = 2" in await sandbox.read_file("nb.ipynb")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ({"cell_id": "nope", "new_source": "x"}, "has no cell with id 'nope'"),
        ({"index": 3, "new_source": "x"}, "has 3 cells; index 3 is past the end"),
        ({"index": 4, "edit_mode": "insert", "cell_type": "code"}, "has 3 cells; index 4 is past the end"),
    ],
)
async def test_a_missing_cell_is_a_clear_refusal_that_changes_nothing(sandbox, call, args, words):
    await saved(sandbox, notebook())
    before = await sandbox.read_file("nb.ipynb")
    await call(read, path="nb.ipynb")
    res = await call(nb_edit, path="nb.ipynb", **args)
    body = json.loads(res.text_content)
    assert res.is_error and words in body["error"] and body["recommendations"]
    assert await sandbox.read_file("nb.ipynb") == before


async def test_a_file_that_is_not_a_notebook_is_refused(sandbox, call):
    await sandbox.write_file("data.json", b'{"rows": []}')
    await sandbox.write_file("broken.ipynb", b'{"cells": [')
    for path, words in (("data.json", "is not a Jupyter notebook of format 4"),
                        ("broken.ipynb", "is not valid notebook JSON"), ("none.ipynb", "file does not exist")):
        await call(read, path=path)
        res = await call(nb_edit, path=path, index=0, new_source="x")
        assert res.is_error and words in json.loads(res.text_content)["error"], path


@pytest.mark.parametrize(
    "raw",
    [{"path": "a.ipynb", "new_source": "x"},  # replace with no target
     {"path": "a.ipynb", "cell_id": "a", "index": 0, "new_source": "x"},  # two targets
     {"path": "a.ipynb", "edit_mode": "insert", "new_source": "x"},  # insert without a type
     {"path": "a.ipynb", "index": -1, "new_source": "x"},
     {"path": "a.ipynb", "index": 0, "edit_mode": "move"}],
)
def test_malformed_input_is_refused_by_the_schema(raw):
    with pytest.raises(ValidationError):
        NotebookEditInput.model_validate(raw)


async def test_the_dry_run_and_the_inbox_preview_show_the_diff_without_writing(sandbox, call, ctx):
    await saved(sandbox, notebook())
    before = await sandbox.read_file("nb.ipynb")
    await call(read, path="nb.ipynb")
    args = NotebookEditInput(path="nb.ipynb", cell_id="plot", new_source="y = 2")
    diff = await nb_edit.dry_run(args, ctx)
    assert '-   "source": "x = 1"' in diff and '+   "source": "y = 2"' in diff
    assert await preview_diff("notebook_edit", args.model_dump(), sandbox) == diff
    assert await sandbox.read_file("nb.ipynb") == before
    with pytest.raises(ToolInputError, match="has no cell with id 'gone'"):
        await nb_edit.dry_run(NotebookEditInput(path="nb.ipynb", cell_id="gone", new_source=""), ctx)

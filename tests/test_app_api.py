"""The documented API through gradio_client against a launched app.py.

Public endpoints: /check_dataset (the check report of an uploaded file, as
`python -m backend.data check --json` prints it) and /list_datasets. Every
UI event handler is private: not listed, not callable by clients.
"""

from __future__ import annotations

import pytest

from tests.browser.harness import AppProcess


@pytest.fixture(scope="module")
def served(tmp_path_factory, demo_model_dir, starts_processes):
    from backend.runs.workspace import Workspace

    ws = Workspace(tmp_path_factory.mktemp("api") / "ws").ensure()
    (ws.models_dir / "demo").symlink_to(demo_model_dir, target_is_directory=True)
    app = AppProcess(ws.root).start()
    yield app
    app.stop()


@pytest.fixture(scope="module")
def client(served):
    from gradio_client import Client

    return Client(served.url, verbose=False)


def test_only_the_documented_endpoints_are_public(client):
    endpoints = client.view_api(print_info=False, return_format="dict")
    assert set(endpoints["named_endpoints"]) == {"/check_dataset", "/list_datasets"}
    assert not endpoints["unnamed_endpoints"]


def test_check_dataset_reports_what_the_backend_reports(client, shared_data, served):
    from gradio_client import handle_file

    from backend.config import RunConfig
    from backend.data.checks import check_file
    from backend.data.identity_rows import identity_values
    from backend.data.prepare import load_model_tokenizer

    identity = shared_data / "identity.json"
    report = client.predict(handle_file(str(identity)), "demo", 256, api_name="/check_dataset")
    tokenizer = load_model_tokenizer("demo", served.workspace)
    # As `check --json` without options: {{name}} / {{author}} filled with RunConfig's identity values.
    expected = check_file(identity, tokenizer=tokenizer, model="demo", cutoff_len=256,
                          identity=identity_values(RunConfig())).to_dict()
    assert report["format"] == "alpaca" and report["rows"] == expected["rows"] == 91
    counts = {c["id"]: c["count"] for c in report["checks"]}
    assert counts == {c["id"]: c["count"] for c in expected["checks"]}
    assert counts["placeholder"] == 0 and counts["identity_fill"] > 0 and counts["conflicting_answers"] > 0
    assert report["token_lengths"]["cutoff_len"] == 256


def test_check_dataset_explains_a_bad_file(client, tmp_path):
    from gradio_client import handle_file

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instruction": "a", "output": "b"}\n{"instruction": \n', encoding="utf-8")
    report = client.predict(handle_file(str(bad)), "", 256, api_name="/check_dataset")
    schema = next(c for c in report["checks"] if c["id"] == "schema")
    assert schema["count"] == 1 and schema["examples"] == [1]


def test_list_datasets(client, served, shared_data):
    from backend.data.load import load_file_rows
    from backend.data.saved_datasets import save_dataset

    assert client.predict(api_name="/list_datasets") == []
    loaded = load_file_rows(shared_data / "identity.json")
    save_dataset(served.workspace / "datasets", "ident", loaded.rows, source={"path": "identity.json", "sha256": "-"},
                 fixes=[], rows_before=loaded.total)
    assert client.predict(api_name="/list_datasets") == ["ident"]

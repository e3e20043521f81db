"""Models on this machine (backend/models/local/): real folders laid out as Ollama, the Hugging Face
hub cache and LM Studio lay them out, the offline SmolLM2 GGUF file as the blob, and each kind of
bad input skipped with its reason; the command line in-process and one refusal as a process."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from backend.models.local import cli
from backend.models.local.fit import FIT_SETTINGS
from backend.models.local.places import Place, default_places
from backend.models.local.scan import cached_result, scan, scan_into_cache
from backend.models.local.walk import Limits
from tests.local_model_stores import (
    CPU_64,
    OLLAMA_DIGEST,
    hub_snapshot,
    lmstudio_folder,
    ollama_store,
    own_home,
    smollm2_gguf,
    write_manifest,
)

REPO = Path(__file__).resolve().parents[1]


def reasons(result) -> dict[str, str]:
    return {os.path.basename(path): message.id for path, message in result.skipped}


def test_an_ollama_store_lists_its_model_by_name_and_tag_read_from_the_gguf_header(tmp_path):
    store = ollama_store(tmp_path / "ollama", smollm2_gguf(tmp_path))
    result = scan([Place("ollama", store)], devices=CPU_64)
    assert result.skipped == [] and not result.stopped_early
    [model] = result.models
    assert (model.name, model.source, model.format) == ("smollm2:135m", "ollama", "gguf")
    assert model.path == str(store / "blobs" / OLLAMA_DIGEST.replace(":", "-"))
    assert model.architecture == "llama" and 130e6 < model.parameters < 140e6  # SmolLM2-135M
    assert (model.quantisation, model.licence, model.size) == ("Q4_1", "apache-2.0", smollm2_gguf(tmp_path).stat().st_size)
    assert model.trainable and model.reason is None
    assert model.fits is True and 0 < model.memory_gb < 64 and model.device == "CPU"
    assert not (tmp_path / "ollama" / "models").exists()  # nothing written into the tool's folder


def test_a_hub_cache_snapshot_of_the_demo_model_counts_its_safetensors_parameters(tmp_path, demo_model_dir):
    from safetensors import safe_open

    hub = tmp_path / "hub"
    snapshot = hub_snapshot(hub, demo_model_dir)
    (hub / "datasets--someone--rows" / "snapshots" / "1").mkdir(parents=True)  # not a model: not listed
    [model] = scan([Place("hf", hub)], devices=CPU_64).models
    with safe_open(demo_model_dir / "model.safetensors", framework="numpy") as weights:
        expected = sum(math.prod(weights.get_slice(k).get_shape()) for k in weights.keys())  # noqa: SIM118 (no __iter__)
    assert (model.name, model.path, model.architecture) == ("FineTuneStudio/demo-tiny", str(snapshot), "qwen2")
    assert model.parameters == expected and model.quantisation == "F32" and model.trainable
    assert model.size >= (demo_model_dir / "model.safetensors").stat().st_size  # the blobs behind the links


def test_an_lm_studio_folder_and_an_unsupported_architecture_shown_with_the_reason(tmp_path):
    import gguf
    import numpy as np

    root = lmstudio_folder(tmp_path / "lmstudio", smollm2_gguf(tmp_path))
    writer = gguf.GGUFWriter(str(root / "HuggingFaceTB" / "rwkv.gguf"), "rwkv6")
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    for step in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file, writer.close):
        step()
    models = {m.name: m for m in scan([Place("lmstudio", root)], devices=CPU_64).models}
    assert models["HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1"].trainable
    rwkv = models["HuggingFaceTB/rwkv"]
    assert not rwkv.trainable and rwkv.reason.id == "gguf.architecture" and rwkv.parameters == 32
    assert "rwkv6" in str(rwkv.reason) and "llama" in str(rwkv.reason)  # names the ones it reads


def test_broken_manifests_a_missing_blob_and_a_blob_that_is_not_gguf_are_skipped_with_reasons(tmp_path):
    store = ollama_store(tmp_path / "ollama", smollm2_gguf(tmp_path))
    write_manifest(store, "broken", "latest", None, text="{not json")
    write_manifest(store, "gone", "latest", [{"mediaType": "application/vnd.ollama.image.model",
                                              "digest": "sha256:" + "ee" * 32}])
    write_manifest(store, "nolayer", "latest", [{"mediaType": "application/vnd.ollama.image.template",
                                                 "digest": "sha256:" + "cd" * 32}])
    (store / "blobs" / ("sha256-" + "ff" * 32)).write_text("FROM llama3\n")
    write_manifest(store, "text", "latest", [{"mediaType": "application/vnd.ollama.image.model",
                                              "digest": "sha256:" + "ff" * 32}])
    (store / "blobs" / ("sha256-" + "aa" * 32)).write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 24)
    write_manifest(store, "cut", "latest", [{"mediaType": "application/vnd.ollama.image.model",
                                             "digest": "sha256:" + "aa" * 32}])
    result = scan([Place("ollama", store)], devices=CPU_64)
    assert [m.name for m in result.models] == ["smollm2:135m"]
    found = {path.split("/library/")[-1] if "/library/" in path else os.path.basename(path): message.id
             for path, message in result.skipped}
    assert found == {"broken/latest": "local.bad_manifest", "gone/latest": "local.missing_blob",
                     "nolayer/latest": "local.no_model_layer", "sha256-" + "ff" * 32: "gguf.not_gguf",
                     "sha256-" + "aa" * 32: "local.bad_gguf"}


def test_symlink_loops_are_seen_once_and_skipped(tmp_path):
    root = tmp_path / "models"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "back").symlink_to(root / "a")  # a folder that leads to its own ancestor
    (root / "self").symlink_to(root / "self")             # a link to itself: ELOOP
    (root / "a" / "m.gguf").symlink_to(smollm2_gguf(tmp_path))
    result = scan([Place("folder", root)], devices=CPU_64)
    assert [m.name for m in result.models] == ["a/m"]
    assert reasons(result) == {"back": "local.symlink_loop", "self": "local.symlink_loop"}


# Run by a user who cannot read a mode-000 folder: root reads any folder whatever its mode, so as
# root the child process gives up root (uid 65534, `nobody`) after its imports (the interpreter's
# files may lie where nobody reads) and before the scan, and the kernel refuses it the folder.
_UNREADABLE_SCAN = """
import json, os, sys
from pathlib import Path
from backend.models.local.places import Place
from backend.models.local.scan import scan
from tests.local_model_stores import CPU_64
scan([Place("folder", Path(sys.argv[2]))], devices=CPU_64)  # every import the scan makes, done as root
if sys.argv[3] == "drop":
    os.setgid(65534)
    os.setuid(65534)
result = scan([Place("folder", Path(sys.argv[1]))], devices=CPU_64)
print(json.dumps([[os.path.basename(path), message.id, str(message)] for path, message in result.skipped]))
"""


def test_a_folder_without_permission_is_skipped(subprocess_env):
    scratch = Path(tempfile.mkdtemp(prefix="unreadable-"))  # not under tmp_path: nobody must reach it
    try:
        scratch.chmod(0o755)
        locked = scratch / "models" / "locked"
        locked.mkdir(parents=True)
        locked.parent.chmod(0o755)
        locked.chmod(0)
        as_root = os.geteuid() == 0
        (scratch / "empty").mkdir()
        done = subprocess.run([sys.executable, "-c", _UNREADABLE_SCAN, str(locked.parent), str(scratch / "empty"),
                               "drop" if as_root else "keep"], env=subprocess_env, cwd=REPO, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        skipped = json.loads(done.stdout)
        assert [(name, message_id) for name, message_id, _ in skipped] == [("locked", "local.unreadable")]
        assert "Permission denied" in skipped[0][2]
    finally:
        (scratch / "models" / "locked").chmod(0o755)
        shutil.rmtree(scratch)


def test_ten_thousand_files_in_a_folder_stop_at_the_entry_limit_and_say_so(tmp_path):
    crowded = tmp_path / "crowded"
    crowded.mkdir()
    for index in range(10_000):
        (crowded / f"note-{index:05d}.txt").touch()
    result = scan([Place("folder", crowded)], Limits(entries_per_folder=2000), devices=CPU_64)
    assert result.stopped_early and reasons(result) == {"crowded": "local.too_many"}
    assert "2000" in str(result.skipped[0][1])


def test_the_time_budget_and_the_depth_limit_end_the_walk(tmp_path):
    deep = tmp_path / "deep"
    (deep / "1" / "2" / "3").mkdir(parents=True)
    (deep / "1" / "2" / "3" / "m.gguf").symlink_to(smollm2_gguf(tmp_path))
    shallow = scan([Place("folder", deep)], Limits(depth=1), devices=CPU_64)
    assert shallow.models == [] and reasons(shallow) == {"2": "local.too_deep"}
    spent = scan([Place("folder", deep)], Limits(seconds=-1), devices=CPU_64)
    assert spent.stopped_early and [m.id for _, m in spent.skipped] == ["local.time_budget"]
    missing = scan([Place("folder", tmp_path / "nowhere")], devices=CPU_64)
    assert [m.id for _, m in missing.skipped] == ["local.not_folder"]


def test_the_fit_uses_runconfigs_default_settings():
    from backend.config import RunConfig
    from backend.models.memory import config_estimate_kwargs

    defaults = config_estimate_kwargs(RunConfig(), "fp32", "cpu")
    assert {k: v for k, v in defaults.items() if k not in ("precision", "device_kind")} == FIT_SETTINGS


def test_the_places_follow_each_tools_environment_variables(tmp_path):
    env = {"HF_HOME": str(tmp_path / "hf"), "OLLAMA_MODELS": str(tmp_path / "o"), "LLAMA_CACHE": str(tmp_path / "l")}
    places = {p.source: p.root for p in default_places(env, home=tmp_path / "home")}
    assert places == {"hf": tmp_path / "hf" / "hub", "ollama": tmp_path / "o", "llamacpp": tmp_path / "l",
                      "lmstudio": tmp_path / "home" / ".cache" / "lm-studio" / "models"}
    assert default_places({"HF_HUB_CACHE": "/x"}, home=tmp_path)[0].root.as_posix() == "/x"


def test_the_cache_is_kept_per_set_of_places_and_a_refresh_rescans(tmp_path):
    store = ollama_store(tmp_path / "ollama", smollm2_gguf(tmp_path))
    places = [Place("ollama", store)]
    first = scan_into_cache(tmp_path / "ws", places, CPU_64)
    assert cached_result(tmp_path / "ws", places).models[0].name == first.models[0].name == "smollm2:135m"
    assert cached_result(tmp_path / "ws", [*places, Place("folder", tmp_path)]) is None  # other places
    ollama_store(store, smollm2_gguf(tmp_path), name="second", tag="q4")
    assert len(scan_into_cache(tmp_path / "ws", places, CPU_64).models) == 2


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home of this test's own: the real machine's stores are not what the CLI tests list."""
    home = own_home(tmp_path, monkeypatch)
    monkeypatch.setenv("OLLAMA_MODELS", str(ollama_store(tmp_path / "ollama", smollm2_gguf(tmp_path))))
    return home


def test_the_cli_lists_as_a_table_and_as_json_with_the_workspaces_folders(tmp_path, home, capsys):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    extra = tmp_path / "mine"
    (extra / "pub").mkdir(parents=True)
    (extra / "pub" / "notes.gguf").write_text("not a model")
    (workspace / "settings.json").write_text(json.dumps({"model_folders": [str(extra)]}))
    assert cli.main(["list", "--workspace", str(workspace)]) == 0
    out = capsys.readouterr().out
    assert "Ollama" in out and "smollm2:135m" in out and "llama" in out and "135M" in out and "yes" in out
    assert "notes.gguf is not a GGUF file" in out
    assert cli.main(["list", "--json", "--workspace", str(workspace)]) == 0
    [entry] = json.loads(capsys.readouterr().out)
    assert (entry["source"], entry["name"], entry["trainable"], entry["reason"]) == ("ollama", "smollm2:135m", True, None)
    assert set(entry) >= {"path", "size", "architecture", "parameters", "quantisation", "licence", "fits"}
    assert (workspace / ".cache" / "local_models.json").is_file()


def test_cli_refusals_are_a_sentence_and_exit_code_2(tmp_path, capsys):
    assert cli.main(["list", "--colour"]) == 2
    assert "Unrecognized arguments: --colour" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    assert cli.main(["list", "--workspace", str(tmp_path / "file")]) == 2
    assert "is not a folder this user can read" in capsys.readouterr().err


def test_a_refusal_as_a_process_exits_2_before_torch_or_transformers_load(subprocess_env):
    code = ("import runpy, sys\nsys.argv = ['backend.models', 'list', '--nope']\ntry:\n"
            "    runpy.run_module('backend.models', run_name='__main__')\nexcept SystemExit as end:\n"
            "    print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n    raise\n")
    done = subprocess.run([sys.executable, "-c", code], env=subprocess_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout.strip() == "[]"
    assert done.stderr.strip() == "Unrecognized arguments: --nope. See `python -m backend.models --help`."


def test_an_ollama_blob_converts_into_a_folder_named_by_its_own_metadata(tmp_path):
    """A blob is named by its digest: the workspace folder it converts into takes the header's
    general.name instead, and a file named by a person keeps its stem."""
    from backend.models.loading import gguf_model_name

    blob = ollama_store(tmp_path / "ollama", smollm2_gguf(tmp_path)) / "blobs" / OLLAMA_DIGEST.replace(":", "-")
    assert gguf_model_name(blob) == "Smollm2-135M-8k-Lc100K-Mix1-Ep2"
    assert gguf_model_name(smollm2_gguf(tmp_path)) == smollm2_gguf(tmp_path).stem


def test_the_scan_imports_transformers_only_while_no_other_thread_does():
    """The app's warm-up imports transformers in one thread while the scan starts in another: without the
    shared lock, one of them met a half-built transformers.utils and every later import in the app failed
    (the Train tab's hardware line showed an error)."""
    import threading

    from backend.models.import_lock import FIRST_IMPORT_LOCK
    from backend.models.local.fit import supported_gguf_architectures

    supported_gguf_architectures.cache_clear()
    done = threading.Event()
    with FIRST_IMPORT_LOCK:  # as the warm-up holds it while it imports
        threading.Thread(target=lambda: (supported_gguf_architectures(), done.set()), daemon=True).start()
        assert not done.wait(1.0)  # the scan waits for the lock
    assert done.wait(60) and "llama" in supported_gguf_architectures()

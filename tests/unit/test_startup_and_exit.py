"""The faces' start-up and exit helpers: import_ahead loads provider SDKs in the background, once, and
a missing one is no error; freeze_at_exit skips the last garbage collections."""

from __future__ import annotations

import sys
from types import SimpleNamespace

from needle_action.providers import registry


def test_import_ahead_loads_the_providers_module_in_a_background_thread(monkeypatch, tmp_path):
    (tmp_path / "needle_fake_sdk_mod.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.SPECS, "fakesdk", SimpleNamespace(factory="needle_fake_sdk_mod:Provider"))
    sys.modules.pop("needle_fake_sdk_mod", None)
    thread = registry.import_ahead(["fakesdk", "not-a-provider"])
    assert thread is not None
    assert thread.name == "needle-import-ahead"
    assert thread.daemon
    thread.join(10)
    assert sys.modules["needle_fake_sdk_mod"].LOADED


def test_import_ahead_swallows_a_missing_sdk_and_skips_unknown_names(monkeypatch):
    monkeypatch.setitem(registry.SPECS, "ghost", SimpleNamespace(factory="no_such_sdk_anywhere:Provider"))
    thread = registry.import_ahead(["ghost"])
    assert thread is not None
    thread.join(10)
    assert not thread.is_alive()
    assert "no_such_sdk_anywhere" not in sys.modules
    assert registry.import_ahead(["unknown"]) is None


def test_the_faces_register_the_exit_freeze_once(monkeypatch):
    """freeze_at_exit (needle_action/pipeline/measure.py) registers gc.freeze with atexit, once however
    often a face calls it (the CLI group runs it on every invocation in one test process)."""
    import atexit
    import gc

    from needle_action.pipeline import measure as pipeline

    registered = []
    monkeypatch.setattr(atexit, "register", lambda fn, *a, **k: registered.append(fn))
    monkeypatch.setattr(pipeline, "_freeze_registered", False)
    pipeline.freeze_at_exit()
    pipeline.freeze_at_exit()
    assert registered == [gc.freeze]

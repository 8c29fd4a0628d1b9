"""Connecting: a Ray flow started without ``ray.init()`` starts a local Ray with exactly one
log line; with Ray initialised (the user's ``ray.init``) it neither logs nor starts one."""

from __future__ import annotations

import logging

import pytest

from dataflow.on_ray import _connect

ray = pytest.importorskip("ray")


def _calls(monkeypatch: pytest.MonkeyPatch, initialised: bool) -> list[tuple]:
    calls: list[tuple] = []
    monkeypatch.setattr(ray, "is_initialized", lambda: initialised)
    monkeypatch.setattr(ray, "init", lambda *a, **kw: calls.append((a, kw)))
    return calls


def test_not_initialised_starts_a_local_ray_with_one_log_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls = _calls(monkeypatch, initialised=False)
    with caplog.at_level(logging.INFO, logger="dataflow"):
        assert _connect.connected_ray("RayMapData") is ray
    assert calls == [((), {})]  # a plain local ray.init()
    lines = [r.getMessage() for r in caplog.records if r.name == "dataflow"]
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert lines[0].startswith("RayMapData: Ray is not initialised; starting a local Ray"), lines
    assert "ray.init(address='auto')" in lines[0]


def test_the_users_ray_init_is_used_as_it_is(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls = _calls(monkeypatch, initialised=True)
    with caplog.at_level(logging.DEBUG, logger="dataflow"):
        assert _connect.connected_ray("RayRunner") is ray
    assert calls == [] and not [r for r in caplog.records if r.name == "dataflow"]

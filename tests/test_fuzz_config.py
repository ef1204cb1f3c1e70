"""Fuzz the pure-Python path (validate + upgrade, no workers) with mutated real model configs: the result is a
plan or a K2to3Error with one line, never another exception (docs/security.md)."""

from __future__ import annotations

import copy
import json
from typing import Any

import h5py
import pytest
from conftest import FIXTURES, ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from k2to3.core.validate import check_model_config
from k2to3.errors import K2to3Error
from k2to3.upgrade import upgrade


def _configs() -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    files = sorted((FIXTURES / "h5").glob("*.h5")) + sorted((ROOT.parent / "shared" / "corpus").rglob("*.h5"))[:20]
    out = []
    for p in files:
        with h5py.File(p, "r") as f:
            if "model_config" not in f.attrs:
                continue
            mc = f.attrs["model_config"]
            tc = f.attrs.get("training_config")
            out.append((json.loads(mc), json.loads(tc) if tc is not None else None))
    return out


CONFIGS = _configs()
WRONG = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
                  st.text(max_size=8), st.just("\u202e\U0001f4a9\x00"),
                  # fresh containers per draw: a shared st.just([]) put into one config and then mutated can end
                  # up containing itself in a later example (RecursionError, FlakyStrategyDefinition)
                  st.builds(list), st.builds(dict), st.builds(lambda: [[["x"]]]))


def _nodes(obj: Any, path: tuple = ()) -> list[tuple]:
    """Paths to every dict key / list index of a JSON value."""
    found = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            found.append((*path, k))
            found.extend(_nodes(v, (*path, k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found.append((*path, i))
            found.extend(_nodes(v, (*path, i)))
    return found


def _layer_names(cfg: dict) -> list[str]:
    """Names of the top model's layers that a rename/cycle mutation can still find (after other mutations)."""
    layers = cfg["config"].get("layers") if isinstance(cfg.get("config"), dict) else None
    return [n for lay in layers or [] if isinstance(lay, dict) and isinstance(lay.get("config"), dict)
            and isinstance(n := lay.get("name") or lay["config"].get("name"), str)] if isinstance(layers, list) else []


def _find(cfg: dict, name: str) -> dict:
    return next(x for x in cfg["config"]["layers"] if isinstance(x, dict) and isinstance(x.get("config"), dict)
                and (x.get("name") or x["config"].get("name")) == name)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[Any, Any]:
    mc, tc = copy.deepcopy(draw(st.sampled_from(CONFIGS)))
    for _ in range(draw(st.integers(1, 3))):
        paths = _nodes(mc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = mc
        for k in path[:-1]:
            parent = parent[k]
        key = path[-1]
        op = draw(st.sampled_from(["delete", "wrong", "truncate", "rename", "cycle", "huge"]))
        if op == "delete":
            del parent[key]
        elif op == "wrong":
            parent[key] = draw(WRONG)
        elif op == "truncate" and isinstance(parent[key], list):
            parent[key] = parent[key][: draw(st.integers(0, max(len(parent[key]) - 1, 0)))]
        elif op == "huge":
            parent[key] = draw(st.sampled_from([2**63, -1, 10**400 // 10**300, 1e308]))
        elif op in ("rename", "cycle") and _layer_names(mc):
            names = [n for n in _layer_names(mc) if isinstance(n, str)]
            if len(names) >= 2:
                a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
                if op == "rename":  # a layer renamed: what referenced it now dangles
                    lay = _find(mc, a)
                    lay["name"] = a + draw(st.sampled_from(["_x", "\u00e9", ""]))
                else:  # the first layer takes input from another one: a cycle or a self-loop
                    lay = _find(mc, a)
                    lay["inbound_nodes"] = [[[b, 0, 0, {}]]]
    return mc, tc


@pytest.mark.skipif(not CONFIGS, reason="no fixtures")
@settings(max_examples=1200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_mutated_configs_give_a_plan_or_one_clean_line(case):
    mc, tc = case
    try:
        check_model_config(mc, "model_config")
        plan = upgrade(mc, tc)
    except K2to3Error as exc:
        assert exc.line() and "\n" not in exc.line()
        return
    assert plan is not None

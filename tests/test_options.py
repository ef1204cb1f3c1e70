"""One options model (core/options.py): every option the command line's convert and verify take has a Python API
keyword of the same meaning, and `convert STORE/` passes exactly the model's store options to each artifact."""

from __future__ import annotations

import inspect

import typer

import k2to3
from k2to3.core.options import ConvertOptions, ExportOptions, VerifyOptions, fields_of, store_settings
from k2to3.interfaces.cli import app
from k2to3.interfaces.cli_options import flags

# what only the command line has: the report on stdout, and how a store is converted (src_root, jobs, executor)
CLI_ONLY = {"as_json", "src_root", "jobs", "executor", "ray_address"}
POSITIONAL = {"convert": {"src", "output"}, "verify": {"model"}, "export": {"model", "format", "output"}}


def cli_params(command: str) -> dict[str, list[str]]:
    click = typer.main.get_command(app)
    return {p.name: list(p.opts) for p in click.commands[command].params}


def test_every_cli_option_is_an_api_keyword():
    for command, fn in (("convert", k2to3.convert), ("verify", k2to3.verify), ("export", k2to3.export)):
        api = set(inspect.signature(fn).parameters)
        cli = set(cli_params(command)) - CLI_ONLY
        assert cli - api == set(), f"{command}: CLI options without an API keyword"
        assert POSITIONAL[command] <= api


def test_cli_flags_come_from_the_model():
    for command, cls in (("convert", ConvertOptions), ("verify", VerifyOptions), ("export", ExportOptions)):
        cli = cli_params(command)
        for f in fields_of(cls, command):
            assert cli[f.name] == list(flags(f)), (command, f.name)
    assert cli_params("convert")["inputs"] == ["--input"] and cli_params("convert")["sources"] == ["--src"]


def test_store_settings_are_the_options_marked_store():
    opts = ConvertOptions(src="a.h5", output="b.keras", rtol=1e-3, trust_bytecode=True, grads=True, fit_steps=2)
    assert store_settings(opts) == {"rtol": 1e-3, "atol": None, "backends": ("tensorflow", "torch", "jax"),
                                    "max_memory": None, "trust_bytecode": True, "export": None,
                                    "target_keras": None, "target_python": None}


def test_api_signature_shows_every_option_with_its_default():
    params = inspect.signature(k2to3.convert).parameters
    assert params["fit_steps"].default is None and params["grads_mode"].default == "train"
    assert params["backends"].default == ("tensorflow", "torch", "jax")
    assert list(params)[:2] == ["src", "output"] and {"progress", "pool"} <= set(params)

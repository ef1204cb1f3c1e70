"""One options model (core/options.py): every option the command line's convert and verify take has a Python API
keyword of the same meaning, and `convert STORE/` passes exactly the model's store options to each artifact."""

from __future__ import annotations

import inspect

import pytest
import typer

import k2to3
from k2to3.core.options import ConvertOptions, ExportOptions, VerifyOptions, fields_of, store_settings, validate
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


def _line(opts) -> str:
    from k2to3.errors import InputError

    with pytest.raises(InputError) as exc:
        validate(opts)
    return exc.value.line()


def test_one_validation_says_each_constraint_as_before(tmp_path):
    """core/options.py `validate`, which convert, verify and export call: each constraint of the fields' data, with
    the error line the command line has always printed."""
    y = tmp_path / "y.npz"
    y.write_bytes(b"")
    c = {"src": tmp_path / "a.h5", "output": tmp_path / "b.keras"}
    v = {"model": tmp_path / "m.keras", "reference": y}
    e = {**v, "format": "onnx", "output": tmp_path / "m.onnx"}
    cases = [
        (ConvertOptions(**c, targets=tmp_path / "no.npz", fit_steps=1),
         f"--targets {tmp_path / 'no.npz'}: no such file (pass an .npz with arrays y0, y1, ...)"),
        (ConvertOptions(**c, targets=y), "--targets applies to --fit-steps only (add --fit-steps N)"),
        (ConvertOptions(**c, loss="mse"), "--loss applies to --fit-steps and --grads only (add --fit-steps N or "
                                          "--grads)"),
        (ConvertOptions(**c, target_python=y), "--target-python applies to --target-keras only (add --target-keras "
                                               "3.N)"),
        (ConvertOptions(**c, fit_steps=-1), "--fit-steps -1: less than 0 (pass 0 or more)"),
        (ConvertOptions(**c, backends=("tf",)), "unknown backend 'tf' (choose from tensorflow,torch,jax)"),
        (VerifyOptions(**v, targets=y, fit_steps=0), "--targets applies to --fit-steps only (add --fit-steps N)"),
        (VerifyOptions(model=v["model"], reference=tmp_path / "x.h5"),
         f"--reference {tmp_path / 'x.h5'}: no such file (pass the Keras 2 .h5)"),
        (VerifyOptions(model=v["model"], golden=y, grads=True), "--grads with --golden: a golden file holds "
         "outputs, not a model to differentiate (pass --reference LEGACY.h5 with --grads)"),
        (VerifyOptions(model=v["model"], golden=y, fit_steps=2), "--fit-steps with --golden: a golden file holds "
         "outputs, not a model to train (pass --reference LEGACY.h5 with --fit-steps)"),
        (VerifyOptions(model=v["model"], golden=y, inputs=y), "--input with --golden: the golden file holds its "
                                                             "inputs (drop --input)"),
        (ExportOptions(**e, grads=True), "--grads and --fit-steps do not apply to export (run k2to3 verify for "
                                         "them)"),
        (ExportOptions(**e, fit_steps=3), "--grads and --fit-steps do not apply to export (run k2to3 verify for "
                                          "them)"),
    ]
    for opts, line in cases:
        assert _line(opts) == line, opts
    validate(ConvertOptions(**c, targets=y, fit_steps=1, loss="mse"))
    validate(ExportOptions(**e, fit_steps=0))


def test_cli_minimum_comes_from_the_field():
    click = typer.main.get_command(app)
    mins = {(c, p.name): getattr(p, "min", None) for c in ("convert", "verify", "export")
            for p in click.commands[c].params}
    assert {k: v for k, v in mins.items() if v is not None} == {("convert", "fit_steps"): 0, ("convert", "jobs"): 1,
                                                                ("verify", "fit_steps"): 0}

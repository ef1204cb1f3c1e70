"""Every input format behind one seam (h5py and json only; nothing in a file is run).

`open_input` detects a legacy artifact's format once, by content, and brings it to one in-memory artifact, the
Keras 2 HDF5 the rest of k2to3 reads (artifact.LegacyArtifact):

  HDF5 model.save            read as it is (artifact.py; Keras 1 and Theano files too: upgrade/keras1/)
  config + weights pair      a save_weights HDF5 with its to_json/to_yaml config beside it, merged (pairs.py)
  multi_gpu_model save       the template model inside the wrapper, written alone (multigpu.py)
  .keras archive, SavedModel the config read as data (artifact.read_keras_config); tf_keras re-saves it as HDF5 in
                             the tensorflow worker (pipeline/bridge.py), then `bridged` reads that file

`describe` reads the same formats as data alone, writing nothing (the audit's static verdict). A new format is one
detector here and one module beside it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from k2to3.core.findings import Finding
from k2to3.core.rules import builtin_code
from k2to3.formats import checkpoint, multigpu, pairs
from k2to3.formats.artifact import LegacyArtifact, memo_reads, read_artifact, read_keras_config, sniff
from k2to3.formats.optimizer_state import static_status

ARCHIVES = ("zip", "savedmodel")  # read by tf_keras (safe_mode=True), re-saved as HDF5


@dataclass
class Input:
    """A legacy artifact as convert and verify read it."""

    path: Path  # what the user named
    kind: str  # by content: hdf5, zip, savedmodel, dir, other
    h5: Path  # the Keras 2 HDF5 to read: the input, or the merged pair / template / re-save in the job directory
    artifact: LegacyArtifact | None = None  # None until an archive is bridged
    bridged: dict[str, Any] | None = None  # what the input was brought from (report.json input: format, pair, ...)

    @property
    def needs_bridge(self) -> bool:
        return self.artifact is None

    @property
    def pair(self) -> bool:
        return bool(self.bridged and "pair" in self.bridged)

    @property
    def multi_gpu(self) -> dict[str, Any] | None:
        return (self.bridged or {}).get("multi_gpu")

    @property
    def format(self) -> str:
        if self.bridged:
            return self.bridged["format"]
        assert self.artifact is not None
        return "HDF5 weights only" if self.artifact.model_config is None else "HDF5"

    def findings(self) -> list[Finding]:
        """What bringing the input to one HDF5 did (the multi-GPU wrapper removed)."""
        return [multigpu.finding(self.multi_gpu, builtin_code("multi_gpu_wrapper"))] if self.multi_gpu else []


def open_input(src: Path, work: Path, config: Path | None = None, weights_only_ok: bool = False) -> Input:
    """Detect the format of `src` and read it (an archive: detected only, see `bridged`). `weights_only_ok`: a
    save_weights file is built by a --src function, so it is not looked at as a pair or a multi-GPU save."""
    prefix = checkpoint.prefix_of(src)
    if prefix is not None:  # read in the tensorflow worker (pipeline/checkpoints.py), then `bridged`
        return Input(src, "tf_checkpoint", prefix)
    kind = sniff(src)
    if kind in ARCHIVES:
        return Input(src, kind, src)
    h5, bridged = src, None
    with memo_reads():  # detection and the read share one parse of the file
        if not weights_only_ok and kind == "hdf5":
            found = pairs.resolve(src, config)
            if found is not None:
                h5, bridged = pairs.bridge(found, work, config is None)
            else:
                template = multigpu.bridge(src, work)  # the template of a multi_gpu_model save
                if template is not None:
                    h5, bridged = template
        return Input(src, kind, h5, read_artifact(h5, weights_only_ok=weights_only_ok), bridged)


def bridged(inp: Input, h5: Path, info: dict[str, Any], weights_only_ok: bool = False) -> Input:
    """An archive after tf_keras re-saved it as HDF5 (`info`: the report's input section for it)."""
    return Input(inp.path, inp.kind, h5, read_artifact(h5, weights_only_ok=weights_only_ok), info)


@dataclass
class Description:
    """What an artifact holds, read as data (nothing written): the config that converts, with its training config,
    Keras version and parameter count; `optimizer`, the static verdict on its optimizer state (full-model HDF5)."""

    kind: str
    model_config: dict[str, Any]
    training_config: dict[str, Any] | None
    keras_version: str | None
    n_params: int | None
    optimizer: dict[str, Any] | None = None


def describe(path: Path) -> Description:
    """The config `convert` would upgrade for `path`: an archive's, a pair's, a multi-GPU save's template, or the
    HDF5 file's own. Raises the reader's errors (a weights-only file without its config, a hostile file)."""
    kind = "savedmodel" if path.is_dir() else sniff(path)
    if kind in ARCHIVES:
        cfg, version, _ = read_keras_config(path)
        return Description(kind, cfg, None, version, None)
    with memo_reads():
        pair = pairs.resolve(path, None)  # a save_weights file with its to_json/to_yaml config beside it
        if pair is not None:
            art = read_artifact(path, weights_only_ok=True)
            return Description(kind, pair.config, None, pair.keras_version, art.n_params)
        art = read_artifact(path)
        parallel = multigpu.detect(art.model_config)  # a multi_gpu_model save: the template is what converts
        if parallel is not None:
            return Description(kind, parallel["template_config"], art.training_config, art.keras_version,
                               art.n_params)
        assert art.model_config is not None
        return Description(kind, art.model_config, art.training_config, art.keras_version, art.n_params,
                           static_status(art))

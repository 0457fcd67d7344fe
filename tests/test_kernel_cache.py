"""numba's on-disk cache of the compiled kernels (:mod:`placement.kernels`): an entry that cannot be read is a
miss, not an error on every later call."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

numba = pytest.importorskip("numba")

from placement.kernels import compile_kernel, is_cached   # noqa: E402

SOURCE = "def weighted(x, y):\n    return 3 * x + y\n"


def _module(folder: Path):
    path = folder / "kernel_source.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location(f"kernel_source_{abs(hash(str(folder)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cache_files(kernel, suffix: str) -> list[Path]:
    """The files of ``kernel``'s entries in numba's cache, wherever numba keeps it (beside the source, or in the
    folder NUMBA_CACHE_DIR names)."""
    return sorted(Path(kernel._cache._cache_path).glob(f"kernel_source.*{suffix}"))


@pytest.mark.parametrize("damaged", [".nbc", ".nbi"])
@pytest.mark.parametrize("signature", [None, "int64(int64, int64)"])
def test_a_damaged_cache_entry_is_compiled_anew(tmp_path, damaged, signature):
    """The compiled code (.nbc) or the index (.nbi) cut short, as a full disk or a killed process leaves it:
    numba raised "pickle data was truncated" on every call until the file was removed. The kernel is
    compiled again (3·4 + 5 = 17), and its entry written anew, so that the next load finds it."""
    if numba.config.DISABLE_JIT:
        pytest.skip("numba's JIT is switched off (NUMBA_DISABLE_JIT): nothing is compiled or cached")
    module = _module(tmp_path)
    kernel = compile_kernel(module.weighted, signature=signature)
    assert kernel(4, 5) == 17
    files = _cache_files(kernel, damaged)
    assert files, "numba wrote no cache here"
    for path in files:
        path.write_bytes(path.read_bytes()[:40])
    assert compile_kernel(module.weighted, signature=signature)(4, 5) == 17
    if signature is None:
        assert is_cached(compile_kernel(module.weighted))
    assert compile_kernel(module.weighted, signature=signature)(2, 1) == 7


def test_the_compiling_line_says_every_run_compiles_where_nothing_can_be_cached(monkeypatch):
    """With a writable cache the line says once per install; where numba finds no folder to cache in (a read-only
    install and home), every run compiles, and the line said "once per install" all the same."""
    from placement import kernels

    assert kernels.compiling_note("the event engine", "it") == ("compiling the event engine with numba (once per "
                                                               "install; later runs load it from its cache)")
    monkeypatch.setattr(kernels, "can_cache", lambda function: False)
    assert kernels.compiling_note("the DP's kernels", "them") == (
        "compiling the DP's kernels with numba, as every run here does: numba finds no writable folder to cache "
        "them in (the environment variable NUMBA_CACHE_DIR can name one)")

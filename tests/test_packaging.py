"""The distribution installs as one import package, `tidegate`, from a wheel and editable."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import tidegate.spec

pytestmark = pytest.mark.processes

REPO = Path(__file__).resolve().parents[1]
OUR_FOLDERS = ("spec", "sim", "runtime", "replica")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(out),
            str(REPO),
        ],
        check=True,
    )
    (path,) = out.glob("tidegate-*.whl")
    return path


def test_wheel_holds_only_the_tidegate_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"tidegate", next(t for t in top if t.endswith(".dist-info"))}
    for folder in OUR_FOLDERS:
        assert f"tidegate/{folder}/__init__.py" in names
        assert f"tidegate/{folder}/py.typed" in names


def test_wheel_installs_and_imports_in_a_fresh_virtualenv(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    probe = (
        "import importlib.util, tidegate, tidegate.spec.frontier as f\n"
        "assert f.Antichain([3, 5]).elements == (3,)\n"
        f"assert all(importlib.util.find_spec(m) is None for m in {OUR_FOLDERS!r})\n"
        "print(tidegate.__file__)\n"
    )
    out = subprocess.run(
        [str(py), "-c", probe], check=True, capture_output=True, text=True, cwd=tmp_path
    )
    assert str(venv) in out.stdout
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert not any((site / folder).exists() for folder in OUR_FOLDERS)


def test_editable_install_maps_folders_onto_subpackages(tmp_path: Path) -> None:
    assert Path(tidegate.spec.__file__).resolve() == REPO / "spec" / "__init__.py"
    probe = f"import importlib.util; print([importlib.util.find_spec(m) for m in {OUR_FOLDERS!r}])"
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "[None, None, None, None]"

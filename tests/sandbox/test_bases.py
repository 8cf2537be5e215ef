"""The offline base-image table: name normalization, pattern lookup, the user file, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import bases
from sandbox.bases import BaseTableError, UnknownBaseImage, load_table, lookup, normalize


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("debian", "debian:latest"),
        ("docker.io/library/debian:bookworm", "debian:bookworm"),
        ("python:3.11-slim@sha256:abc", "python:3.11-slim"),
        (
            "ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624",
            "ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624",
        ),  # fmt: skip
        ("localhost:5000/img", "localhost:5000/img:latest"),
    ],
)
def test_normalize(name: str, expected: str) -> None:
    assert normalize(name) == expected


@pytest.mark.parametrize(
    ("name", "recipe"),
    [
        ("ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624", "t-bench-ubuntu"),
        ("ghcr.io/laude-institute/t-bench/python-3-13:20250620", "t-bench-python"),
        ("debian:bookworm-slim", "debian-bookworm"),
        ("debian:12", "debian-bookworm"),
        ("debian:trixie", "debian-trixie"),
        ("ubuntu:24.04", "ubuntu-on-bookworm"),
        ("ubuntu", "ubuntu-on-bookworm"),
        ("python:3.11-slim-bookworm", "python-bookworm"),
        ("python:3.13-slim", "python-trixie"),
        ("buildpack-deps:bookworm", "buildpack-deps-bookworm"),
        ("t1-forge/base:bookworm", "t1-seed"),
    ],
)
def test_shipped_table_maps_common_names(name: str, recipe: str) -> None:
    assert lookup(name, load_table("")).name == recipe


def test_unmapped_name_is_a_typed_error_naming_it() -> None:
    with pytest.raises(UnknownBaseImage) as e:
        lookup("nvidia/cuda:12.2-devel", load_table(""))
    assert e.value.name == "nvidia/cuda:12.2-devel"
    assert "FROM nvidia/cuda:12.2-devel: no offline base image" in str(e.value)


def test_user_table_adds_and_overrides(tmp_path: Path) -> None:
    user = tmp_path / "mine.toml"
    user.write_text(
        '[recipes.mine]\nsuite = "trixie"\npackages = ["git"]\n\n'
        '[[images]]\npattern = "ubuntu:*"\nrecipe = "mine"\n\n'
        '[[images]]\npattern = "nvidia/cuda:*"\nrecipe = "debian-bookworm"\n'
    )
    table = load_table(str(user))
    assert lookup("ubuntu:22.04", table).name == "mine"
    assert lookup("nvidia/cuda:12", table).name == "debian-bookworm"
    assert lookup("debian:bookworm", table).name == "debian-bookworm"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[recipes.x]\nsuite = "a"\nbogus = 1\n', "[recipes.x.bogus]"),
        ('[[images]]\npattern = "a:*"\nrecipe = "missing"\n', "no recipe 'missing'"),
        ("[recipes.x\n", "mine.toml"),
    ],
)
def test_malformed_user_table_names_file_and_field(tmp_path: Path, text: str, needle: str) -> None:
    user = tmp_path / "mine.toml"
    user.write_text(text)
    with pytest.raises(BaseTableError, match=None) as e:
        load_table(str(user))
    assert needle in str(e.value)


def test_recipe_key_follows_what_builds_the_root_only() -> None:
    table = load_table("")
    seed = table.recipes["t1-seed"]
    from tasks.environment import TOOL_PACKAGES

    assert set(TOOL_PACKAGES.values()) <= set(seed.all_packages())
    changed = seed.model_copy(update={"packages": [*seed.packages, "vim"]})
    same_root = seed.model_copy(update={"workdir": "/srv"})
    assert changed.key != seed.key and same_root.key == seed.key


def test_mmdebstrap_argv_has_suite_packages_and_chrooted_setup(tmp_path: Path) -> None:
    recipe = load_table("").recipes["python-bookworm"]
    argv = bases.mmdebstrap_argv(recipe, tmp_path / "root")
    assert argv[-2:] == ["bookworm", str(tmp_path / "root")]
    assert "--variant=minbase" in argv
    assert any(a.startswith("--include=") and "python3-pip" in a for a in argv)
    hooks = [a for a in argv if a.startswith("--customize-hook=")]
    assert len(hooks) == len(recipe.setup) and all('chroot "$1"' in h for h in hooks)

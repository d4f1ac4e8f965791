"""Builds the SQLite extension (the Rust crate alkstore-sqlite) with cargo
and puts it in the package: ``pip install ./packages/python``, ``python -m
build`` and an sdist all make a wheel with the library inside.

The Rust sources come from the repository this directory sits in
(``../../``), or, in an sdist, from the ``rust/`` copy the sdist command puts
beside this file (an sdist cannot reach outside its directory). Building
needs Rust's ``cargo``. The wheel holds a native library, so it is tagged for
this platform, for any Python 3: ``py3-none-<platform>``.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70
    from wheel.bdist_wheel import bdist_wheel

HERE = Path(__file__).resolve().parent
LIBRARY = {"darwin": "libalkstore_sqlite.dylib", "win32": "alkstore_sqlite.dll"}.get(
    sys.platform, "libalkstore_sqlite.so")
# What of the workspace the library needs: its crate, the shared core, the lock.
CRATES = {"core": ["Cargo.toml", "src"], "sqlite_ext": ["Cargo.toml", "src", "sql", "benches"]}


def workspace():
    """(the Cargo workspace to build in, whether it is the repository's)."""
    if (HERE / "rust" / "Cargo.toml").exists():
        return HERE / "rust", False
    repo = HERE.parent.parent
    if (repo / "Cargo.toml").exists() and (repo / "sqlite_ext").is_dir():
        return repo, True
    raise SystemExit("alkstore: no Rust sources to build the SQLite extension from "
                     "(build from the repository, or from an sdist made by it)")


class BuildWithLibrary(build_py):
    """build_py, then cargo builds the library into the package."""

    def run(self):
        super().run()
        root, in_repo = workspace()
        if shutil.which("cargo") is None:
            raise SystemExit("alkstore: building the SQLite extension needs Rust's cargo "
                             "(https://rustup.rs), or install a wheel")
        # The repository's lock pins every crate; the sdist's copy of it still
        # lists the crates of the whole workspace, which cargo drops.
        cmd = ["cargo", "build", "--release", "-p", "alkstore-sqlite",
               "--manifest-path", str(root / "Cargo.toml")]
        if in_repo:
            cmd.append("--locked")
        env = dict(os.environ)
        env.setdefault("CARGO_TARGET_DIR", str(root / "target"))
        subprocess.run(cmd, check=True, env=env)
        built = Path(env["CARGO_TARGET_DIR"]) / "release" / LIBRARY
        dest = Path(self.build_lib) / "alkstore"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, dest / LIBRARY)


class SdistWithRust(sdist):
    """An sdist that builds on its own: the crates the library needs go in."""

    def run(self):
        root, in_repo = workspace()
        if in_repo:
            out = HERE / "rust"
            shutil.rmtree(out, ignore_errors=True)
            for crate, parts in CRATES.items():
                for part in parts:
                    src = root / crate / part
                    if src.is_dir():
                        shutil.copytree(src, out / crate / part)
                    else:
                        (out / crate).mkdir(parents=True, exist_ok=True)
                        shutil.copy2(src, out / crate / part)
            shutil.copy2(root / "Cargo.lock", out / "Cargo.lock")
            manifest = (root / "Cargo.toml").read_text()
            manifest = re.sub(r"(?m)^members = \[.*\]$",
                              'members = ["core", "sqlite_ext"]', manifest)
            (out / "Cargo.toml").write_text(manifest)
        super().run()


class PlatformWheel(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(
    distclass=BinaryDistribution,
    cmdclass={"bdist_wheel": PlatformWheel, "build_py": BuildWithLibrary, "sdist": SdistWithRust},
)

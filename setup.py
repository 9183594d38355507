"""The build step that puts the top-level stacks.toml, apps/, presets/ and docs/ into the
wheel.

They stay at the top of the repository (where users read and edit them, and where a
checkout runs them from: stackrace.base.paths); a wheel carries a copy as package data at
stackrace/_shipped. Copying in `build_py` was chosen over the alternatives because:
- symlinks under src/ break in sdists, on Windows checkouts and with some tools;
- a `package-dir` mapping of the repository's root would make the root a package and
  sweep in whatever lies there;
- a copy here can leave out what builds and installs put beside the sources (Go's
  bin/, node_modules/, __pycache__), which a checkout that ran `stackrace install` has:
  those are this machine's, not the package's.
The sdist carries the same files (MANIFEST.in), so a wheel built from it is the same.
An editable install copies nothing: it runs from the checkout itself.

It also declares the one C extension, the engine's transport (engine/_cycle.c).
Everything else about the package is declared in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
SHIPPED = ("stacks.toml", "apps", "presets", "docs")  # docs: the README and --help link there
# made on this machine by builds and installs, never part of the package
LOCAL = shutil.ignore_patterns("bin", "node_modules", "__pycache__", "*.pyc", ".*")


class BuildWithShippedData(build_py):
    """build_py, plus stacks.toml, apps/, presets/ and docs/ copied to stackrace/_shipped."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "stackrace" / "_shipped"
        shutil.rmtree(target, ignore_errors=True)  # nothing stale from an earlier build
        target.mkdir(parents=True)
        for name in SHIPPED:
            src = HERE / name
            if src.is_dir():
                shutil.copytree(src, target / name, ignore=LOCAL)
            else:
                shutil.copy2(src, target / name)


# The engine's transport in C (src/stackrace/engine/_cycle.c: why, there), plain TCP and
# TLS, the latter through the system's OpenSSL (libssl-dev: scripts/apt-base.txt), the
# library Python's own ssl module links. An editable install builds it in place;
# scripts/setup.sh rebuilds it when the file changes.
CYCLE = Extension(
    "stackrace.engine._cycle",
    ["src/stackrace/engine/_cycle.c"],
    # included: its response framer, and its TLS context and OpenSSL helpers
    # and its HTTP/2 (libnghttp2, h2load's own framing: libnghttp2-dev)
    depends=[
        "src/stackrace/engine/_frame.h",
        "src/stackrace/engine/_tls.h",
        "src/stackrace/engine/_h2.h",
    ],
    libraries=["ssl", "crypto", "nghttp2"],
    extra_compile_args=["-O2"],
)

setup(cmdclass={"build_py": BuildWithShippedData}, ext_modules=[CYCLE])

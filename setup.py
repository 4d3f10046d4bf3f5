"""Build script: compiles every ``_speedups/*.pyx`` into ``gateway._speedups.<name>`` when it can.

With no C compiler (or ``GATEWAY_NO_EXTENSIONS=1``) the package installs without them and the pure-Python
twins are used.
"""

import glob
import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

TRUE = {"1", "true", "yes", "on"}
NO_EXTENSIONS = os.environ.get("GATEWAY_NO_EXTENSIONS", "").strip().lower() in TRUE


class OptionalBuildExt(build_ext):
    """Builds the extensions, but a failed compile only warns: the pure twins take over."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any compiler failure means "no extensions"
            print(f"warning: compiled speedups not built ({exc}); using pure Python", file=sys.stderr)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            print(f"warning: {ext.name} not built ({exc}); using pure Python", file=sys.stderr)


def extensions():
    if NO_EXTENSIONS:
        return []
    try:
        from Cython.Build import cythonize
        from setuptools import Extension
    except ImportError:
        print("warning: Cython missing; using pure Python", file=sys.stderr)
        return []
    exts = [
        Extension(f"gateway._speedups.{os.path.splitext(os.path.basename(p))[0]}", [p])
        for p in sorted(glob.glob("_speedups/*.pyx"))
    ]
    return cythonize(exts, compiler_directives={"language_level": "3"}, quiet=True)


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})

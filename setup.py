"""Packaging beyond what pyproject.toml can say.

The wheel holds the layer's `trunkwatch` package, the local runtime `trunkwatch_local`, and a
copy of the files the local runtime wires itself from (template.yaml and functions/), under
trunkwatch_local/project/, so an installed `trunkwatch` works outside a checkout. In a
checkout (editable install) the runtime finds the checkout's own template first.
"""

import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).parent
BUNDLED = ("template.yaml", "functions")


class BuildWithProject(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "trunkwatch_local" / "project"
        for name in BUNDLED:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(
                    source, target / name, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
                )
            else:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / name)


setup(
    packages=[
        *find_packages("layers/trunkwatch", include=["trunkwatch*"]),
        *find_packages(include=["trunkwatch_local*"]),
    ],
    package_dir={"trunkwatch": "layers/trunkwatch/trunkwatch"},
    # The status page's HTML, CSS and JS, served by the API function.
    package_data={"trunkwatch.api": ["static/*"]},
    cmdclass={"build_py": BuildWithProject},
)

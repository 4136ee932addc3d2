"""Workload 4: what a cold start imports, and how big the layer is.

Layer sizes: DomainLayer (every function; `layer_mb`) and ApiLayer (the API function's extra
dependencies; `api_layer_mb`), from `.aws-sam/build/<Layer>` when `sam build` made them;
otherwise built into a temporary directory by `layers/trunkwatch/Makefile` itself (arm64
wheels, pip needs PyPI). If that fails, they are estimated from the installed distributions
of the layers' requirements (minus what the Lambda runtime provides) plus trunkwatch.

Import time: in fresh interpreters, the median over `runs` rounds of timing `import boto3`
alone and of loading each handler module from its file (as Lambda does), with the
environment a deployed function has (template.yaml's Globals, the variables Powertools
reads to know it runs in Lambda, X-Ray tracing on as `Tracing: Active` sets it). One
untimed round first writes bytecode caches, as the layer ships compiled. The interpreter
is set up like Lambda's when it can be: python3.12 without site-packages, the layer built
by the same Makefile for this machine's architecture, and boto3 with its dependencies
where the Lambda runtime keeps them. Otherwise it is this virtualenv's interpreter, which
has more packages installed (X-Ray then patches some of them), and the summary says so.
The pipeline functions and the authorizer see DomainLayer only; the API function sees both
layers merged into one tree, as Lambda extracts them into /opt.
`-X importtime` gives the import time of each handler per top-level package.

The ratios are of wall-clock times. Each process also reports the CPU time its import took
(`handler_import_cpu_ratio`), which waiting for a busy machine's cores does not inflate;
`load_average` is the 1-minute load before and after the timed rounds.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from trunkwatch_local.template import find_template
from trunkwatch_local.wiring import read_wiring

HANDLERS = ("ingest", "evaluator", "notifier", "authorizer", "api")
# The functions that have ApiLayer on top of DomainLayer (template.yaml).
API_LAYER_FUNCTIONS = {"api"}
MIB = 1024 * 1024
# As layers/trunkwatch/Makefile says: what the python3.12 Lambda runtime ships.
RUNTIME_PROVIDED = {"boto3", "botocore", "s3transfer", "urllib3", "python-dateutil", "jmespath", "six"}
LAMBDA_PYTHON = "python3.12"
PYENV_VERSION = "3.12"  # pyenv picks the newest installed 3.12
LAMBDA_ENVIRONMENT = {
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
    "LAMBDA_TASK_ROOT": "/var/task",
    "_X_AMZN_TRACE_ID": "Root=1-00000000-000000000000000000000000;Parent=0000000000000000;Sampled=1",
}
_TIMED = """
import time
started, cpu = time.perf_counter(), time.process_time()
{body}
print(time.perf_counter() - started, time.process_time() - cpu)
"""
_LOAD_HANDLER = """
import importlib.util
spec = importlib.util.spec_from_file_location("app", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
"""


@dataclass
class Interpreter:
    command: list[str]
    path: str  # PYTHONPATH
    description: str
    api_path: str = ""  # PYTHONPATH of the API function (both layers), if other than `path`

    def path_for(self, function: str) -> str:
        return self.api_path if function in API_LAYER_FUNCTIONS and self.api_path else self.path


def _make_layer(project: Path, target: Path, arch: str, layer: str = "DomainLayer") -> None:
    """layers/trunkwatch/Makefile's build of `layer` into `target` for `arch` (aarch64, x86_64)."""
    subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(project / "layers" / "trunkwatch"),
            f"build-{layer}",
            f"ARTIFACTS_DIR={target}",
            f"ARCH={arch}",
            f"PYTHON={sys.executable}",
            f"RUNTIME_PYTHON={LAMBDA_PYTHON}"
            if shutil.which(LAMBDA_PYTHON)
            else f"RUNTIME_PYTHON={sys.executable}",
        ],
        env={**os.environ, "PYENV_VERSION": os.environ.get("PYENV_VERSION", PYENV_VERSION)},
        capture_output=True,
        check=True,
        timeout=600,
    )


def _venv_interpreter() -> Interpreter:
    return Interpreter([sys.executable], "", f"this virtualenv's python {platform.python_version()}")


@contextlib.contextmanager
def lambda_like_interpreter(project: Path) -> Iterator[Interpreter]:
    """python3.12 with the layers (this machine's architecture) and the runtime's boto3."""
    venv = _venv_interpreter()
    if not shutil.which(LAMBDA_PYTHON):
        yield venv
        return
    with tempfile.TemporaryDirectory(prefix="trunkwatch-lambda-") as scratch:
        layer, runtime = Path(scratch) / "layer", Path(scratch) / "runtime"
        api, both = Path(scratch) / "api", Path(scratch) / "both"
        try:
            _make_layer(project, layer, platform.machine())
            _make_layer(project, api, platform.machine(), "ApiLayer")
            # /opt of the API function: both layers extracted into one tree, in order.
            shutil.copytree(layer, both)
            shutil.copytree(api, both, dirs_exist_ok=True)
            boto3 = f"boto3=={metadata.version('boto3')}"
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                 "--no-compile", "--python-version", "3.12", "--only-binary=:all:",
                 "--target", str(runtime), boto3],
                capture_output=True,
                check=True,
                timeout=600,
            )  # fmt: skip
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
            yield venv
            return
        # The interpreter itself, not a version manager's shim in front of it.
        executable = subprocess.run(
            [LAMBDA_PYTHON, "-c", "import sys; print(sys.executable)"],
            env={**os.environ, "PYENV_VERSION": os.environ.get("PYENV_VERSION", PYENV_VERSION)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        yield Interpreter(
            [executable, "-S"],
            f"{layer / 'python'}{os.pathsep}{runtime}",
            f"{LAMBDA_PYTHON} -S, the layers built for {platform.machine()}, runtime {boto3}",
            f"{both / 'python'}{os.pathsep}{runtime}",
        )


def _environment(function: str, interpreter: Interpreter) -> dict[str, str]:
    """What Lambda sets for the function: template Globals, resolved with stand-in names."""
    wiring = read_wiring(find_template())
    refs = {
        "Table": "trunkwatch-table",
        "AlertTopic": "arn:aws:sns:us-east-1:123456789012:trunkwatch-alerts",
        "ApiTokensParameter": "/trunkwatch/api-tokens",
        "AWS::Region": "us-east-1",
        "AWS::StackName": "trunkwatch",
    }
    resolved = {name: wiring.resolve(value, refs) for name, value in wiring.environment.items()}
    return {
        **{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYENV_ROOT")},
        "PYENV_VERSION": os.environ.get("PYENV_VERSION", PYENV_VERSION),
        **({"PYTHONPATH": interpreter.path_for(function)} if interpreter.path_for(function) else {}),
        **LAMBDA_ENVIRONMENT,
        **{name: str(value) for name, value in resolved.items() if value is not None},
        "AWS_LAMBDA_FUNCTION_NAME": f"trunkwatch-{function}",
    }


def _body(what: str) -> str:
    if what == "boto3":
        return "import boto3"
    return _LOAD_HANDLER.format(path=str(find_template().parent / "functions" / what / "app.py"))


def _run(interpreter: Interpreter, what: str, *options: str, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*interpreter.command, *options, "-c", code],
        env=_environment(what, interpreter),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )


def _import_seconds(interpreter: Interpreter, what: str) -> tuple[float, float]:
    """(wall, CPU) seconds."""
    out = _run(interpreter, what, code=_TIMED.format(body=_body(what)))
    wall, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def _by_package(interpreter: Interpreter, function: str, top: int = 6) -> list[list[object]]:
    """[top-level package, seconds] of a handler's imports (self times summed), slowest first."""
    out = _run(interpreter, function, "-X", "importtime", code=_body(function))
    totals: dict[str, int] = {}
    for line in out.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s+(\S+)", line)
        if match:
            package = match[2].split(".")[0]
            totals[package] = totals.get(package, 0) + int(match[1])
    ranked = sorted(totals.items(), key=lambda item: -item[1])[:top]
    return [[package, round(us / 1e6, 4)] for package, us in ranked]


def import_times(interpreter: Interpreter, runs: int) -> dict[str, tuple[float, float]]:
    """What (boto3, each handler) -> medians of (wall, CPU) seconds over `runs` interleaved
    rounds."""
    subjects = ("boto3", *HANDLERS)
    for what in subjects:  # bytecode caches, as in the layer
        _import_seconds(interpreter, what)
    samples: dict[str, list[tuple[float, float]]] = {what: [] for what in subjects}
    for _ in range(runs):
        for what in subjects:  # interleaved, so drift hits all alike
            samples[what].append(_import_seconds(interpreter, what))
    return {
        what: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
        for what, values in samples.items()
    }


def _directory_sizes(root: Path) -> dict[str, int]:
    """Bytes under each top-level entry of `root`."""
    sizes: dict[str, int] = {}
    for path in root.rglob("*"):
        if path.is_file():
            top = path.relative_to(root).parts[0]
            sizes[top] = sizes.get(top, 0) + path.stat().st_size
    return sizes


def _installed_sizes(project: Path, layer: str) -> dict[str, int]:
    """Installed files of a layer's requirements and their dependencies (plus trunkwatch in
    DomainLayer; ApiLayer without what DomainLayer has)."""

    def closure(requirements: str) -> set[str]:
        wanted = [
            re.split(r"[\[=<>~! ;]", line.strip(), maxsplit=1)[0]
            for line in (project / "layers" / "trunkwatch" / requirements).read_text().splitlines()
            if line.strip() and not line.startswith("#")
        ]
        seen: set[str] = set()
        while wanted:
            name = wanted.pop().lower().replace("_", "-")
            if name in seen or name in RUNTIME_PROVIDED:
                continue
            try:
                dist = metadata.distribution(name)
            except metadata.PackageNotFoundError:
                continue
            seen.add(name)
            requires = [r for r in dist.requires or [] if "extra ==" not in r]
            wanted += [re.split(r"[\[=<>~! ;(]", r, maxsplit=1)[0] for r in requires]
        return seen

    domain = closure("requirements.txt")
    names = domain if layer == "DomainLayer" else closure("requirements-api.txt") - domain
    sizes = {
        name: sum(f.size or 0 for f in metadata.distribution(name).files or []) for name in sorted(names)
    }
    if layer == "DomainLayer":
        package = project / "layers" / "trunkwatch" / "trunkwatch"
        sizes["trunkwatch"] = sum(p.stat().st_size for p in package.rglob("*.py"))
    return sizes


def layer_size(project: Path, layer: str, build: bool) -> tuple[float, str, list[list[object]]]:
    """(MiB unzipped, where the figure comes from, largest top-level entries) of `layer`;
    estimated from the installed packages when `build` is False or the build fails."""
    built = project / ".aws-sam" / "build" / layer
    if not build:
        sizes, source = _installed_sizes(project, layer), "estimate from installed packages (no build asked)"
    elif built.is_dir():
        sizes, source = _directory_sizes(built / "python"), f"sam build output (.aws-sam/build/{layer})"
    else:
        with tempfile.TemporaryDirectory(prefix="trunkwatch-layer-") as scratch:
            try:
                _make_layer(project, Path(scratch), "aarch64", layer)
                sizes = _directory_sizes(Path(scratch) / "python")
                source = "built by layers/trunkwatch/Makefile (arm64 wheels)"
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as err:
                sizes = _installed_sizes(project, layer)
                source = f"estimate from installed packages (layer build failed: {type(err).__name__})"
    largest = sorted(sizes.items(), key=lambda item: -item[1])[:8]
    return (
        round(sum(sizes.values()) / MIB, 2),
        source,
        [[name, round(size / MIB, 2)] for name, size in largest],
    )


def cold_start(runs: int, build: bool = True) -> dict[str, Any]:
    """With `build` False nothing is built or downloaded: this virtualenv's interpreter, and
    the layer size estimated from the installed packages."""
    project = find_template().parent
    layer_mb, source, largest = layer_size(project, "DomainLayer", build)
    api_layer_mb, _, api_largest = layer_size(project, "ApiLayer", build)
    interpreters = lambda_like_interpreter(project) if build else contextlib.nullcontext(_venv_interpreter())
    with interpreters as interpreter:
        load = [os.getloadavg()[0]]
        times = import_times(interpreter, runs)
        load.append(os.getloadavg()[0])
        by_package = {h: _by_package(interpreter, h) for h in HANDLERS}
    boto3_s, boto3_cpu_s = times.pop("boto3")
    seconds = {h: wall for h, (wall, _) in times.items()}
    return {
        "boto3_import_s": round(boto3_s, 4),
        "handler_import_ratio": {h: round(s / boto3_s, 3) for h, s in seconds.items()},
        "layer_mb": layer_mb,
        "api_layer_mb": api_layer_mb,
        "handler_import_s": {h: round(s, 4) for h, s in seconds.items()},
        "boto3_import_cpu_s": round(boto3_cpu_s, 4),
        "handler_import_cpu_ratio": {h: round(cpu / boto3_cpu_s, 3) for h, (_, cpu) in times.items()},
        "load_average": [round(value, 2) for value in load],
        "import_s_by_package": by_package,
        "interpreter": interpreter.description,
        "layer_source": source,
        "layer_largest": largest,
        "api_layer_largest": api_largest,
        "runs": runs,
    }

"""Reading template.yaml: YAML with CloudFormation's short-form tags, each read as the dict
CloudFormation's JSON form and the SAM translator use (`!GetAtt A.B`: `{"Fn::GetAtt": ["A",
"B"]}`, `!Sub s`: `{"Fn::Sub": s}`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

import yaml

TEMPLATE_NAME = "template.yaml"
TEMPLATE_ENV = "TRUNKWATCH_TEMPLATE"

_FN_TAGS = frozenset(
    {
        "And", "Base64", "Cidr", "Equals", "FindInMap", "ForEach", "GetAZs", "If", "ImportValue",
        "Join", "Length", "Not", "Or", "Select", "Split", "Sub", "ToJsonString", "Transform",
    }
)  # fmt: skip


class TemplateError(ValueError):
    """template.yaml cannot be read as a CloudFormation template."""


# libyaml's parser when PyYAML has it (fifteen times faster: every local stack reads the template).
try:
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # a PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]


class _Loader(_SafeLoader):
    """SafeLoader plus the intrinsic tags; dates stay strings and duplicate keys are errors."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise TemplateError(f"duplicate key {key!r} at {_where(key_node)}")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _where(node: yaml.Node) -> str:
    return f"line {node.start_mark.line + 1}, column {node.start_mark.column + 1}"


def _node_value(loader: _Loader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(cast(yaml.ScalarNode, node))


def _intrinsic(loader: _Loader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value = _node_value(loader, node)
    if suffix in ("Ref", "Condition"):
        return {suffix: value}
    if suffix == "GetAtt":
        if isinstance(value, str):
            resource, _, attribute = value.partition(".")
            if not attribute:
                raise TemplateError(f"!GetAtt {value!r} needs Resource.Attribute at {_where(node)}")
            return {"Fn::GetAtt": [resource, attribute]}
        return {"Fn::GetAtt": value}
    if suffix in _FN_TAGS:
        return {f"Fn::{suffix}": value}
    raise TemplateError(f"unknown tag !{suffix} at {_where(node)}")


def _timestamp_as_text(loader: _Loader, node: yaml.Node) -> str:
    return str(_node_value(loader, node))  # CloudFormation reads `2010-09-09` as a string, not a date


_Loader.add_multi_constructor("!", _intrinsic)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)


def load_template(path: Path | str) -> dict[str, Any]:
    """The template at `path` as a dict, intrinsics in their JSON (`Ref`/`Fn::*`) form."""
    with open(path, encoding="utf-8") as f:
        try:
            data = yaml.load(f, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
        except yaml.YAMLError as err:
            raise TemplateError(f"{path}: not valid YAML: {err}") from None
        except TemplateError as err:
            raise TemplateError(f"{path}: {err}") from None
    if not isinstance(data, dict):
        raise TemplateError(f"{path}: a template is a mapping, found {type(data).__name__}")
    return data


def find_template() -> Path:
    """The project's template.yaml: `$TRUNKWATCH_TEMPLATE`, else the checkout this package
    lives in (an editable install), else the copy bundled into an installed package."""
    override = os.environ.get(TEMPLATE_ENV)
    if override:
        path = Path(override)
        if not path.is_file():
            raise TemplateError(f"{TEMPLATE_ENV}={override}: no such file")
        return path
    here = Path(__file__).resolve().parent
    for directory in (here.parent, here / "project"):
        if (directory / TEMPLATE_NAME).is_file() and (directory / "functions").is_dir():
            return directory / TEMPLATE_NAME
    raise TemplateError(f"no {TEMPLATE_NAME} in the checkout or the installed package; set {TEMPLATE_ENV}")

"""The alert rules file: YAML in, validated ``RulesConfig`` out, or a ``RulesError`` naming the line.

Format (``alerts/default_rules.yaml`` is the annotated reference)::

    version: 1
    defaults: {channels: [log], cooldown: 1h, severity: warning}
    delivery: {attempts: 5, backoff: 2s, max_backoff: 5m}
    channels:
      ops: {type: webhook, url: "${OPS_WEBHOOK_URL}", secret: "${OPS_WEBHOOK_SECRET:-}"}
    rules:
      - name: cost-per-hour-spike
        metric: cost_usd              # a TIMESERIES_METRICS name, a BUDGET_METRICS or RUN_STATE_METRICS one
        scope: {agent: "*"}           # "*" = one incident per agent (model, user, session, version); a value filters
        top_k: 0                      # judge the k scopes highest now (+ open incidents); 0 = all
        window: 1h                    # bucket length; also how often the value changes
        condition: {kind: anomaly, transform: log, min_ratio: 2}
        severity: critical            # info | warning | critical
        channels: [log, ops]
        min_runs: 0                   # buckets with fewer runs count as "no data"
        # the incident lifecycle (alerts/evaluator.py; all optional):
        for: 0s                       # the condition must hold this long before the incident opens
        keep_firing_for: 10m          # hold-down: stays firing this long after the condition last held
        resolve_after: 2              # ...and until this many windows in a row are clear
        repeat_interval: 6h           # re-notify a still-firing incident this often (0 = never)
        no_data: keep                 # keep (shown, silent) | notify (one "no data" message)

``cooldown`` is the older name of ``repeat_interval`` (same meaning; give one of them). An
incident never resolves on missing data: "no data" is a state of its own (see the evaluator).

Durations are seconds or ``30s``/``5m``/``1h``/``1d``/``1w``. String values may use
``${NAME}`` or ``${NAME:-default}`` (environment variables); an unset variable without a
default is an error naming the key. Unknown keys are errors (a typo must not silently turn
a rule off).
"""

from __future__ import annotations

import math
import os
import re
import typing
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from agentwatch_api.schemas import TIMESERIES_METRICS, AlertRuleOut
from agentwatch_platform.alerts.budget import BUDGET_METRICS
from agentwatch_platform.alerts.channels import CHANNEL_TYPES, Channel, DeliveryPolicy, LogChannel
from agentwatch_platform.alerts.detectors import AnomalyDetector, Detector, ThresholdDetector
from agentwatch_platform.alerts.errors import RulesError
from agentwatch_platform.alerts.run_scopes import RUN_SCOPE_KEYS, RUN_SCOPE_METRICS, RUN_SCOPE_ONLY
from agentwatch_platform.alerts.run_states import RUN_STATE_METRICS
from agentwatch_platform.alerts.version_rules import VERSION_METRICS
from agentwatch_platform.collector.query.ranges import MAX_BUCKETS

DEFAULT_RULES = Path(__file__).with_name("default_rules.yaml")
DERIVED_METRICS = BUDGET_METRICS  # the month's cost, not a bucket's (alerts/budget.py)
METRICS = (*TIMESERIES_METRICS, *RUN_SCOPE_ONLY, *DERIVED_METRICS, *RUN_STATE_METRICS, *VERSION_METRICS)
# figures now, not per bucket: no baseline to learn
THRESHOLD_ONLY = (*DERIVED_METRICS, *RUN_STATE_METRICS, *VERSION_METRICS)
SEVERITIES = ("info", "warning", "critical")
SCOPE_KEYS = ("project", "agent", "model", *RUN_SCOPE_KEYS, "version")
DETECTORS: dict[str, type] = {"threshold": ThresholdDetector, "anomaly": AnomalyDetector}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, None: 1}
_TOP_KEYS = ("version", "defaults", "delivery", "channels", "rules", "dashboard_url")
_LIFECYCLE_KEYS = ("for", "keep_firing_for", "resolve_after", "repeat_interval", "cooldown", "no_data")
_RULE_KEYS = (
    "name",
    "description",
    "metric",
    "scope",
    "window",
    "condition",
    "severity",
    "channels",
    "min_runs",
    "top_k",
    "enabled",
    *_LIFECYCLE_KEYS,
)
NO_DATA = ("keep", "notify")

KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Rule:
    name: str
    metric: str
    scope: dict[str, str]
    window_s: int
    condition: Detector
    severity: str
    channels: tuple[str, ...]
    cooldown_s: int
    description: str = ""
    min_runs: int = 0  # buckets with fewer runs are "no data" (a rate of 1 failure in 2 is noise)
    for_s: int = 0  # pending: the condition must hold this long before an incident opens
    keep_firing_for_s: int = 0  # hold-down after the condition last held
    resolve_after: int = 1  # clear windows in a row needed to resolve
    no_data: str = "keep"  # keep | notify
    top_k: int = 0  # judge only the k scopes with the highest value now (plus open incidents); 0 = all

    @property
    def repeat_interval_s(self) -> int:
        """Re-notify a still-firing incident this often; 0 = never (``cooldown`` in the file)."""
        return self.cooldown_s

    @property
    def group_by(self) -> str:
        """``agent``, ``model``, ``user``, ``session`` or ``version`` when the scope says ``"*"`` for it, else ``none``."""
        return next((k for k, v in self.scope.items() if v == "*"), "none")

    @property
    def series_group_by(self) -> str:
        """The key the rule's series is read per: ``group_by``, or ``version`` for a rule on a
        per-run metric that names one version (read per version, that version's group judged)."""
        if self.group_by == "none" and "version" in self.scope and self.metric not in VERSION_METRICS:
            return "version"
        return self.group_by

    def filters(self) -> dict[str, str]:
        return {k: v for k, v in self.scope.items() if v != "*"}

    def to_out(self) -> AlertRuleOut:
        return AlertRuleOut(
            name=self.name,
            metric=self.metric,
            scope=self.scope,
            window_s=self.window_s,
            condition={**self.condition.describe(), **({"min_runs": self.min_runs} if self.min_runs else {})},
            severity=self.severity,
            channels=list(self.channels),
            cooldown_s=self.cooldown_s,
            for_s=self.for_s,
            keep_firing_for_s=self.keep_firing_for_s,
            resolve_after=self.resolve_after,
            no_data=self.no_data,
            top_k=self.top_k,
        )


@dataclass(frozen=True)
class RulesConfig:
    rules: tuple[Rule, ...]
    channels: dict[str, Channel]
    delivery: DeliveryPolicy
    source: str = ""
    dashboard_url: str = ""  # base of the links in notifications ("" = no link)


def load_rules(path: str | Path | None = None, *, env: dict[str, str] | None = None) -> RulesConfig:
    """Read a rules file (the built-in defaults when ``path`` is empty)."""
    file = Path(path) if path else DEFAULT_RULES
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise RulesError(f"cannot read rules file: {exc.strerror or exc}", source=str(file)) from exc
    return parse_rules(text, source=str(file), env=env)


def parse_rules(text: str, *, source: str = "<rules>", env: dict[str, str] | None = None) -> RulesConfig:
    """Parse and validate rules YAML; every problem raises ``RulesError`` with line and key."""
    doc = _Doc(text, source, os.environ if env is None else env)
    return doc.build()


class _Doc:
    """One YAML document, with the line of every key, turned into a ``RulesConfig``."""

    def __init__(self, text: str, source: str, env: typing.Mapping[str, str]) -> None:
        self.source, self.env = source, env
        self.lines: dict[KeyPath, int] = {}
        try:
            node = yaml.compose(text, Loader=yaml.SafeLoader)
            self.data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise RulesError(
                f"not valid YAML: {getattr(exc, 'problem', None) or exc}",
                source=source,
                line=mark.line + 1 if mark else 0,
            ) from None
        if node is not None:
            self._index(node, ())

    # --- positions and errors --------------------------------------------------------------
    def _index(self, node: yaml.Node, path: KeyPath) -> None:
        self.lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                name = str(key.value)
                if name in seen:
                    self.lines[(*path, name)] = key.start_mark.line + 1
                    raise self.error((*path, name), "duplicate key")
                seen.add(name)
                self._index(value, (*path, name))
                self.lines[(*path, name)] = key.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._index(item, (*path, i))

    def error(self, path: KeyPath, problem: str) -> RulesError:
        line = next((self.lines[path[:n]] for n in range(len(path), -1, -1) if path[:n] in self.lines), 0)
        return RulesError(problem, source=self.source, line=line, key=_dotted(path))

    # --- typed getters ---------------------------------------------------------------------
    def mapping(self, value: Any, path: KeyPath, allowed: tuple[str, ...] | None = None) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(path, f"expected a mapping, got {_kind(value)}")
        for key in value:
            if allowed is not None and key not in allowed:
                raise self.error((*path, key), f"unknown key {key!r} (expected one of: {', '.join(allowed)})")
        return value

    def expand(self, value: Any, path: KeyPath) -> Any:
        """``${NAME}`` / ``${NAME:-default}`` in strings; an unset variable is an error."""
        if not isinstance(value, str):
            return value

        def replace(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in self.env:
                return self.env[name]
            if default is None:
                raise self.error(
                    path, f"environment variable {name} is not set (use ${{{name}:-default}} for a default)"
                )
            return default

        return _ENV.sub(replace, value)

    def string(self, value: Any, path: KeyPath) -> str:
        value = self.expand(value, path)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.error(path, f"expected a string, got {_kind(value)}")
        return str(value)

    def number(self, value: Any, path: KeyPath, *, integer: bool = False) -> float:
        value = self.expand(value, path)
        try:
            if isinstance(value, bool):
                raise ValueError
            number = float(value)
        except (TypeError, ValueError):
            raise self.error(path, f"expected a number, got {_kind(value)} {value!r}") from None
        if not math.isfinite(number) or (integer and number != int(number)):
            raise self.error(path, f"expected {'an integer' if integer else 'a finite number'}, got {value!r}")
        return number

    def boolean(self, value: Any, path: KeyPath) -> bool:
        value = self.expand(value, path)
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0", "on", "off"):
            return value.lower() in ("true", "yes", "1", "on")
        if not isinstance(value, bool):
            raise self.error(path, f"expected true or false, got {value!r}")
        return value

    def duration(self, value: Any, path: KeyPath) -> float:
        value = self.expand(value, path)
        if isinstance(value, int | float) and not isinstance(value, bool):
            seconds = float(value)
        else:
            match = _DURATION.match(str(value)) if isinstance(value, str) else None
            if match is None:
                raise self.error(path, f"expected a duration like 30s, 5m, 1h, 1d or seconds, got {value!r}")
            seconds = float(match.group(1)) * _UNITS[match.group(2)]
        if seconds < 0 or not math.isfinite(seconds):
            raise self.error(path, f"duration must be >= 0, got {value!r}")
        return seconds

    def strings(self, value: Any, path: KeyPath) -> tuple[str, ...]:
        if isinstance(value, str):
            return (self.string(value, path),)
        if not isinstance(value, list):
            raise self.error(path, f"expected a list of strings, got {_kind(value)}")
        return tuple(self.string(v, (*path, i)) for i, v in enumerate(value))

    def string_map(self, value: Any, path: KeyPath) -> dict[str, str]:
        return {str(k): self.string(v, (*path, k)) for k, v in self.mapping(value, path).items()}

    def choice(self, value: Any, path: KeyPath, choices: tuple[str, ...]) -> str:
        text = self.string(value, path)
        if text not in choices:
            raise self.error(path, f"must be one of {', '.join(choices)}, not {text!r}")
        return text

    # --- dataclass builder (channels, conditions, delivery) --------------------------------
    def dataclass(self, cls: type, value: Any, path: KeyPath, *, skip: tuple[str, ...] = ()) -> Any:
        """Build a frozen dataclass from a mapping, by field type; ``*_s`` fields take durations."""
        hints = typing.get_type_hints(cls)
        spec = {f.metadata.get("key", f.name.removesuffix("_s")): f for f in fields(cls) if f.init}
        data = self.mapping(value, path, (*spec, *skip))
        kwargs: dict[str, Any] = {}
        for key, f in spec.items():
            if key not in data:
                if f.default is MISSING and f.default_factory is MISSING:
                    raise self.error(path, f"missing required key {key!r}")
                continue
            kwargs[f.name] = self._typed(hints[f.name], data[key], (*path, key), is_duration=f.name.endswith("_s"))
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise self.error(path, str(exc)) from None

    def _typed(self, hint: Any, value: Any, path: KeyPath, *, is_duration: bool) -> Any:
        if is_duration:
            return self.duration(value, path)
        if hint is bool:
            return self.boolean(value, path)
        if hint is int:
            return int(self.number(value, path, integer=True))
        if hint is float:
            return self.number(value, path)
        if hint == tuple[str, ...]:
            return self.strings(value, path)
        if hint == dict[str, str]:
            return self.string_map(value, path)
        return self.string(value, path)

    # --- the document ----------------------------------------------------------------------
    def build(self) -> RulesConfig:
        top = self.mapping(self.data, (), _TOP_KEYS)
        if top.get("version", 1) not in (1, "1"):
            raise self.error(("version",), f"unsupported version {top['version']!r} (this agentwatch reads version 1)")
        channels = self._channels(top.get("channels"))
        defaults = self.mapping(
            top.get("defaults"), ("defaults",), ("channels", "severity", "window", *_LIFECYCLE_KEYS)
        )
        rules_value = top.get("rules")
        if not isinstance(rules_value, list) or not rules_value:
            raise self.error(("rules",), "expected a non-empty list of rules")
        rules: dict[str, Rule] = {}
        for i, item in enumerate(rules_value):
            rule = self._rule(item, ("rules", i), defaults, channels)
            if rule is not None and rule.name in rules:
                raise self.error(("rules", i, "name"), f"duplicate rule name {rule.name!r}")
            if rule is not None:
                rules[rule.name] = rule
        delivery = self.dataclass(DeliveryPolicy, top.get("delivery"), ("delivery",))
        dashboard_url = self.string(top.get("dashboard_url", ""), ("dashboard_url",)).rstrip("/")
        return RulesConfig(tuple(rules.values()), channels, delivery, self.source, dashboard_url)

    def _channels(self, value: Any) -> dict[str, Channel]:
        channels: dict[str, Channel] = {"log": LogChannel()}
        for name, spec in self.mapping(value, ("channels",)).items():
            path: KeyPath = ("channels", name)
            if not _NAME.match(str(name)):
                raise self.error(path, f"bad channel name {name!r} (letters, digits, . _ -)")
            kind = self.choice(self.mapping(spec, path).get("type"), (*path, "type"), tuple(CHANNEL_TYPES))
            channel = self.dataclass(CHANNEL_TYPES[kind], spec, path, skip=("type",))
            for key in ("url", "host"):
                if getattr(channel, key, None) == "":
                    raise self.error((*path, key), "is empty (an environment variable without a value?)")
            channels[str(name)] = channel
        return channels

    def _rule(self, value: Any, path: KeyPath, defaults: dict[str, Any], channels: dict[str, Channel]) -> Rule | None:
        data = {**defaults, **self.mapping(value, path, _RULE_KEYS)}
        if not self.boolean(data.get("enabled", True), (*path, "enabled")):
            return None
        name = self.string(data.get("name", ""), (*path, "name"))
        if not _NAME.match(name):
            raise self.error((*path, "name"), f"missing or bad rule name {name!r} (letters, digits, . _ -)")
        metric = self.choice(data.get("metric"), (*path, "metric"), METRICS)
        condition = self._condition(data.get("condition"), (*path, "condition"), metric)
        window = self.duration(data.get("window", "5m"), (*path, "window"))
        if window < 1:
            raise self.error((*path, "window"), "must be at least 1s")
        hidden = getattr(condition, "relearn_after", -2) + 2  # read on top while an incident hides its buckets
        buckets = condition.history_buckets(int(window)) + 2 + hidden
        if buckets > MAX_BUCKETS:
            raise self.error(
                (*path, "window"),
                f"the condition's history needs {buckets} buckets of this window; at most {MAX_BUCKETS} (longer window or shorter history)",
            )
        return Rule(
            name=name,
            metric=metric,
            scope=self._scope(data.get("scope"), (*path, "scope"), metric),
            window_s=int(window),
            condition=condition,
            severity=self.choice(data.get("severity", "warning"), (*path, "severity"), SEVERITIES),
            channels=self._rule_channels(data.get("channels", ["log"]), (*path, "channels"), channels),
            description=self.string(data.get("description", ""), (*path, "description")),
            min_runs=self._min_runs(data.get("min_runs", 0), (*path, "min_runs"), metric),
            top_k=self._top_k(data.get("top_k", 0), (*path, "top_k")),
            **self._lifecycle(data, path, item_keys=self.mapping(value, path)),
        )

    def _lifecycle(self, data: dict[str, Any], path: KeyPath, *, item_keys: dict[str, Any]) -> dict[str, Any]:
        """for, keep_firing_for, resolve_after, repeat_interval (alias cooldown), no_data."""
        if "repeat_interval" in item_keys and "cooldown" in item_keys:
            raise self.error((*path, "cooldown"), "give repeat_interval or cooldown (its older name), not both")
        repeat_key = (
            "repeat_interval"
            if "repeat_interval" in item_keys or ("repeat_interval" in data and "cooldown" not in item_keys)
            else "cooldown"
        )
        resolve_after = int(self.number(data.get("resolve_after", 1), (*path, "resolve_after"), integer=True))
        if resolve_after < 1:
            raise self.error((*path, "resolve_after"), f"must be >= 1 (clear windows in a row), got {resolve_after}")
        return {
            "cooldown_s": int(self.duration(data.get(repeat_key, "1h"), (*path, repeat_key))),
            "for_s": int(self.duration(data.get("for", 0), (*path, "for"))),
            "keep_firing_for_s": int(self.duration(data.get("keep_firing_for", 0), (*path, "keep_firing_for"))),
            "resolve_after": resolve_after,
            "no_data": self.choice(data.get("no_data", "keep"), (*path, "no_data"), NO_DATA),
        }

    def _min_runs(self, value: Any, path: KeyPath, metric: str) -> int:
        count = int(self.number(value, path, integer=True))
        if count < 0:
            raise self.error(path, f"must be >= 0, got {count}")
        if count and metric in DERIVED_METRICS:
            raise self.error(path, f"does not apply to {metric}")
        return count

    def _top_k(self, value: Any, path: KeyPath) -> int:
        count = int(self.number(value, path, integer=True))
        if count < 0:
            raise self.error(path, f"must be >= 0 (0 = every scope), got {count}")
        return count

    def _condition(self, value: Any, path: KeyPath, metric: str) -> Detector:
        data = self.mapping(value, path)
        if not data:
            raise self.error(path, "missing condition (kind: threshold or anomaly)")
        kind = self.choice(data.get("kind"), (*path, "kind"), tuple(DETECTORS))
        if metric in THRESHOLD_ONLY and kind != "threshold":
            raise self.error((*path, "kind"), f"{metric} supports only kind: threshold")
        return self.dataclass(DETECTORS[kind], data, path, skip=("kind",))

    def _scope(self, value: Any, path: KeyPath, metric: str) -> dict[str, str]:
        scope = self.string_map(self.mapping(value, path, SCOPE_KEYS), path)
        self._version_scope(scope, path, metric)
        if metric in RUN_STATE_METRICS and "model" in scope:
            raise self.error((*path, "model"), f"{metric} is per project or per agent, not per model")
        wildcards = [k for k, v in scope.items() if v == "*"]
        if "project" in wildcards:
            raise self.error(
                (*path, "project"), "every project is evaluated separately; name one project or leave it out"
            )
        if len(wildcards) > 1:
            raise self.error(
                path,
                "at most one of agent, model, user, session, version may be '*' (one incident per agent, model, user, session or version)",
            )
        self._run_scope(scope, path, metric)
        return scope

    def _run_scope(self, scope: dict[str, str], path: KeyPath, metric: str) -> None:
        """Per user, session or version the figures are whole runs' (alerts.run_scopes): one of
        those keys at most, an agent filter beside it at most, and only the metrics runs give."""
        keys = [k for k in RUN_SCOPE_KEYS if k in scope and not (k == "version" and metric in VERSION_METRICS)]
        if metric in RUN_SCOPE_ONLY and not keys:
            raise self.error((*path,), f"{metric} is per user, session or version (scope user, session or version)")
        for key in keys:
            if key != "version" and scope[key] != "*":
                raise self.error((*path, key), f'{key} takes "*" only (one incident per {key})')
            if "model" in scope or scope.get("agent") == "*" or len(keys) > 1 or metric not in RUN_SCOPE_METRICS:
                raise self.error(
                    (*path, key),
                    f"per {key}: metric one of {', '.join(RUN_SCOPE_METRICS)}, with an agent filter at most"
                    + (f"; or one of {', '.join(VERSION_METRICS)}" if key == "version" else ""),
                )

    def _version_scope(self, scope: dict[str, str], path: KeyPath, metric: str) -> None:
        """The version_* metrics (alerts.version_rules) compare versions: a version scope and an agent filter at most.
        A version scope on another metric is a per-run one (``_run_scope``)."""
        if metric in VERSION_METRICS:
            for key in set(scope) - {"version", "agent", "project"}:
                raise self.error((*path, key), f"{metric} is per version, with an agent filter at most")
            if scope.get("agent") == "*":
                raise self.error((*path, "agent"), f'{metric} takes an agent name, not "*"')

    def _rule_channels(self, value: Any, path: KeyPath, channels: dict[str, Channel]) -> tuple[str, ...]:
        names = self.strings(value, path)
        for i, name in enumerate(names):
            if name not in channels:
                raise self.error((*path, i), f"unknown channel {name!r} (defined: {', '.join(sorted(channels))})")
        return names


def _dotted(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", type(None): "nothing"}.get(
        type(value), type(value).__name__
    )

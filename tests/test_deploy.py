"""deploy/: what can be checked without Docker or Kubernetes. The files parse; the Compose file
and the manifests name only settings that exist and commands the CLI accepts; the ClickHouse
cluster they describe is the one the collectors' DDL is written for (2 shards x 2 replicas,
replica names unique across the cluster); the SQL they apply parses with ClickHouse's parser."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from agentwatch.cli import build_parser

from agentwatch_platform.alerts.settings import AlertsSettings
from agentwatch_platform.collector.settings import Settings
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from agentwatch_platform.dashboard.config import DashboardConfig

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
COMPOSE = DEPLOY / "compose" / "docker-compose.yml"
K8S = DEPLOY / "k8s"
CLICKHOUSE_NODES = {"ch-s1-r1", "ch-s1-r2", "ch-s2-r1", "ch-s2-r2"}
KNOWN = (
    {name for name, _, _ in Settings.describe()}
    | {name for name, _, _ in AlertsSettings.describe()}  # the alerts plugin's, read by the collector
    | {name for name, _, _ in DashboardConfig.describe()}
)


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def manifests() -> list[dict[str, Any]]:
    return [
        doc
        for path in sorted(K8S.glob("*.yaml"))
        if path.name != "kustomization.yaml"
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def variables(text: str) -> set[str]:
    return set(re.findall(r"\bAGENTWATCH_[A-Z0-9_]+\b", text))


def test_every_yaml_and_xml_file_parses() -> None:
    yamls = sorted(DEPLOY.rglob("*.y*ml"))
    xmls = sorted(DEPLOY.rglob("*.xml"))
    assert len(yamls) >= 7 and len(xmls) >= 7
    for path in yamls:
        assert list(yaml.safe_load_all(path.read_text())), path
    for path in xmls:
        assert ET.parse(path).getroot().tag == "clickhouse", path


def test_compose_has_the_pieces_deploy_readme_describes() -> None:
    services = compose()["services"]
    assert set(services) == CLICKHOUSE_NODES | {"keeper", "collector-1", "collector-2", "lb", "dashboard"}
    for name in ("collector-1", "collector-2"):
        env = services[name]["environment"]
        assert env["AGENTWATCH_CLICKHOUSE_CLUSTER"] == cluster_name()
        assert env["AGENTWATCH_CLICKHOUSE_URL"].startswith("http://") and env["AGENTWATCH_COLLECTOR_ID"] == name
    assert {services["collector-1"]["volumes"][0], services["collector-2"]["volumes"][0]} == {
        "collector-1:/var/lib/agentwatch",
        "collector-2:/var/lib/agentwatch",
    }, "each collector has a spool of its own"
    upstream = re.findall(r"server (\S+):4318", (DEPLOY / "compose" / "nginx.conf").read_text())
    assert sorted(upstream) == ["collector-1", "collector-2"]
    assert services["dashboard"]["environment"]["AGENTWATCH_COLLECTOR_URL"] == "http://lb:4318"


def test_named_settings_exist() -> None:
    texts = [COMPOSE.read_text(), (DEPLOY / "Dockerfile").read_text(), *(p.read_text() for p in K8S.glob("*.yaml"))]
    named = set().union(*(variables(text) for text in texts))
    assert {
        "AGENTWATCH_CLICKHOUSE_URL",
        "AGENTWATCH_CLICKHOUSE_CLUSTER",
        "AGENTWATCH_COLLECTOR_ID",
        "AGENTWATCH_COLLECTOR_URL",
    } <= named
    assert named <= KNOWN, f"settings that do not exist: {sorted(named - KNOWN)}"


def test_the_image_allocates_arrow_buffers_through_glibc_from_the_start() -> None:
    """Set in the image for every process in it (pyarrow reads it once, when it is first imported)."""
    assert "ENV ARROW_DEFAULT_MEMORY_POOL=system" in (DEPLOY / "Dockerfile").read_text().splitlines()


def test_commands_are_ones_the_cli_accepts() -> None:
    commands = [s["command"] for s in compose()["services"].values() if s.get("image", "").startswith("agentwatch")]
    commands += [
        c["args"]
        for doc in manifests()
        if doc["kind"] in ("StatefulSet", "Deployment")
        for c in doc["spec"]["template"]["spec"]["containers"]
    ]
    assert len(commands) == 5
    for argv in commands:
        assert build_parser().parse_args(argv).command in ("collector", "dashboard"), argv


def cluster_name() -> str:
    root = ET.parse(DEPLOY / "clickhouse" / "config.d" / "cluster.xml").getroot()
    [cluster] = list(root.find("remote_servers"))  # type: ignore[arg-type]
    return cluster.tag


def test_the_cluster_is_two_shards_of_two_replicas_with_unique_replica_names() -> None:
    root = ET.parse(DEPLOY / "clickhouse" / "config.d" / "cluster.xml").getroot()
    shards = root.findall(f"remote_servers/{cluster_name()}/shard")
    assert [len(s.findall("replica")) for s in shards] == [2, 2]
    hosts = {r.findtext("host") for s in shards for r in s.findall("replica")}
    assert hosts == CLICKHOUSE_NODES
    macros = {p.stem: ET.parse(p).getroot().find("macros") for p in (DEPLOY / "clickhouse" / "macros").glob("*.xml")}
    assert set(macros) == CLICKHOUSE_NODES
    assert {(m.findtext("shard"), m.findtext("replica")) for m in macros.values()} == {  # type: ignore[union-attr]
        (node[4], node) for node in CLICKHOUSE_NODES
    }
    services = compose()["services"]
    for node in CLICKHOUSE_NODES:
        assert (
            f"../clickhouse/macros/{node}.xml:/etc/clickhouse-server/config.d/macros.xml:ro"
            in services[node]["volumes"]
        )


def test_kubernetes_manifests_describe_the_same_cluster() -> None:
    docs = manifests()
    assert all(doc.get("apiVersion") and doc.get("kind") and doc.get("metadata", {}).get("name") for doc in docs)
    kinds = {doc["kind"] for doc in docs}
    assert {
        "ClickHouseInstallation",
        "ClickHouseKeeperInstallation",
        "StatefulSet",
        "Deployment",
        "Service",
        "ConfigMap",
        "Job",
    } <= kinds
    [chi] = [d for d in docs if d["kind"] == "ClickHouseInstallation"]
    [cluster] = chi["spec"]["configuration"]["clusters"]
    assert cluster["name"] == cluster_name() and cluster["layout"] == {"shardsCount": 2, "replicasCount": 2}
    [config] = [d for d in docs if d["kind"] == "ConfigMap"]
    assert config["data"]["AGENTWATCH_CLICKHOUSE_CLUSTER"] == cluster_name()
    [collectors] = [d for d in docs if d["kind"] == "StatefulSet"]
    assert collectors["spec"]["replicas"] >= 2 and collectors["spec"]["volumeClaimTemplates"], (
        "collectors keep a spool each"
    )
    kustomized = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    assert sorted(kustomized) == sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")


@pytest.fixture(scope="module")
def parser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChdbStore]:
    store = ChdbStore(tmp_path_factory.mktemp("parser") / "chdb", result_cache_s=0)
    yield store
    store.close()


def test_the_sql_they_apply_parses(parser: ChdbStore) -> None:
    sql = (DEPLOY / "clickhouse" / "schema.sql").read_text() + "\n" + (DEPLOY / "clickhouse" / "init.sql").read_text()
    text = "\n".join(line for line in sql.splitlines() if not line.startswith("--"))
    statements = [s.strip() for s in text.split(";\n") if s.strip()]
    assert len(statements) > 20
    for statement in statements:
        assert parser.query("SELECT formatQuery({sql:String}) AS f", {"sql": statement})[0]["f"]
